"""What the user will get, in their own units, with an interval: ``Bridge.estimate_``.

From the chosen route's held-out anchors (each bridged by a map fitted without it): with a head, the share of items
the old head classifies from the bridged vector as it does from the true target vector (agreement: the head's
accuracy on bridged vectors equals its own accuracy wherever they agree); without, Recall@k of the old index (the
item's own target vector among the k target vectors nearest the bridged one, all N target vectors given searched).
The interval is a two-stage percentile bootstrap (``BOOTSTRAP`` resamples, seeded): the folds are resampled, then
the held-out items within each (so the fold-to-fold variation of the fitted maps counts, not only which items were
scored), and never narrower than the Jeffreys interval of a binomial share (so all-hit items do not give [1, 1]).
When the route was chosen on a rank score of the same items (MRR, top-1, Recall@k) or on the agreement
itself, picking the best of several routes on the same items makes the winner's figure optimistic (the winner's
curse): the value and the interval are moved down by the bootstrap estimate of that optimism (the mean, over the
same resamples, of the best route's resampled figure minus the best original figure) and widened by its spread.
It does not cover a difference between the anchors and the items the bridge will see later, nor that the chosen
map is refitted on all anchors (more than each fold's: at small anchor counts the realised figure tends to be
higher). One such difference is common: a head trained on the anchors' own target vectors keeps its prediction
under a small bridging error more often on them than on items it never saw (BBC, e5-small -> MiniLM-L6, 768
anchors, StandardScaler + LR: estimate 0.984, realised 0.985 on other items of its training set, 0.943 on unseen
test items); give anchors the head was not trained on for an estimate of unseen items. Evidence:
``benchmarks/bridge_generalisation.py`` (results/bridge/generalisation, "Calibration").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import beta

BOOTSTRAP = 1000
LEVEL = 0.90
#: Selection scores ranked on the same held-out items as the estimate's metric: choosing on them inflates the
#: winner's figure, which the estimate corrects.
SAME_ITEMS = ("agreement", "mrr", "top1", "recall_at_k")


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


def estimate(
    per_item: np.ndarray,
    metric: str,
    route: str,
    pool: int,
    seed: int,
    folds: Sequence[int] | None = None,
    rivals: Sequence[np.ndarray] = (),
) -> QualityEstimate:
    """The mean of ``per_item`` (0/1 per held-out anchor, fold after fold; ``folds``: the number of items of each
    fold, one fold when None) with a two-stage bootstrap interval; ``rivals``: the same items' figures of the other
    routes the choice compared on the same items (the winner's curse is removed when given)."""
    values = np.asarray(per_item, dtype=np.float64)
    sizes = [values.size] if not folds else [int(n) for n in folds]
    if sum(sizes) != values.size:
        raise ValueError(f"folds: expected sizes summing to {values.size} held-out items, got {sum(sizes)}")
    others = [np.asarray(r, dtype=np.float64) for r in rivals if np.size(r) == values.size]
    table = np.stack([values, *others])  # (routes, items), the chosen route first
    rng = np.random.default_rng([seed, 3])
    starts, counts = np.cumsum([0, *sizes[:-1]]), np.asarray(sizes)
    picked = rng.integers(0, len(sizes), size=(BOOTSTRAP, len(sizes)))  # folds drawn with replacement
    width = int(counts.max())
    # then, within each drawn fold, as many of its items drawn with replacement (slots past its size masked off)
    offsets = (rng.random((BOOTSTRAP, len(sizes), width)) * counts[picked][:, :, None]).astype(np.int64)
    keep = np.arange(width)[None, None, :] < counts[picked][:, :, None]
    rows = np.where(keep, starts[picked][:, :, None] + offsets, 0).reshape(BOOTSTRAP, -1)
    weights = keep.reshape(BOOTSTRAP, -1).astype(np.float64)
    total = weights.sum(axis=1)
    means = np.stack([(route[rows] * weights).sum(axis=1) / total for route in table], axis=1)  # (B, routes)
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(means[:, 0], [tail, 1 - tail])
    # never narrower than a binomial share's Jeffreys interval (a bootstrap of all-hit items gives [1, 1])
    hits = float(values.sum())
    low = min(low, beta.ppf(tail, hits + 0.5, values.size - hits + 0.5) if hits > 0 else 0.0)
    high = max(high, beta.ppf(1 - tail, hits + 0.5, values.size - hits + 0.5) if hits < values.size else 1.0)
    value = float(values.mean())
    if others:
        curse = means.max(axis=1) - table.mean(axis=1).max()
        shift, spread = max(0.0, float(np.mean(curse))), float(np.std(curse))  # >= 0 but for resampling noise
        value, low, high = value - shift, low - shift - spread, high - shift + spread
    low, high = max(0.0, float(low)), min(1.0, float(high))
    return QualityEstimate(metric, value, min(low, value), max(high, value), LEVEL, values.size, route, pool)


def estimate_from_dict(value: Any) -> QualityEstimate | None:
    return None if value is None or isinstance(value, QualityEstimate) else QualityEstimate.from_dict(value)
