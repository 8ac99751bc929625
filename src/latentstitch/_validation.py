"""Shared input checking and numpy/torch conversion.

Every public function of latentstitch accepts numpy arrays or torch tensors and returns the type it was given.
The math is written once, in torch: numpy inputs are viewed as tensors without a copy (``torch.from_numpy``), and
results are handed back as numpy arrays of the same dtype. This module is the one place that does the conversion and
the checks, so that every error names the argument at fault and says what was expected.

Every public function and estimator validates each parameter here, once, where it enters, naming it: integers
(``check_int``, ``check_positive_int``), real numbers in a range (``check_number``, ``check_positive``,
``check_nonnegative``, ``check_probability``), seeds (``check_seed``), choices (``check_choice``), flags
(``check_bool``), keyword arguments (``check_kwargs``), torch dtypes (``check_float_dtype``) and output paths
(``check_output_path``); ``model_input_errors`` names the input when a model cannot run on it. Files are read by
the validated readers of ``latentstitch._persist`` (``read_safetensors``, ``read_json``).

Array-likes. As in scikit-learn, plain Python lists and tuples of numbers (and any object numpy converts to a
numeric array, e.g. a pandas DataFrame) are accepted wherever an array is: they are converted to a float64 numpy
array, and results come back as numpy arrays. A numpy array or torch tensor of an integer or boolean dtype is
refused with a TypeError asking for an explicit conversion: its dtype is the caller's choice, and converting
integer data silently would hide a decision (uint8 images need a scale, token ids are not coordinates).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import numpy as np
import torch

ArrayLike = np.ndarray | torch.Tensor

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def is_tensor(x: object) -> bool:
    return isinstance(x, torch.Tensor)


def as_float_tensor(
    x: object,
    name: str,
    *,
    ndim: int | Sequence[int] | None = None,
    min_rows: int | None = None,
    finite: bool = True,
) -> torch.Tensor:
    """View ``x`` as a floating-point torch tensor, checking type, dtype, rank, size and finiteness.

    Numpy arrays are shared with the returned tensor, not copied. ``name`` is the argument name used in errors.
    """
    if isinstance(x, np.ndarray):
        if x.dtype.kind != "f":
            raise TypeError(
                f"{name}: expected a floating-point array, got dtype {x.dtype}; convert it first, "
                f"for example {name}.astype(np.float32)"
            )
        if any(s < 0 for s in x.strides):
            x = np.ascontiguousarray(x)
        t = torch.from_numpy(x)
    elif isinstance(x, torch.Tensor):
        if x.dtype not in _FLOAT_DTYPES:
            raise TypeError(
                f"{name}: expected a floating-point tensor, got dtype {x.dtype}; convert it first, "
                f"for example {name}.float()"
            )
        t = x
    else:
        t = torch.from_numpy(_array_from_array_like(x, name))
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if t.ndim not in allowed:
            want = " or ".join(f"{d}-D" for d in allowed)
            raise ValueError(f"{name}: expected a {want} array, got shape {tuple(t.shape)}")
    if min_rows is not None and (t.ndim == 0 or t.shape[0] < min_rows):
        got = 0 if t.ndim == 0 else t.shape[0]
        raise ValueError(f"{name}: expected at least {min_rows} rows (samples), got {got}")
    if finite:
        check_finite(t, name)
    return t


class RowError(ValueError):
    """An error about one row of an argument (``name``, ``row``).

    Chunked code computes on a part of the input at a time; ``shifted(offset)`` re-creates the error for the row of
    the whole input, so the message a user reads always counts rows of what they passed.
    """

    def __init__(self, name: str, row: int):
        self.name, self.row = name, row
        super().__init__(self.describe())

    def describe(self) -> str:
        return f"{self.name}: row {self.row} is invalid"

    def shifted(self, offset: int) -> RowError:
        return type(self)(self.name, self.row + offset)


class NonFiniteError(RowError):
    """An argument holds NaN or inf."""

    def describe(self) -> str:
        return f"{self.name}: contains NaN or inf (first at row {self.row})"


def _sum_dtype(t: torch.Tensor) -> torch.dtype:
    # Half-precision sums overflow float16's range (65504) long before the data holds an inf.
    return torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else t.dtype


def finite_flag(t: torch.Tensor) -> torch.Tensor:
    """A 0-d boolean tensor on ``t``'s device: true when ``t`` holds no NaN or inf (reading it is the only sync).

    Any NaN or inf makes the sum non-finite, and a sum is one vectorised pass (``torch.isfinite`` on the CPU is
    ~40x slower). A sum of finite values can overflow: a false flag is a hint, confirmed by ``check_finite``.
    """
    return torch.isfinite(t.sum(dtype=_sum_dtype(t)))


def check_finite(t: torch.Tensor, name: str, *, row_offset: int = 0, checks: DeferredChecks | None = None) -> None:
    """Raise a ``NonFiniteError`` naming ``name`` and the first row holding NaN or inf.

    With ``checks``, the test is queued on the device (``DeferredChecks.add``) and the error is raised when the
    checks are resolved, still naming the first bad row; on the CPU it runs at once either way.
    """
    if t.numel() == 0:
        return

    def locate() -> None:
        ok = torch.isfinite(t)
        if bool(ok.all()):
            return  # the sum overflowed; the values are finite
        bad = (~ok).reshape(t.shape[0], -1).any(dim=1).nonzero()[0, 0].item() if t.ndim > 0 else 0
        raise NonFiniteError(name, bad + row_offset)

    if checks is None or reading_is_free(t.device):
        if not bool(finite_flag(t)):
            locate()
        return
    # Deferred: find the first bad row on the device now (an exact pass, cheap there), keeping only that index, so
    # that the data need not stay alive until the checks are resolved.
    rows_ok = torch.isfinite(t.reshape(t.shape[0], -1)).all(dim=1) if t.ndim > 0 else torch.isfinite(t)[None]
    first = (~rows_ok).int().argmax()
    ok = rows_ok.all()

    def report() -> None:
        raise NonFiniteError(name, int(first) + row_offset)

    checks.add(ok, report)


# --- checks that do not stall the device -----------------------------------------------------------------------

# Tests set this to run the accelerator paths on the CPU: checks deferred, no loop stopped early by reading a flag.
DEFER_ON_CPU = False


def reading_is_free(device: torch.device) -> bool:
    """Whether reading a tensor of ``device`` on the host costs nothing (the CPU): code may then check flags and stop
    loops early. On an accelerator a read waits for every queued kernel, so such code takes its no-wait path."""
    return device.type == "cpu" and not DEFER_ON_CPU


class DeferredChecks:
    """Checks whose outcome is a device flag, read together with one host synchronisation.

    Reading a GPU tensor on the host (``bool(flag)``, ``.item()``) waits for every queued kernel, so a check per
    chunk of a computation serialises the host and the device (issue 21 measured 736 such waits in one projection).
    ``add(ok, on_failure)`` queues a 0-d boolean tensor; ``resolve()`` reads all queued flags at once and, for each
    false one in the order they were added, calls its ``on_failure``, which raises the precise error (naming the
    first bad row) or repairs the result it guards. Flags on the CPU, where reading costs nothing, are read at once,
    so CPU errors surface before any further work.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[torch.Tensor, Callable[[], None]]] = []

    def add(self, ok: torch.Tensor, on_failure: Callable[[], None]) -> None:
        if reading_is_free(ok.device):
            if not bool(ok):
                on_failure()
            return
        self._pending.append((ok.reshape(()), on_failure))

    def __len__(self) -> int:
        return len(self._pending)

    def resolve(self) -> None:
        """Read every queued flag (one synchronisation per device) and handle the failures in order."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        device = pending[0][0].device
        if bool(torch.stack([ok.to(device) for ok, _ in pending]).all()):
            return
        for ok, on_failure in pending:
            if not bool(ok):
                on_failure()


_FLAGS: ContextVar[list[torch.Tensor] | None] = ContextVar("latentstitch_validity_flags", default=None)


@contextmanager
def collect_flags() -> Iterator[list[torch.Tensor]]:
    """Within the block, ``report_flag`` hands its flags to the yielded list instead of asking for a check now.

    A chunked computation uses it to learn, without waiting for the device, whether a function's fast path was
    valid for a chunk (e.g. the cosine similarity's row norms were within the range its arithmetic is exact in);
    the caller then checks the flags once and redoes only the failing chunks carefully.
    """
    flags: list[torch.Tensor] = []
    token = _FLAGS.set(flags)
    try:
        yield flags
    finally:
        _FLAGS.reset(token)


def report_flag(ok: torch.Tensor) -> bool:
    """Give ``ok`` (0-d boolean: "the fast path was valid") to the enclosing ``collect_flags`` block. Returns
    False when there is none: the caller then reads the flag itself and falls back to its careful path."""
    flags = _FLAGS.get()
    if flags is None:
        return False
    flags.append(ok.reshape(()))
    return True


@contextmanager
def careful_mode() -> Iterator[None]:
    """Inside, ``report_flag`` finds no collector: functions check themselves and take their careful paths."""
    token = _FLAGS.set(None)
    try:
        yield
    finally:
        _FLAGS.reset(token)


# --- scale-safe arithmetic ---------------------------------------------------------------------------------------


def safe_norm_range(dtype: torch.dtype, width: int) -> tuple[float, float]:
    """Row norms ``sqrt(sum x_i^2)`` computed plainly in ``dtype`` are exact to rounding inside ``(low, high)``.

    Above ``high`` the sum of squares overflows; below ``low`` the squares that underflow (each under the
    smallest normal number) can add up to more than one rounding unit of the sum, over ``width`` terms.
    """
    info = torch.finfo(dtype)
    return math.sqrt(width * info.tiny / info.eps), math.sqrt(info.max) / 2


def power_of_two_scale(magnitude: torch.Tensor) -> torch.Tensor:
    """``2^-e`` with ``magnitude = m 2^e``, ``m`` in [0.5, 1): multiplying by it is exact and brings the largest
    magnitude into [0.5, 1). Zero (or non-finite) magnitudes give 1. Elementwise, on the device (no sync)."""
    _, exponent = torch.frexp(magnitude)
    usable = torch.isfinite(magnitude) & (magnitude > 0)
    return torch.where(usable, torch.ldexp(torch.ones_like(magnitude), -exponent), torch.ones_like(magnitude))


def rescaled_row_norms(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Row norms of a 2-D tensor whatever its magnitudes, as BLAS ``nrm2`` computes them: each row is first scaled
    by the power of two that brings its largest entry into [0.5, 1), so no square overflows or underflows.

    Returns ``(scaled_rows, scaled_norms, scales)``, float64 for float32 and narrower inputs, (n, d), (n, 1), (n, 1):
    the row norm is ``scaled_norms / scales`` and the unit row ``scaled_rows / scaled_norms``. Zero rows have norm
    0 (and scale 1). Differentiable; needs finite input.
    """
    work = t if t.dtype == torch.float64 else t.to(torch.float64)
    scales = power_of_two_scale(work.detach().abs().amax(dim=1, keepdim=True))
    scaled = work * scales
    return scaled, torch.linalg.vector_norm(scaled, dim=1, keepdim=True), scales


def check_same_width(a: torch.Tensor, b: torch.Tensor, name_a: str, name_b: str) -> None:
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(
            f"{name_a} and {name_b} must have the same number of features (last dimension): "
            f"got {a.shape[-1]} and {b.shape[-1]}"
        )


def check_same_rows(a: torch.Tensor, b: torch.Tensor, name_a: str, name_b: str) -> None:
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"{name_a} and {name_b} must have the same number of samples (rows): got {a.shape[0]} and {b.shape[0]}"
        )


def match_reference(t: torch.Tensor, reference: torch.Tensor, name: str, reference_name: str) -> torch.Tensor:
    """Bring ``t`` to ``reference``'s dtype and device.

    Two torch tensors on different devices are an error (moving data between devices silently is a performance
    trap); a numpy-born tensor (always on the CPU) is moved to the reference's device.
    """
    if t.device != reference.device and t.device.type != "cpu":
        raise ValueError(
            f"{name} is on device {t.device} but {reference_name} is on {reference.device}; "
            "move them to the same device"
        )
    return t.to(device=reference.device, dtype=reference.dtype)


def wrap_like(result: torch.Tensor, like: object) -> ArrayLike:
    """Return ``result`` as the type of ``like``: torch stays torch; numpy (or a list, or any other array-like) in,
    numpy out (same dtype)."""
    if not isinstance(like, torch.Tensor):
        out = result.detach().cpu()
        if out.dtype == torch.bfloat16:
            out = out.float()
        return out.numpy()
    return result


def to_numpy(x: object, name: str) -> np.ndarray:
    """A numpy view or copy of an array-like (for code paths that call numpy/scikit-learn)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()
    if isinstance(x, np.ndarray):
        return x
    return _array_from_array_like(x, name)


def _array_from_array_like(x: object, name: str) -> np.ndarray:
    """A float numpy array from a list, tuple or other array-like (scikit-learn's convention: integers and booleans
    become float64); anything else is a TypeError naming the argument."""
    if (
        x is None
        or isinstance(x, (str, bytes, dict, set, frozenset))
        or not (isinstance(x, (list, tuple)) or hasattr(x, "__array__"))
    ):
        raise TypeError(
            f"{name}: expected an array (numpy array, torch tensor, or a list of numbers), got {type(x).__name__}"
        )
    try:
        array = np.asarray(x)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{name}: could not be read as a numeric array ({error})") from None
    if array.dtype.kind in "biu":
        array = array.astype(np.float64)
    elif array.dtype.kind != "f":
        raise TypeError(
            f"{name}: expected numbers, got values of dtype {array.dtype} (ragged nested lists, strings or objects?)"
        )
    return array


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
    if dtype not in _FLOAT_DTYPES or not isinstance(dtype, torch.dtype):
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


#: torch's own message when batch normalisation in train mode sees one value per channel.
_BATCHNORM_MESSAGE = "Expected more than 1 value per channel when training"


@contextmanager
def model_input_errors(x: object, name: str, model: str = "the model") -> Iterator[None]:
    """Run a model on the input ``x`` (the argument ``name``), turning torch's errors that are really about the input
    into errors naming it: a one-sample training batch through batch normalisation, and inputs of an integer or
    boolean dtype that the model's floating-point layers cannot take (token ids for an embedding layer are fine:
    nothing is converted, only the error is explained)."""
    try:
        yield
    except ValueError as error:
        if _BATCHNORM_MESSAGE not in str(error):
            raise
        raise ValueError(
            f"{name}: {model} has batch normalisation, which in train mode needs more than one value per channel "
            "(here a batch of one sample); give at least 2 samples or call .eval() to use the running statistics"
        ) from None
    except (RuntimeError, TypeError, NotImplementedError) as error:
        dtype = getattr(x, "dtype", None)
        if not isinstance(x, (torch.Tensor, np.ndarray)) or dtype is None or _is_floating(dtype):
            raise
        detail = " ".join(str(error).split())[:200]
        raise TypeError(
            f"{name}: {model} could not run on inputs of dtype {dtype} ({detail}); give floating-point inputs, "
            f"e.g. images as {name}.float() / 255"
        ) from None


def _is_floating(dtype: object) -> bool:
    if isinstance(dtype, torch.dtype):
        return dtype.is_floating_point
    return np.dtype(dtype).kind == "f"


def channels_as_rows(x: torch.Tensor, name: str) -> torch.Tensor:
    """Activations as rows of features, for per-feature matching (Dr. Frankenstein's convention).

    (N, C, H, W) feature maps become (N*H*W, C): every spatial position is a sample of the C channels, as a 1x1
    convolution sees them. (N, T, D) token sequences become (N*T, D). (N, D) is returned unchanged.
    """
    if x.ndim == 2:
        return x
    if x.ndim == 3:
        return x.reshape(-1, x.shape[-1])
    if x.ndim == 4:
        return x.permute(0, 2, 3, 1).reshape(-1, x.shape[1])
    raise ValueError(f"{name}: expected (N, D), (N, T, D) or (N, C, H, W) activations, got shape {tuple(x.shape)}")


def flatten_samples(x: torch.Tensor) -> torch.Tensor:
    """Activations as one row per sample: (N, ...) -> (N, prod(...)), the convention of CKA and CCA (N may be 0)."""
    return x.reshape(x.shape[0], math.prod(x.shape[1:]))
