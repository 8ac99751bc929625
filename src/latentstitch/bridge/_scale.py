"""The anchors' scale: a bridge fitted on vectors of extreme magnitude (1e+200, 1e-200 in float64) works on them
multiplied by one power of two, exactly, and gives its answers back at the input's scale.

Every route's selection score (MRR, cosine, R^2, agreement) is unchanged when both sides are scaled by one factor,
and every translation route is equivariant to it (relative ridge units, standardisation, rotations): bridging
``c x`` with the map fitted on ``(c X, c Y)`` gives ``c y``. A power of two ``c`` makes the scaling exact, so the
answer is the one the unscaled inputs would give if their Gram matrices did not overflow or underflow. Inputs
whose largest magnitude lies in ``[2^-64, 2^64]`` (float64) or ``[2^-24, 2^24]`` (float32 and narrower, whose
squares and sums of squares must stay clear of float32's 2^-126 and 2^128) are left as they are (``scale_ = 1.0``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from latentstitch._core.numerics import power_of_two_scale

#: Largest magnitudes inside ``[1 / SAFE, SAFE]`` are fitted as they are (float64; ``SAFE_NARROW`` for float32 and
#: narrower, whose fold moments and eigendecompositions run in the data's precision).
SAFE = 2.0**64
SAFE_NARROW = 2.0**24
#: The most two sides' largest magnitudes may differ by for one common factor to keep both clear of over/underflow.
SPREAD = 2.0**128


def anchor_scale(s: torch.Tensor, t: torch.Tensor) -> float:
    """The power of two both sides are multiplied by before fitting: 1.0 unless the largest magnitude over both
    lies outside ``[1 / SAFE, SAFE]`` (``SAFE_NARROW`` unless a side is float64); a ValueError when the two sides
    are too far apart for one factor."""
    tops = [float(x.detach().abs().amax()) if x.numel() else 0.0 for x in (s, t)]
    top = max(tops)
    safe = SAFE if torch.float64 in (s.dtype, t.dtype) else SAFE_NARROW
    if not math.isfinite(top) or top == 0.0 or 1.0 / safe <= top <= safe:
        return 1.0  # NaN/inf and all-zero anchors are refused or reported by the checks that follow
    low = min(tops)
    if low > 0.0 and top / low > SPREAD:
        raise ValueError(
            f"source, target: their largest magnitudes ({tops[0]:.3g} and {tops[1]:.3g}) are too far apart to rescale "
            "both by one factor without overflow or underflow; rescale one side (a bridge is equivariant to scaling "
            "both sides together)"
        )
    return float(power_of_two_scale(torch.tensor(top, dtype=torch.float64)))


def rescale(x: Any, scale: float) -> Any:
    """``x * scale`` of the same type (numpy array, tensor, dask array; a list as a float numpy array), or ``x``
    itself when ``scale`` is 1."""
    if scale == 1.0:
        return x
    return (x if hasattr(x, "dtype") else np.asarray(x, dtype=np.float64)) * scale


def head_at_scale(head: Callable[[Any], Any], scale: float, dtype: Any) -> Callable[[Any], Any]:
    """``head`` reading bridged vectors of the rescaled target: they are divided by ``scale`` (in the target's
    ``dtype``) before the head sees them, so it reads vectors at the scale it was made for."""
    if scale == 1.0:
        return head

    def read(v: Any) -> Any:
        v = v.to(dtype) if isinstance(v, torch.Tensor) else np.asarray(v, dtype=dtype)
        return head(v / scale)

    return read


def check_scale(value: Any) -> float:
    """A loaded bridge's ``scale_``: a positive power of two (1.0 for a bridge saved before it was recorded)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"scale_: expected a positive power of two, got {value!r}")
    if math.frexp(value)[0] != 0.5:
        raise ValueError(f"scale_: expected a positive power of two, got {value!r}")
    return float(value)
