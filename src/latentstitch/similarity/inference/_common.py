"""Pieces shared by the significance tests (``permutation_test``, ``bootstrap_ci``, ``pairwise_test``): the sign
that makes "larger" mean "more alike", the add-one p-value, the summary of a null distribution, the observed value
without its own small-sample warning, and the results' ``to_dict``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from latentstitch.similarity.inference._null_kernels import finite_ideal
from latentstitch.similarity.measures._registry import MeasureSpec
from latentstitch.similarity.measures._sample_size import SmallSampleWarning


def plain(value: Any) -> Any:
    """``value`` as JSON-ready Python: arrays and tuples to lists, numpy scalars to floats, ints and bools."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


class Result:
    """A test's result (a dataclass): ``to_dict()`` gives its fields as JSON-ready Python values."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def more_alike_sign(spec: MeasureSpec) -> float:
    """+1 for similarities, -1 for distances: multiplied in, larger always means more alike."""
    return 1.0 if spec.kind == "similarity" else -1.0


def tie_tolerance(value: float, dtype: Any = None) -> float:
    """How close a null value must come to ``value`` to count as a tie: the rounding of a measure computed in the
    data's precision (float64: 1e-9 relative; float32 and below: 1e-5 relative, a few hundred float32 ulps, so that
    a batched kernel's 0.99999994 and a loop's 1.0 on the same permutation are one tie)."""
    relative = 1e-9 if dtype in (None, torch.float64, np.float64) else 1e-5
    return relative * max(1.0, abs(value))


def add_one_p_value(value: float, null: np.ndarray, sign: float, tolerance: float | None = None) -> float:
    """``(1 + #{sign * null >= sign * value}) / (1 + len(null))``, ties (to rounding, ``tie_tolerance``) counted as
    extreme."""
    tolerance = tie_tolerance(value) if tolerance is None else tolerance
    extreme = np.count_nonzero(sign * null >= sign * value - tolerance)
    return (1 + extreme) / (1 + null.shape[0])


def summarize_null(spec: MeasureSpec, value: float, null: np.ndarray) -> tuple[float, float, float, float]:
    """``(null_mean, null_std, z_score, calibrated)``."""
    mean, std = float(null.mean()), float(null.std(ddof=1)) if null.shape[0] > 1 else 0.0
    sign = more_alike_sign(spec)
    difference = sign * (value - mean)
    z = difference / std if std > 0 else (0.0 if difference == 0 else math.copysign(math.inf, difference))
    ideal = finite_ideal(spec)
    span = sign * (ideal - mean)
    calibrated = difference / span if span > 0 else math.nan
    return mean, std, z, calibrated


def split_options(spec: MeasureSpec, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(options that follow x's rows, the others)."""
    rows = {k: v for k, v in options.items() if k in spec.row_options}
    return rows, {k: v for k, v in options.items() if k not in rows}


def quiet(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` with warnings silenced: resampled evaluations repeat what the observed one already warned."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def observed(spec: MeasureSpec, x: Any, y: Any, options: dict[str, Any]) -> float:
    """The measure on the data as the user would get it, without its own small-sample warning (the caller flags the
    result and warns once, at the user's line)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        return float(spec(x, y, **options))
