"""``Bridge.cv_results_``: every route's cross-validation, fold by fold, as scikit-learn's searches report theirs
(``GridSearchCV.cv_results_``): a dict of lists with one entry per route, in the order of the route table
(``routes_``), so ``pandas.DataFrame(bridge.cv_results_)`` is a table of the routes.

Keys (``k`` over the scored folds: every fold of ``cv`` unless the anchors are many, ``_pool.scored_folds``):

- ``route``, ``family``, ``params`` (the route's own parameters as chosen), ``error`` (why a route failed, or None);
- ``split{k}_test_score``: the selection score (``selection_score_``) on fold k's held-out anchors;
  ``mean_test_score``, ``std_test_score``: their mean and standard deviation (``routes_``' spread of that score);
  NaN for a route that failed or has no such score (R^2 of a relative route);
- ``rank_test_score``: the route's place in the rule's order (``select_route``): 1 is the chosen route, then the
  routes clearly better than shuffled pairs, by mean score (ties: the higher MRR, then the route order); the routes
  that failed last;
- ``split{k}_test_rows``: the held-out anchors (rows of ``fit``'s anchors) scored in fold k, the same for every route;
- ``split{k}_test_hits``: 1 or 0 per held-out anchor of fold k, in that order: with a head, whether the head reads the
  bridged anchor as it reads its true target vector (agreement), else whether the anchor's own target vector is among
  the k nearest of the bridged one (Recall@k): the values ``estimate_`` averages; None for a route that failed;
- ``split{k}_test_classes`` (with a head only): the head's prediction on each held-out anchor's true target vector.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from latentstitch.bridge._select import Criterion, rank_routes

#: The keys with one entry per route beside the per-fold ones.
ROUTE_KEYS = ("route", "family", "params", "error", "mean_test_score", "std_test_score", "rank_test_score")
#: The per-fold keys (``split{k}_test_{name}``); ``classes`` only with a head.
FOLD_KEYS = ("score", "rows", "hits", "classes")


def cv_results(results: list[Any], criterion: Criterion, queries: list[np.ndarray], reference: Any) -> dict:
    """The dict of ``Bridge.cv_results_`` from the routes' cross-validation (``_crossval.RouteResult``, in the route
    table's order), the criterion they were chosen by, the scored held-out rows per fold and, with a head, its
    predictions on the true target vectors (``reference``)."""
    rows = [result.score for result in results]
    ranked, _ = rank_routes(rows, criterion.score)
    # the chosen route first: the rule's order, unless a pool route it ranked first was not kept (pool_test)
    ranked.sort(key=lambda row: not row.chosen)
    rank = {id(row): place for place, row in enumerate(ranked, start=1)}
    out: dict[str, list] = {
        "route": [row.route for row in rows],
        "family": [row.family for row in rows],
        "params": [dict(row.params) for row in rows],
        "error": [row.error for row in rows],
    }
    sizes = [len(q) for q in queries]
    starts = np.cumsum([0, *sizes])
    for k, held in enumerate(queries):
        out[f"split{k}_test_score"] = [_fold_score(result, criterion.score, k) for result in results]
        out[f"split{k}_test_rows"] = [[int(i) for i in held] for _ in results]
        out[f"split{k}_test_hits"] = [
            None if result.items is None else [int(v) for v in result.items[criterion.item][starts[k] : starts[k + 1]]]
            for result in results
        ]
        if criterion.with_head:
            out[f"split{k}_test_classes"] = [np.asarray(reference)[held].tolist() for _ in results]
    spreads = [row.score(criterion.score) if row.fitted else None for row in rows]
    out["mean_test_score"] = [math.nan if s is None else s[0] for s in spreads]
    out["std_test_score"] = [math.nan if s is None else s[1] for s in spreads]
    out["rank_test_score"] = [rank[id(row)] for row in rows]
    return out


def _fold_score(result: Any, score: str, k: int) -> float:
    values = None if result.per_fold is None else result.per_fold.get(score)
    return math.nan if values is None else float(values[k])


def check_cv_results(value: Any, bridge: Any) -> dict:
    """A loaded bridge's ``cv_results_``, checked against its route table: one entry per route in ``routes_``'s
    order, the per-fold keys of folds 0..m-1, ranks 1..n with 1 the chosen route, held-out rows among the anchors and
    one 0/1 hit per held-out row (ValueError naming ``cv_results_`` otherwise)."""
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise ValueError(f"cv_results_: expected a dict of per-route lists, got {type(value).__name__}")
    names = [row.route for row in bridge.routes_]
    folds = sum(1 for key in value if key.startswith("split") and key.endswith("_test_score"))
    expected = set(ROUTE_KEYS) | {f"split{k}_test_{name}" for k in range(folds) for name in FOLD_KEYS[:3]}
    with_head = any(key.endswith("_test_classes") for key in value)
    expected |= {f"split{k}_test_classes" for k in range(folds)} if with_head else set()
    if set(value) != expected or folds < 2:
        wrong = sorted(set(value) ^ expected) or ["fewer than 2 folds"]
        raise ValueError(f"cv_results_: unexpected or missing keys: {', '.join(wrong)}")
    for key, entries in value.items():
        if not isinstance(entries, list) or len(entries) != len(names):
            raise ValueError(f"cv_results_[{key!r}]: expected one entry per route ({len(names)})")
    if value["route"] != names or value["family"] != [row.family for row in bridge.routes_]:
        raise ValueError("cv_results_: its routes and families are not the route table's (routes_)")
    if sorted(value["rank_test_score"]) != list(range(1, len(names) + 1)):
        raise ValueError("cv_results_['rank_test_score']: expected the ranks 1 to the number of routes, each once")
    if names[value["rank_test_score"].index(1)] != bridge.route_:
        raise ValueError(f"cv_results_['rank_test_score']: rank 1 is not the chosen route {bridge.route_!r}")
    for k in range(folds):
        held = value[f"split{k}_test_rows"][0]
        if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < bridge.n_anchors_ for i in held):
            raise ValueError(f"cv_results_['split{k}_test_rows']: expected rows of the {bridge.n_anchors_} anchors")
        for hits in value[f"split{k}_test_hits"]:
            if hits is not None and (len(hits) != len(held) or any(h not in (0, 1) for h in hits)):
                raise ValueError(f"cv_results_['split{k}_test_hits']: expected a 0 or 1 per held-out row ({len(held)})")
    for key in [f"split{k}_test_score" for k in range(folds)] + ["mean_test_score", "std_test_score"]:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value[key]):
            raise ValueError(f"cv_results_[{key!r}]: expected numbers (NaN for a failed route)")
    return value
