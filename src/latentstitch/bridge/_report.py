"""A fitted bridge as tables: the route table, the anchor-budget advice, and the JSON report (``kind: "bridge"``)
that ``latentstitch report`` renders."""

from __future__ import annotations

from typing import Any

from sklearn.utils.validation import check_is_fitted

from latentstitch._core.tables import table
from latentstitch.bridge._results import RouteScore, Spread

_SCORE_COLUMNS = (("top1", "top-1"), ("mrr", "MRR"), ("cosine", "cosine"), ("r2", "R^2"))


def chosen_row(bridge: Any) -> RouteScore:
    """The route table's row of the chosen route."""
    return next(row for row in bridge.routes_ if row.chosen)


def _primary(bridge: Any) -> str:
    return "agreement" if bridge.criterion_ == "agreement" else "mrr"


def _cell(score: Spread | None) -> list[float] | None:
    """A score as a table cell or JSON value: ``[mean, std]``."""
    return None if score is None else [score[0], score[1]]


def route_table(bridge: Any) -> dict[str, Any]:
    """Every route tried, with each score's mean ± std over the folds beside shuffled pairs' MRR."""
    check_is_fitted(bridge, "routes_")
    with_head = bridge.criterion_ == "agreement"
    columns = ["route", "family", *(title for _, title in _SCORE_COLUMNS)]
    columns += ["head agreement"] if with_head else []
    columns += ["MRR shuffled pairs", "z"]
    rows = []
    for row in bridge.routes_:
        name = row.route + (" (chosen)" if row.chosen else " (failed)" if row.error else "")
        cells = [name, row.family, *(_cell(row.score(key)) for key, _ in _SCORE_COLUMNS)]
        cells += [_cell(row.agreement)] if with_head else []
        shuffled = None if row.shuffled_mrr is None else row.shuffled_mrr[0]
        cells += [shuffled, f"{row.z:.1f}" if row.fitted else None]
        rows.append(cells)
    folds = bridge.cv
    note = (
        f"{bridge.n_anchors_} anchor pairs, {folds}-fold cross-validation: mean ± std over folds of held-out scores. "
        "top-1 / MRR: how often a bridged source anchor finds its own partner among the held-out target anchors "
        "(by cosine); cosine: to the partner; R^2: of the target vectors (translation routes); shuffled pairs give "
        "MRR H_n/n; z: pooled MRR above shuffled pairs, in standard errors (clearly better: z >= 3). "
        f"Rule: {bridge.selection_rule()}"
    )
    return table("Bridge routes (cross-validated on the anchors, no labels)", columns, rows, note)


def budget_table(bridge: Any) -> dict[str, Any] | None:
    """Each route's primary score with fewer training anchors, on the same held-out folds."""
    check_is_fitted(bridge, "routes_")
    if not bridge.budget_:
        return None
    names = [row.route for row in bridge.routes_]
    primary = _primary(bridge)
    rows = [[entry.anchors, *(_cell(entry.get(name)) for name in names)] for entry in bridge.budget_]
    rows.append(
        [
            f"all ({bridge.n_anchors_ - bridge.n_anchors_ // bridge.cv} per fold)",
            *(_cell(row.score(primary)) for row in bridge.routes_),
        ]
    )
    return table(
        f"Anchor budget: held-out {'prediction agreement' if primary == 'agreement' else 'MRR'} by number of "
        "training anchors",
        ["training anchors", *names],
        rows,
        "The same held-out folds for every count, so scores compare down a column. " + budget_advice(bridge),
    )


def budget_advice(bridge: Any) -> str:
    """The smallest anchor count at which the chosen route keeps 95% of its score with all anchors, in words."""
    if not bridge.budget_:
        return ""
    full = chosen_row(bridge).score(_primary(bridge))[0]
    for entry in bridge.budget_:
        value = entry.get(bridge.route_)
        if value is not None and full > 0 and value[0] >= 0.95 * full:
            return (
                f"The chosen route ({bridge.route_}) keeps {value[0] / full:.0%} of its score with {entry.anchors} "
                "training anchors: that many parallel items are enough."
            )
    return (
        f"The chosen route ({bridge.route_}) is still gaining with more anchors: use as many parallel items as you "
        "can (more than the largest count tried)."
    )


def bridge_report(bridge: Any, **about: Any) -> dict[str, Any]:
    """The JSON results of a fitted bridge: ``{"kind": "bridge", "title", "tables", "notes", "choice", ...}``;
    ``about`` adds entries (e.g. the source and target file names)."""
    check_is_fitted(bridge, "routes_")
    tables = [route_table(bridge)]
    budget = budget_table(bridge)
    if budget is not None:
        tables.append(budget)
    chosen = chosen_row(bridge)
    return {
        "kind": "bridge",
        "title": f"Bridge: {bridge.n_features_source_}-d source -> {bridge.n_features_target_}-d target "
        f"({bridge.n_anchors_} anchor pairs)",
        "tables": tables,
        "notes": [choice_sentence(bridge), *bridge.notes_],
        "choice": {
            "route": bridge.route_,
            "family": bridge.family_,
            "reliable": bridge.reliable_,
            "criterion": bridge.criterion_,
            "scores": {key: _cell(chosen.score(key)) for key in ("top1", "mrr", "cosine", "r2", "agreement")},
        },
        "selection_rule": bridge.selection_rule(),
        **about,
    }


def choice_sentence(bridge: Any) -> str:
    chosen = chosen_row(bridge)
    consumer = (
        "the old model's head or index reads the bridged vectors as they are"
        if bridge.family_ == "translation"
        else "train the consumer once on the target's relative vectors (Bridge.fit_head), then it reads the "
        "bridged vectors"
    )
    scores = f"held-out top-1 {chosen.top1[0]:.3f}, MRR {chosen.mrr[0]:.3f}"
    if chosen.r2 is not None:
        scores += f", R^2 {chosen.r2[0]:.3f}"
    if chosen.agreement is not None:
        scores += f", head agreement {chosen.agreement[0]:.3f}"
    warning = "" if bridge.reliable_ else ", NOT clearly better than shuffled pairs"
    return f"Chosen: {bridge.route_} ({bridge.family_}; {scores}){warning}: {consumer}."
