"""A fitted bridge as tables: the route table, the anchor-budget advice, and the JSON report (``kind: "bridge"``)
that ``latentstitch report`` renders."""

from __future__ import annotations

import math
from typing import Any

from sklearn.utils.validation import check_is_fitted

from latentstitch._core.tables import table
from latentstitch.bridge._results import RouteScore, Spread
from latentstitch.bridge._routes import family_of
from latentstitch.bridge._select import Criterion
from latentstitch.bridge._validate import UNPAIRED_FIX, UNPAIRED_FIX_CLI

_SCORE_COLUMNS = (
    ("mrr", "MRR"),
    ("top1", "top-1"),
    ("recall_at_k", "Recall@10"),
    ("knn_jaccard", "kNN overlap"),
    ("r2", "R^2"),
)
#: A selection score in a title.
_SCORE_WORDS = {
    **dict(_SCORE_COLUMNS),
    "r2_scaled": "R^2 of standard-scaled features",
    "cosine": "cosine",
    "agreement": "prediction agreement",
}


def chosen_row(bridge: Any) -> RouteScore:
    """The route table's row of the chosen route."""
    return next(row for row in bridge.routes_ if row.chosen)


def _primary(bridge: Any) -> str:
    """The score the route, its parameters and the anchor budget were compared on."""
    return Criterion.of_bridge(bridge).score


def _cell(score: Spread | None) -> list[float] | None:
    """A score as a table cell or JSON value: ``[mean, std]``."""
    return None if score is None else [score[0], score[1]]


def _order_key(bridge: Any, row: RouteScore) -> tuple:
    """Rows by the selection score, best first (failed routes last)."""
    value = row.score(_primary(bridge)) if row.fitted else None
    return (not row.fitted, -(value[0] if value is not None and value[0] == value[0] else -math.inf))


def _params(row: RouteScore) -> str:
    params = getattr(row, "params", None) or {}
    if "weights" in params:
        return f"blend of {sum(w > 0 for w in params['weights'])}"
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in params.items())


def route_table(bridge: Any) -> dict[str, Any]:
    """Every route tried, sorted by the selection score (best first), with each score's mean ± std over the folds;
    the chosen route marked."""
    check_is_fitted(bridge, "routes_")
    with_head = Criterion.of_bridge(bridge).with_head
    columns = ["route", "family", "parameters"]
    columns += ["head agreement"] if with_head else []
    columns += [title for _, title in _SCORE_COLUMNS]
    columns += ["z"]
    rows = []
    for row in sorted(bridge.routes_, key=lambda r: _order_key(bridge, r)):
        name = row.route + (" (chosen)" if row.chosen else " (failed)" if row.error else "")
        cells = [name, row.family, _params(row)]
        cells += [_cell(row.agreement)] if with_head else []
        cells += [_cell(row.score(key)) for key, _ in _SCORE_COLUMNS]
        cells += [f"{row.z:.1f}" if row.fitted else None]
        rows.append(cells)
    note = (
        f"{bridge.n_anchors_} anchor pairs, {bridge.cv}-fold cross-validation: mean ± std over folds of held-out "
        "scores, each held-out anchor bridged by a map fitted without it and compared with every target vector "
        "given. MRR / top-1 / Recall@10: rank of its own target vector among them; kNN overlap: shared share of "
        "its 10 nearest target vectors, bridged vs true; R^2: in the target's own units (translation routes); "
        f"z: MRR above shuffled pairs, in standard errors (clearly better: z >= 3). {_blend_line(bridge)}"
        f"{_rule_line(bridge)}"
    )
    return table("Bridge routes (cross-validated on the anchors, no labels), best first", columns, rows, note)


def _blend_line(bridge: Any) -> str:
    rows = [r for r in bridge.routes_ if "weights" in (getattr(r, "params", None) or {})]
    if not rows:
        return ""
    params = rows[0].params
    parts = [f"{w:.2f} x {r}" for r, w in zip(params["routes"], params["weights"], strict=True) if w > 0]
    return f"{rows[0].route} = {' + '.join(parts)}. "


def _rule_line(bridge: Any) -> str:
    criterion = Criterion.of_bridge(bridge)
    if criterion.legacy:
        return "Rule: " + criterion.rule()
    return criterion.sentence() + " (the rule in full: latentstitch bridge fit --help)"


def budget_table(bridge: Any) -> dict[str, Any] | None:
    """Each route's primary score with fewer training anchors, on the same held-out folds."""
    check_is_fitted(bridge, "routes_")
    if not bridge.budget_:
        return None
    names = [row.route for row in bridge.routes_ if row.route in bridge.budget_[0].scores]
    primary = _primary(bridge)
    rows = [[entry.anchors, *(_cell(entry.get(name)) for name in names)] for entry in bridge.budget_]
    rows.append(
        [
            f"all ({bridge.n_anchors_ - bridge.n_anchors_ // bridge.cv} per fold)",
            *(_cell(row.score(primary)) for row in bridge.routes_ if row.route in names),
        ]
    )
    return table(
        f"Anchor budget: held-out {_SCORE_WORDS[primary]} by number of training anchors",
        ["training anchors", *names],
        rows,
        "The same held-out folds for every count, so scores compare down a column. " + budget_advice(bridge),
    )


def budget_advice(bridge: Any) -> str:
    """The smallest anchor count at which the chosen route keeps 95% of its score with all anchors, in words."""
    scored = chosen_row(bridge).score(_primary(bridge))
    if not bridge.budget_ or scored is None:  # None: the chosen route has no such score (R^2 of a relative route)
        return ""
    full = scored[0]
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


def bridge_report(bridge: Any, *, cli: bool = False, **about: Any) -> dict[str, Any]:
    """The JSON results of a fitted bridge: ``{"kind": "bridge", "title", "tables", "notes", "choice", "estimate",
    ...}``; the quality estimate comes first in the notes. ``cli``: advice in command-line terms. ``about`` adds
    entries (e.g. the source and target file names)."""
    check_is_fitted(bridge, "routes_")
    tables = [route_table(bridge)]
    budget = budget_table(bridge)
    if budget is not None:
        tables.append(budget)
    chosen = chosen_row(bridge)
    estimate = getattr(bridge, "estimate_", None)
    notes = ([estimate.sentence() + "."] if estimate is not None else []) + [choice_sentence(bridge, cli=cli)]
    return {
        "kind": "bridge",
        "title": f"Bridge: {bridge.n_features_source_}-d source -> {bridge.n_features_target_}-d target "
        f"({bridge.n_anchors_} anchor pairs)",
        "tables": tables,
        "notes": [*notes, *(note.replace(UNPAIRED_FIX, UNPAIRED_FIX_CLI) if cli else note for note in bridge.notes_)],
        "choice": {
            "route": bridge.route_,
            "family": bridge.family_,
            "reliable": bridge.reliable_,
            "criterion": bridge.criterion_,
            "scores": {key: _cell(chosen.score(key)) for key in ("top1", "mrr", "cosine", "r2", "agreement")},
        },
        **({"estimate": estimate.to_dict()} if estimate is not None else {}),
        "selection_rule": bridge.selection_rule(),
        **about,
    }


def choice_sentence(bridge: Any, *, cli: bool = False) -> str:
    chosen = chosen_row(bridge)
    consumer = family_of(bridge.family_).consumer_advice(cli)
    scores = f"held-out MRR {chosen.mrr[0]:.3f}, top-1 {chosen.top1[0]:.3f}"
    if chosen.r2 is not None:
        scores += f", R^2 {chosen.r2[0]:.3f}"
    if chosen.agreement is not None:
        scores += f", head agreement {chosen.agreement[0]:.3f}"
    params = _params(chosen)
    warning = "" if bridge.reliable_ else ", NOT clearly better than shuffled pairs"
    return (
        f"Chosen: {bridge.route_}{f' ({params})' if params else ''} ({bridge.family_}; {scores}){warning}: {consumer}."
    )
