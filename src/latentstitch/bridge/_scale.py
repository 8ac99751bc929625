"""The anchors' scale: a bridge fitted on vectors of extreme magnitude (1e+200, 1e-200 in float64; a side alone at
1e30) works on each side multiplied by its own power of two, exactly, and gives its answers back at the input's
scale.

Every route's selection score (MRR, cosine, R^2, agreement) is unchanged when either side is scaled by a factor, and
every translation route is equivariant to it (relative ridge units, standardisation, rotations with a fitted
scale): bridging ``a x`` with the map fitted on ``(a X, b Y)`` gives ``b y``. A power of two makes the scaling
exact, so the answer is the one at ordinary magnitudes, scaled, instead of one bent by Gram matrices that overflow
or underflow. Each side is scaled alone, so a source scaled alone gives the same map up to its scale (one factor
for both sides would push the other side towards under- or overflow). A side whose largest magnitude lies in
``[2^-64, 2^64]`` (float64) or ``[2^-24, 2^24]`` (float32 and narrower, whose squares and sums of squares must stay
clear of float32's 2^-126 and 2^128) is left as it is (its scale 1.0).
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


def side_scale(x: torch.Tensor, safe: float) -> float:
    """The power of two one side is multiplied by before fitting: 1.0 unless its largest magnitude lies outside
    ``[1 / safe, safe]``."""
    top = float(x.detach().abs().amax()) if x.numel() else 0.0
    if not math.isfinite(top) or top == 0.0 or 1.0 / safe <= top <= safe:
        return 1.0  # NaN/inf and all-zero anchors are refused or reported by the checks that follow
    return float(power_of_two_scale(torch.tensor(top, dtype=torch.float64)))


def anchor_scales(s: torch.Tensor, t: torch.Tensor) -> tuple[float, float]:
    """The powers of two the source and the target are multiplied by before fitting (``side_scale``; ``SAFE``
    when a side is float64, the fits then run in float64, else ``SAFE_NARROW``)."""
    safe = SAFE if torch.float64 in (s.dtype, t.dtype) else SAFE_NARROW
    return side_scale(s, safe), side_scale(t, safe)


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


def check_scale(value: Any, name: str = "scale_") -> float:
    """A loaded bridge's scale of one side: a positive power of two."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a positive power of two, got {value!r}")
    if math.frexp(value)[0] != 0.5:
        raise ValueError(f"{name}: expected a positive power of two, got {value!r}")
    return float(value)


def loaded_scales(state: dict[str, Any]) -> tuple[float, float]:
    """A loaded bridge's ``source_scale_`` and ``target_scale_`` from its learned ``state`` (``vars``): 1.0 for a
    bridge saved before they were recorded, and one ``scale_`` for both sides for a bridge saved while one factor
    scaled both (``scale_`` is taken out of ``state``)."""
    common = check_scale(state.pop("scale_", 1.0))
    return (
        check_scale(state.get("source_scale_", common), "source_scale_"),
        check_scale(state.get("target_scale_", common), "target_scale_"),
    )
