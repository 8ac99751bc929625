"""One input of the contract grid, and how its outcome is classified.

A ``Case`` is one call of a public entry point (a function, an estimator's fit, a module's forward, a loader, a CLI
command) on one bad or edge input. Its outcome is one of

- ``clear error``: a ValueError or TypeError (or, where the convention is another type, an OSError, a KeyError, an
  ArithmeticError, a ModuleNotFoundError) whose message names one of the case's ``names``: the argument (or file,
  CLI option, cause) at fault;
- ``warning``: a result that passes the case's check (finite, equal to a float64 reference), with a warning;
- ``correct``: such a result, without a warning;
- ``silently wrong``: a result that fails the check (NaN, zeros, a false claim), or any result for an input that
  must be refused;
- ``unhelpful crash``: any other exception: a raw torch/numpy/LAPACK/safetensors error, a message that names no
  argument or blames the wrong one, an internal function's name.

The contract: every case ends as one of the first three. ``owner="issue-21"`` marks the scale-safety cases of the
kernels the issue-21 branch owns (cosine norms, moments, CKA, solves, death times), counted separately.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import traceback
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

OUTCOMES = ("clear error", "warning", "correct", "silently wrong", "unhelpful crash")
ACCEPTABLE = OUTCOMES[:3]
SCALE_SAFETY = "issue-21"

# Exception types that are a conventional way to refuse an input (when the message names what is wrong).
_CLEAR_TYPES = (ValueError, TypeError, LookupError, OSError, ArithmeticError, ModuleNotFoundError)
# Warnings that are about the library's environment, not about the input.
_IGNORED_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ResourceWarning, ImportWarning)
_PYTHON_KWARG = re.compile(r"([\w.]+)\(\) got an unexpected keyword argument")


@dataclass
class Case:
    family: str
    target: str
    label: str
    run: Callable[[], Any]
    names: tuple[str, ...] = ()
    valid: bool = True
    check: Callable[[Any], str | None] | None = None
    must_succeed: bool = False
    owner: str | None = None
    slow: bool = False

    @property
    def id(self) -> str:
        return f"{self.family}:{self.target}:{self.label}"


def names_in(message: str, names: Iterable[str]) -> bool:
    """Whether ``message`` names one of ``names`` as a word (``x`` in ``"x: ..."``, not in ``"max"``)."""
    for name in names:
        if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", message):
            return True
    return False


def classify_error(case: Case, error: BaseException) -> tuple[str, str]:
    message = " ".join(str(error).split())
    detail = f"{type(error).__name__}: {message[:300]}"
    if not isinstance(error, _CLEAR_TYPES):
        return "unhelpful crash", detail
    internal = _PYTHON_KWARG.search(message)
    if internal and internal.group(1).split(".")[-1].startswith("_"):
        return "unhelpful crash", detail  # an internal function's signature error
    if case.must_succeed or not names_in(message, case.names):
        return "unhelpful crash", detail
    return "clear error", detail


def run_case(case: Case) -> tuple[str, str]:
    """Run ``case`` and return ``(outcome, detail)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = case.run()
        except SystemExit as exit_:  # argparse exits on its own errors
            return "unhelpful crash", f"SystemExit({exit_.code}) escaped"
        except Exception as error:
            return classify_error(case, error)
    relevant = [w for w in caught if not issubclass(w.category, _IGNORED_WARNINGS)]
    if not case.valid:
        return "silently wrong", f"accepted an input that must be refused; returned {_short(result)}"
    problem = case.check(result) if case.check is not None else None
    if problem:
        return "silently wrong", problem
    if relevant:
        return "warning", f"{relevant[0].category.__name__}: {str(relevant[0].message)[:200]}"
    return "correct", _short(result)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 120 else text[:117] + "..."


# --- checks of results ---------------------------------------------------------------------------------------------


def as_array(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype in (torch.bfloat16, torch.float16):
            value = value.float()
        return value.numpy()
    return np.asarray(value)


def close_to(reference: Any, *, rtol: float = 1e-5, atol: float = 1e-8, shape: tuple | None = None):
    """A check: the result is finite and equal to ``reference`` (an array or a zero-argument callable computing it
    in float64) within the tolerances."""

    def check(result: Any) -> str | None:
        expected = np.asarray(reference() if callable(reference) else reference, dtype=np.float64)
        got = as_array(result).astype(np.float64)
        if shape is not None and got.shape != shape:
            return f"shape {got.shape}, expected {shape}"
        if got.shape != expected.shape:
            return f"shape {got.shape}, expected {expected.shape}"
        if not np.all(np.isfinite(got)):
            return f"non-finite values in the result: {_short(got.ravel()[:6])}"
        if not np.allclose(got, expected, rtol=rtol, atol=atol):
            worst = np.max(np.abs(got - expected))
            sample = f"{got.ravel()[:3]} vs {expected.ravel()[:3]}"
            return f"differs from the float64 reference by up to {worst:.3g} (e.g. {sample})"
        return None

    return check


def finite_in(low: float = -math.inf, high: float = math.inf):
    """A check: a finite number (or array) within [low, high]."""

    def check(result: Any) -> str | None:
        got = as_array(result).astype(np.float64)
        if not np.all(np.isfinite(got)):
            return f"non-finite result {_short(got.ravel()[:6])}"
        if np.any(got < low - 1e-6) or np.any(got > high + 1e-6):
            return f"result {_short(got.ravel()[:6])} outside [{low}, {high}]"
        return None

    return check


def all_of(*checks: Callable[[Any], str | None]):
    def check(result: Any) -> str | None:
        for one in checks:
            problem = one(result)
            if problem:
                return problem
        return None

    return check


# --- the command line -------------------------------------------------------------------------------------------


def cli_outcome(argv: list[str], option: str | None, *, forbidden: Iterable[str] = (), required: Iterable[str] = ()):
    """A runnable for a CLI case: ``latentstitch.cli.main(argv)`` in this process, its stdout/stderr captured.

    With ``option`` (a user error): it must exit with code 2 and print one line on stderr that names ``option``
    and holds no traceback; the returned value is then the exit code. Without: it must exit with 0, print none of
    ``forbidden`` and all of ``required`` (claims the run may not / must make).
    """

    def run() -> Any:
        from latentstitch.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exit_:
                code = exit_.code
            except Exception:
                raise RuntimeError(
                    "escaped the CLI: " + traceback.format_exc(limit=1).strip().splitlines()[-1]
                ) from None
        stderr = err.getvalue().strip()
        if option is not None:
            lines = stderr.splitlines()
            if code != 2 or len(lines) != 1 or "Traceback" in stderr:
                raise RuntimeError(f"exit code {code}, stderr {stderr[-300:]!r}")
            raise ValueError(lines[0])  # classified as a clear error if it names the option
        if code != 0:
            raise RuntimeError(f"exit code {code}: {stderr[-300:]!r}")
        return out.getvalue()

    return run


def output_check(forbidden: Iterable[str] = (), required: Iterable[str] = ()):
    forbidden, required = tuple(forbidden), tuple(required)

    def check(printed: str) -> str | None:
        for text in forbidden:
            if text in printed:
                return f"printed {text!r}: a claim this run cannot support"
        for text in required:
            if text not in printed:
                return f"did not print {text!r}"
        return None

    return check
