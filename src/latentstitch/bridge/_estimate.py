"""What the user will get, in their own units, with an interval: ``Bridge.estimate_``.

From the chosen route's held-out anchors (each bridged by a map fitted without it): with a head, the share of items
the old head classifies from the bridged vector as it does from the true target vector (agreement: the head's
accuracy on bridged vectors equals its own accuracy wherever they agree); without, Recall@k of the old index (the
item's own target vector among the k target vectors nearest the bridged one, all N target vectors given searched).
The interval is a percentile bootstrap over the held-out items (``BOOTSTRAP`` resamples, seeded). It covers the
sampling of the scored items, not the difference between the anchors and the items the bridge will see later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

BOOTSTRAP = 1000
LEVEL = 0.90


@dataclass
class QualityEstimate:
    """``metric`` ("agreement" with a head, else "recall@k"), its held-out ``value``, the ``low``-``high`` bootstrap
    interval at ``level``, over ``items`` held-out anchors, for ``route``; ``pool``: target vectors searched."""

    metric: str
    value: float
    low: float
    high: float
    level: float
    items: int
    route: str
    pool: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: Any) -> QualityEstimate:
        return cls(**row)

    def sentence(self) -> str:
        what = (
            "of items the old head classifies from the bridged vectors as from the old model's own vectors"
            if self.metric == "agreement"
            else f"of items whose own old vector is among the {self.metric.split('@')[1]} nearest of the "
            f"{self.pool} old vectors searched ({self.metric})"
        )
        return (
            f"Expected quality: {self.value:.1%} {what} ({self.level:.0%} interval {self.low:.1%} to "
            f"{self.high:.1%}, from {self.items} held-out anchors)"
        )


def estimate(per_item: np.ndarray, metric: str, route: str, pool: int, seed: int) -> QualityEstimate:
    """The mean of ``per_item`` (0/1 per held-out anchor) with a percentile bootstrap interval."""
    values = np.asarray(per_item, dtype=np.float64)
    rng = np.random.default_rng([seed, 3])
    means = values[rng.integers(0, values.size, size=(BOOTSTRAP, values.size))].mean(axis=1)
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return QualityEstimate(metric, float(values.mean()), float(low), float(high), LEVEL, values.size, route, pool)


def estimate_from_dict(value: Any) -> QualityEstimate | None:
    return None if value is None or isinstance(value, QualityEstimate) else QualityEstimate.from_dict(value)
