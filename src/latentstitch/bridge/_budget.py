"""The anchor-budget advice: every route cross-validated again with fewer training anchors per fold, scored on the
same held-out folds, so the scores compare across anchor counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from latentstitch._core.folds import training_rows
from latentstitch._core.params import check_positive_int
from latentstitch.bridge._crossval import Anchors, _nothing, cross_validate_route
from latentstitch.bridge._results import BudgetRow
from latentstitch.bridge._routes import RouteSpec


def budget_counts(budget: Any, name: str = "budget") -> list[int]:
    """The anchor counts of the anchor-budget advice: sorted, each at least 2 (none for None)."""
    if budget is None:
        return []
    if isinstance(budget, (str, bytes)) or not hasattr(budget, "__iter__"):
        raise TypeError(f"{name}: expected a sequence of anchor counts, got {budget!r}")
    return sorted({check_positive_int(c, name, minimum=2) for c in budget})


def usable_counts(counts: list[int], anchors: Anchors) -> list[int]:
    """The counts below the training anchors of every fold (the others cannot be drawn)."""
    return [c for c in counts if c < anchors.n_train]


def anchor_budget(
    specs: list[RouteSpec], anchors: Anchors, counts: list[int], advance: Callable[[], None] = _nothing
) -> list[BudgetRow] | None:
    """The anchor-budget advice: every route cross-validated again with only ``count`` training anchors per fold
    (drawn at random from the fold's training rows), scored on the same held-out queries; None without counts."""
    if not counts:
        return None
    rng = np.random.default_rng(anchors.seed + 1)
    folds = range(anchors.scored)
    rows = []
    for count in usable_counts(counts, anchors):
        subsets = [rng.choice(training_rows(anchors.parts, k), size=count, replace=False) for k in folds]
        results = [cross_validate_route(spec, anchors, subsets=subsets, advance=advance) for spec in specs]
        rows.append(BudgetRow(count, {r.score.route: r.score.score(anchors.primary) for r in results}))
    return rows
