"""Hyperparameter checks: every public function and estimator validates each parameter here, once, where it
enters, naming it and saying what was expected.

Integers (``check_int``, ``check_positive_int``), real numbers in a range (``check_number``, ``check_positive``,
``check_nonnegative``, ``check_probability``), seeds (``check_seed``), choices (``check_choice``), flags
(``check_bool``), keyword arguments (``check_kwargs``), saved states (``check_state``), devices (``check_device``),
torch dtypes (``check_float_dtype``) and output paths (``check_output_path``). Files are read by the validated
readers of ``latentstitch._core.persist`` (``read_safetensors``, ``read_json``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from latentstitch._core.dtypes import FLOAT_DTYPES


def check_int(value: object, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (Python or numpy; not a bool, not a float such as 2.0) in ``[minimum, maximum]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an integer, got {value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}: expected an integer <= {maximum}, got {value}")
    return int(value)


def check_positive_int(value: object, name: str, *, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (1 by default): sizes, counts, periods."""
    return check_int(value, name, minimum=minimum)


def check_optional_positive_int(value: object, name: str, *, minimum: int = 1) -> int | None:
    """None, or an integer >= ``minimum``."""
    return None if value is None else check_int(value, name, minimum=minimum)


def check_bool(value: object, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def check_number(
    value: object,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """A finite real number (not a bool, not a string) in the interval from ``low`` to ``high``, each end closed
    unless ``low_open`` / ``high_open``. NaN and infinities are refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a number, got {value!r} ({type(value).__name__})")
    number = float(value)
    below = low is not None and (number < low or (low_open and number == low))
    above = high is not None and (number > high or (high_open and number == high))
    if not np.isfinite(number) or below or above:
        if high is None and low is not None:
            span = f"{'>' if low_open else '>='} {low:g}"
        elif low is None and high is not None:
            span = f"{'<' if high_open else '<='} {high:g}"
        elif low is None:
            span = "(any real)"
        else:
            span = f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ValueError(f"{name}: expected a finite number {span}, got {value!r}")
    return number


def check_nonnegative(value: object, name: str) -> float:
    """A finite real number >= 0 (regularisation strengths, tolerances)."""
    return check_number(value, name, low=0.0)


def check_positive(value: object, name: str) -> float:
    """A finite real number > 0 (learning rates, temperatures, bandwidths, eps)."""
    return check_number(value, name, low=0.0, low_open=True)


def check_probability(value: object, name: str, *, low_open: bool = False, high_open: bool = False) -> float:
    """A number in [0, 1] (each end excluded on request): momenta, dropout rates, fractions, quantiles."""
    return check_number(value, name, low=0.0, high=1.0, low_open=low_open, high_open=high_open)


def check_ridges(ridges: Any, name: str = "ridges") -> np.ndarray:
    """A non-empty sequence of finite numbers >= 0 (the candidates of a ridge path), as a float64 vector."""
    try:
        values = np.asarray(ridges, dtype=np.float64).reshape(-1) if not isinstance(ridges, (str, bytes)) else None
    except (TypeError, ValueError):
        values = None
    if values is None or values.size == 0 or not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"{name}: expected a non-empty sequence of finite numbers >= 0, got {ridges!r}")
    return values


#: Seeds are what numpy, torch and scikit-learn all accept: integers in [0, 2**32 - 1].
MAX_SEED = 2**32 - 1


def check_seed(value: object, name: str = "seed", *, allow_none: bool = False) -> int | None:
    """A random seed: an integer in [0, 2**32 - 1] (or None, meaning fresh entropy, where ``allow_none``)."""
    if value is None and allow_none:
        return None
    return check_int(value, name, minimum=0, maximum=MAX_SEED)


def check_choice(value: object, name: str, choices: Sequence[str]) -> str:
    """One of ``choices`` (compared by equality; a value of another type, e.g. an array, is simply not one)."""
    try:
        valid = isinstance(value, type(choices[0])) and value in choices if choices else False
    except (TypeError, ValueError):  # unhashable or array-valued comparisons
        valid = False
    if not valid:
        raise ValueError(f"{name}: expected one of {', '.join(repr(c) for c in choices)}; got {value!r}")
    return value  # type: ignore[return-value]


def check_kwargs(options: Mapping[str, object], allowed: Iterable[str], name: str) -> None:
    """Refuse keyword arguments outside ``allowed``, naming them and where they were going (``name``)."""
    allowed = sorted(allowed)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        accepted = ", ".join(allowed) if allowed else "none"
        raise TypeError(
            f"{', '.join(unknown)}: unexpected keyword argument{'s' if len(unknown) > 1 else ''} for {name} "
            f"(it accepts: {accepted})"
        )


def check_state(
    state: object, required: Iterable[str], optional: Iterable[str] = (), name: str = "state"
) -> Mapping[str, torch.Tensor]:
    """A ``state_dict`` to restore: a mapping holding every ``required`` key, nothing outside ``required`` and
    ``optional``, and tensors only; errors name the keys at fault and the ones expected."""
    if not isinstance(state, Mapping):
        raise TypeError(f"{name}: expected a dict of tensors (what state_dict() returns), got {type(state).__name__}")
    required, optional = list(required), list(optional)
    missing = [k for k in required if k not in state]
    unknown = sorted(str(k) for k in state if k not in required and k not in optional)
    if missing or unknown:
        wrong = [f"missing key(s) {', '.join(missing)}"] if missing else []
        wrong += [f"unknown key(s) {', '.join(unknown)}"] if unknown else []
        raise ValueError(
            f"{name}: {'; '.join(wrong)}; expected what state_dict() returns (keys {', '.join(required + optional)})"
        )
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name}[{key!r}]: expected a tensor, got {type(value).__name__}")
    return state


def check_device(value: object, name: str = "device") -> torch.device | None:
    """None (meaning: where the data is), or a device torch knows (``"cpu"``, ``"cuda"``, ``"cuda:1"``, a
    ``torch.device``, an accelerator index) that this machine has."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, torch.device)):
        raise TypeError(f"{name}: expected a device such as 'cpu' or 'cuda:0' (or None), got {value!r}")
    try:
        device = torch.device(value)
    except RuntimeError as error:
        raise ValueError(
            f"{name}: {value!r} is not a usable device ({error}); expected e.g. 'cpu' or 'cuda:0'"
        ) from None
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"{name}: {value!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def check_float_dtype(dtype: object, name: str = "dtype") -> torch.dtype:
    """A floating-point torch dtype (float16, bfloat16, float32, float64)."""
    if dtype not in FLOAT_DTYPES or not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name}: expected a floating-point torch dtype such as torch.float32, got {dtype!r}")
    return dtype


def check_output_path(path: object, name: str = "path") -> Path:
    """A file path that can be written: not a folder, and in a folder that exists (checked before any work)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name}: expected a file path (str or os.PathLike), got {type(path).__name__}")
    target = Path(os.fspath(path))
    if target.is_dir():
        raise ValueError(f"{name}: {str(target)!r} is a folder; give a file name such as model.safetensors")
    if not target.parent.is_dir():
        raise ValueError(f"{name}: the folder {str(target.parent)!r} does not exist (for {str(target)!r})")
    return target


# --- declared constraints ---------------------------------------------------------------------------------------
# An estimator declares the rule for each constructor parameter once, as a class attribute
# ``_parameter_constraints = {"bias": check_bool, "ridge": rule(check_nonnegative), "folds": rule(check_int,
# minimum=2)}`` (scikit-learn's convention); ``Persistable._check_params`` applies every rule, naming the parameter,
# in ``fit`` and in ``load``. A class with a rule that spans parameters adds it by overriding ``_check_params`` and
# calling ``super()._check_params()`` first.


class Rule:
    """One parameter's check: ``rule(value, name)`` validates and returns the value. Wraps a ``check_*`` function
    with its keyword options, and reads as it was written (``rule(check_int, minimum=2)``) in docs and errors."""

    def __init__(self, check: Callable[..., Any], /, **options: Any):
        self.check = check
        self.options = options

    def __call__(self, value: object, name: str) -> Any:
        return self.check(value, name, **self.options)

    def __repr__(self) -> str:
        options = "".join(f", {key}={value!r}" for key, value in self.options.items())
        return f"rule({self.check.__name__}{options})"


def rule(check: Callable[..., Any], /, **options: Any) -> Rule:
    """A declared parameter rule: ``check(value, name, **options)``."""
    return Rule(check, **options)


def optional(check: Callable[..., Any], /, **options: Any) -> Rule:
    """A rule that also accepts ``None`` (the parameter's "not set" / "automatic" value)."""

    def check_optional(value: object, name: str, **kwargs: Any) -> Any:
        return None if value is None else check(value, name, **kwargs)

    check_optional.__name__ = f"optional_{check.__name__}"
    return Rule(check_optional, **options)


def check_declared(estimator: object) -> None:
    """Apply every rule of ``type(estimator)._parameter_constraints`` to the estimator's attributes."""
    for name, check in getattr(type(estimator), "_parameter_constraints", {}).items():
        check(getattr(estimator, name), name)
