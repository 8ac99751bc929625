"""Dead target features: held at their anchor value by every translation route.

A target feature whose spread over the anchors is below ``DEAD_SPREAD`` of the largest feature's (MiniLM-L6 has a
few at 1e-33 and 1e-9 against ~0.05 for the rest) carries nothing a map can learn: it is below float32 rounding of
anything computed from the whole vector. A route that mixes features (a rotation, a blend, a low-rank map) still
puts its rounding-size error there, and a consumer that standard-scales each feature (scikit-learn's
``StandardScaler`` divides by the 1e-33 spread) magnifies that error past every real feature: a logistic-regression
head on bridged vectors fell from macro-F1 0.40 to 0.04 (Bible sections, MiniLM-L3 -> MiniLM-L6, 768 anchors,
``procrustes_scaled``). Holding such features at their anchor mean (a fold's training mean while cross-validating)
is exact up to their own spread; consumers that read whole vectors (an index, a raw head) see no difference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

#: A target feature whose spread over the anchors is at most this fraction of the largest feature's is dead.
DEAD_SPREAD = 1e-6


def dead_features(target: torch.Tensor) -> torch.Tensor:
    """Indices (int64, ascending) of the dead features of the anchors' target side (n, q)."""
    spread = target.std(dim=0, correction=0) if target.shape[0] > 1 else torch.zeros(target.shape[1])
    top = float(spread.max()) if spread.numel() else 0.0
    if not top > 0.0:
        return torch.zeros(0, dtype=torch.int64)  # every feature constant: the bridge reports it elsewhere
    return torch.nonzero(spread <= DEAD_SPREAD * top).flatten().cpu()


def hold(out: Any, columns: Any, values: Any) -> Any:
    """``out`` (n, q; numpy array or tensor) with ``columns`` set to ``values`` (in ``out``'s dtype and device); a
    copy when anything is set, ``out`` itself otherwise."""
    if len(columns) == 0:
        return out
    if isinstance(out, torch.Tensor):
        out = out.clone()
        index = torch.as_tensor(np.asarray(columns), dtype=torch.int64, device=out.device)
        out[:, index] = torch.as_tensor(np.asarray(values), dtype=out.dtype, device=out.device)
        return out
    out = np.array(out, copy=True)
    out[:, np.asarray(columns, dtype=np.int64)] = np.asarray(values, dtype=np.float64).astype(out.dtype)
    return out


def check_dead(columns: Any, values: Any, width: int) -> tuple[list[int], list[float]]:
    """A loaded bridge's ``dead_features_`` / ``dead_values_``: distinct ascending feature indices below ``width``
    and one finite value each (both empty for a bridge saved before they were recorded)."""
    columns, values = list(columns), list(values)
    if any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < width for c in columns) or columns != sorted(
        set(columns)
    ):
        raise ValueError(f"dead_features_: expected distinct ascending feature indices below {width}, got {columns!r}")
    if len(values) != len(columns) or any(
        isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in values
    ):
        raise ValueError(f"dead_values_: expected {len(columns)} finite numbers (one per dead feature), got {values!r}")
    return columns, [float(v) for v in values]
