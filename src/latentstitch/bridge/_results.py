"""A fitted bridge's results as types: one ``RouteScore`` per route tried (``Bridge.routes_``) and one ``BudgetRow``
per anchor count of the anchor-budget advice (``Bridge.budget_``).

``to_dict()`` gives the JSON form (the keys of the route table rows and budget rows, a score as ``[mean, std]``),
which is also what a saved bridge holds; ``from_dict`` reads it back, from files of any version. ``row["mrr"]``
still reads a field, as the dict rows of earlier versions did.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from latentstitch.bridge._scores import SCORES

#: A score over the folds: (mean, standard deviation).
Spread = tuple[float, float]


def _spread(value: Any) -> Spread | None:
    if value is None:
        return None
    mean, std = value
    return float(mean), float(std)


def _plain_spread(value: Spread | None) -> list[float] | None:
    return None if value is None else [value[0], value[1]]


@dataclass
class RouteScore:
    """One route's cross-validated result: each score's (mean, std) over the folds, beside shuffled pairs'.

    ``z``: the pooled held-out MRR above chance (shuffled pairs, ``chance_mrr``), in standard errors;
    ``clearly_better``: ``z >= CLEAR_Z`` and above shuffled pairs; ``error``: why the route could not be fitted
    (its scores are then None and ``z`` is -inf); ``r2`` is None for relative routes; ``agreement`` (with a head)
    the head's prediction from the bridged vector vs from the true target vector. ``chosen``: set by the bridge.
    """

    route: str
    family: str
    description: str
    error: str | None = None
    top1: Spread | None = None
    shuffled_top1: Spread | None = None
    mrr: Spread | None = None
    shuffled_mrr: Spread | None = None
    cosine: Spread | None = None
    shuffled_cosine: Spread | None = None
    r2: Spread | None = None
    shuffled_r2: Spread | None = None
    agreement: Spread | None = None
    recall_at_k: Spread | None = None
    knn_jaccard: Spread | None = None
    r2_scaled: Spread | None = None
    params: dict[str, Any] = field(default_factory=dict)
    z: float = -math.inf
    chance_mrr: float | None = None
    clearly_better: bool = False
    seconds: float = 0.0
    chosen: bool = False

    @property
    def fitted(self) -> bool:
        return self.error is None

    def score(self, name: str) -> Spread | None:
        """A score by name (``"mrr"``, ``"agreement"``, ``"shuffled_mrr"``...)."""
        if name not in _SPREADS:
            raise KeyError(f"{name!r} is not a score of a route; scores: {', '.join(_SPREADS)}")
        return getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON: every field, scores as ``[mean, std]`` lists."""
        return {
            f.name: _plain_spread(getattr(self, f.name)) if f.name in _SPREADS else getattr(self, f.name)
            for f in fields(self)
        }

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> RouteScore:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(row) - known)
        if unknown:
            raise ValueError(f"a route row has unknown keys: {', '.join(unknown)}")
        values = {key: _spread(value) if key in _SPREADS else value for key, value in row.items()}
        return cls(**values)

    def __getitem__(self, key: str) -> Any:
        """``row["mrr"]``: a field by name, as the dict rows of earlier versions were read."""
        if key not in _FIELDS:
            raise KeyError(key)
        return getattr(self, key)


_SPREADS = (*SCORES, *(f"shuffled_{name}" for name in SCORES), "agreement", "recall_at_k", "knn_jaccard", "r2_scaled")
_FIELDS = frozenset(f.name for f in fields(RouteScore))


@dataclass
class BudgetRow:
    """The anchor-budget advice at one anchor count: each route's held-out selection score (the bridge's
    ``selection_score_``: MRR by default, prediction agreement with a head) with only ``anchors`` training anchors,
    (mean, std) over the same folds; None for a route that could not be fitted."""

    anchors: int
    scores: dict[str, Spread | None] = field(default_factory=dict)

    def get(self, route: str, default: Any = None) -> Spread | None:
        return self.scores.get(route, default)

    def to_dict(self) -> dict[str, Any]:
        """``{"anchors": n, route: [mean, std] or None, ...}``."""
        return {"anchors": self.anchors, **{name: _plain_spread(value) for name, value in self.scores.items()}}

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> BudgetRow:
        if "anchors" not in row:
            raise ValueError("a budget row has no 'anchors' entry")
        return cls(int(row["anchors"]), {k: _spread(v) for k, v in row.items() if k != "anchors"})

    def __getitem__(self, key: str) -> Any:
        """``row["anchors"]`` or ``row[route]``, as the dict rows of earlier versions were read."""
        return self.anchors if key == "anchors" else self.scores[key]


def route_scores(rows: Any) -> list[RouteScore]:
    """``Bridge.routes_`` from its JSON form (a list of rows, as saved)."""
    return [row if isinstance(row, RouteScore) else RouteScore.from_dict(row) for row in rows]


def budget_rows(rows: Any) -> list[BudgetRow] | None:
    """``Bridge.budget_`` from its JSON form (None, or a list of rows)."""
    if rows is None:
        return None
    return [row if isinstance(row, BudgetRow) else BudgetRow.from_dict(row) for row in rows]
