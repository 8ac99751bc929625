"""How well ``estimate_``'s 90% interval covers what the pick realises, and alternatives computed from the same
held-out per-anchor hits (``library.py`` keeps every route's 0/1 hits, the pick's first, fold after fold).

Variants (all at 90%):

- ``items``: the percentile bootstrap over held-out anchors (what ``estimate_`` computed when these runs were made);
- ``jeffreys``: the Jeffreys interval of a binomial share (Beta(k + 1/2, n - k + 1/2) quantiles): never the
  degenerate [1, 1] of a bootstrap over all-hit items;
- ``folds``: a two-stage bootstrap, folds resampled then items within them (fold-to-fold variance);
- ``shipped``: what ``estimate_`` computes now (``_estimate.estimate``: fold-then-item bootstrap, at least the
  Jeffreys width, the winner's curse removed when the choice ranked the same items);
- ``selection``: ``jeffreys`` shifted down by the bootstrap estimate of the winner's curse (the resampled best
  route's mean over the resampled means of all routes tried, minus the best mean), widened by its spread.

Coverage is checked against the realised figure in the estimate's units; ``+test`` also allows the realised
figure's own sampling error on the test items (a 90% binomial margin over ``n_test`` items), which no estimate made
before seeing the test items can remove.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import beta

LEVEL = 0.90
B = 1000
VARIANTS = ("items", "jeffreys", "folds", "selection", "shipped")


def _bits(text: str) -> np.ndarray:
    return np.frombuffer(text.encode(), dtype=np.uint8) - ord("0")


def realised_unit(fit: dict) -> float | None:
    """The realised figure the fit's estimate predicts: agreement for a head, else Recall@10 over the pool."""
    return fit["realised"].get("agreement" if fit["estimate"]["metric"] == "agreement" else "recall_pool")


def interval(variant: str, fit: dict, seed: int = 0) -> tuple[float, float, float]:
    items = fit["items"]
    chosen = _bits(items[fit["route"]]) if fit["route"] in items else _bits(next(iter(items.values())))
    n, k = chosen.size, int(chosen.sum())
    value = k / n
    tail = (1 - LEVEL) / 2
    rng = np.random.default_rng([seed, 3])
    if variant == "items":
        means = chosen[rng.integers(0, n, size=(B, n))].mean(axis=1)
        low, high = np.quantile(means, [tail, 1 - tail])
        return value, float(low), float(high)
    if variant in ("jeffreys", "selection"):
        low = beta.ppf(tail, k + 0.5, n - k + 0.5) if k > 0 else 0.0
        high = beta.ppf(1 - tail, k + 0.5, n - k + 0.5) if k < n else 1.0
        if variant == "jeffreys":
            return value, float(low), float(high)
        others = np.stack([_bits(v) for v in items.values() if len(v) == n])
        draws = rng.integers(0, n, size=(B, n))
        resampled = np.stack([others[:, d].mean(axis=1) for d in draws])  # (B, routes)
        curse = resampled.max(axis=1) - others.mean(axis=1).max()
        shift, spread = float(np.mean(curse)), float(np.std(curse))
        return value - shift, float(max(0.0, low - shift - spread)), float(min(1.0, high - shift + spread))
    if variant == "folds":
        sizes = fit["parts"]
        edges = np.cumsum([0, *sizes])
        folds = [chosen[edges[i] : edges[i + 1]] for i in range(len(sizes))]
        means = []
        for _ in range(B):
            picked = rng.integers(0, len(folds), size=len(folds))
            values = np.concatenate([folds[j][rng.integers(0, len(folds[j]), len(folds[j]))] for j in picked])
            means.append(values.mean())
        low, high = np.quantile(means, [tail, 1 - tail])
        return value, float(low), float(high)
    raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")


def coverage(runs: list[dict], kinds: list[str], n_test: dict[str, int]) -> dict:
    """Per variant and fit kind: share of runs covered (raw, and allowing the test items' sampling error)."""
    out: dict = {}
    for variant in VARIANTS:
        for kind in kinds:
            raw, allowed = [], []
            for run in runs:
                fit = (run.get("library") or {}).get("fits", {}).get(kind)
                if not fit or not fit.get("items"):
                    continue
                fit = {**fit, "consumer": kind.split("/")[0]}
                truth = realised_unit(fit)
                if truth is None:
                    continue
                _, low, high = shipped_interval(fit) if variant == "shipped" else interval(variant, fit)
                margin = 1.645 * np.sqrt(max(truth * (1 - truth), 1e-4) / n_test[run["item_set"]])
                raw.append(low - 1e-9 <= truth <= high + 1e-9)
                allowed.append(low - margin <= truth <= high + margin)
            if raw:
                out[f"{variant}|{kind}"] = {
                    "runs": len(raw),
                    "coverage": float(np.mean(raw)),
                    "coverage_test": float(np.mean(allowed)),
                }
    return out


def shipped_interval(fit: dict, seed: int = 0) -> tuple[float, float, float]:
    """The interval the library computes now (``latentstitch.bridge.pieces.estimate``), from the recorded hits:
    rivals only when the fit's selection score ranks the same items (``SAME_ITEMS``)."""
    from latentstitch.bridge.pieces import SAME_ITEMS, estimate

    items = fit["items"]
    chosen = _bits(items[fit["route"]])
    score = fit.get("selection_score") or _selection_score(fit)
    rivals = [_bits(v) for r, v in items.items() if r != fit["route"]] if score in SAME_ITEMS else []
    e = estimate(chosen, fit["estimate"]["metric"], fit["route"], fit["estimate"]["pool"], seed, fit["parts"], rivals)
    return e.value, e.low, e.high


def _selection_score(fit: dict) -> str:
    from latentstitch.bridge import CONSUMER_SCORES

    if fit["estimate"]["metric"] == "agreement":
        return "agreement"
    return CONSUMER_SCORES[fit["consumer"]]
