"""The notes a fit leaves in ``Bridge.notes_``, each naming a true cause: constant and near-dead features of either
side, rank deficiency, routes that failed, no route better than shuffled pairs, heads that did not converge."""

from __future__ import annotations

from typing import Any

from latentstitch.bridge._crossval import CLEAR_Z
from latentstitch.bridge._dead import DEAD_SPREAD

#: A feature whose spread over the anchors is below this fraction of the largest feature's is "near-dead".
NEAR_DEAD = 1e-3


def feature_notes(anchors: Any) -> list[str]:
    """One note per side with constant or near-dead features, saying what they do to the routes (and, on the
    target side, which of them translation routes hold at their anchor mean: ``_dead``)."""
    notes = []
    for side, values in (("source (new model)", anchors.source64), ("target (old model)", anchors.target64)):
        spread = values.std(dim=0, correction=0)
        top = float(spread.max()) if spread.numel() else 0.0
        constant = int((spread <= 1e-12 * max(top, 1e-300)).sum())
        dead = int((spread < NEAR_DEAD * top).sum()) - constant
        if not (constant or dead):
            continue
        parts = [f"{constant} constant" if constant else "", f"{dead} near-dead" if dead else ""]
        held = len(anchors.dead) if side.startswith("target") else 0
        note = (
            f"The {side} has {' and '.join(p for p in parts if p)} of its {values.shape[1]} features over the "
            f"{values.shape[0]} anchors (spread below {NEAR_DEAD:g} of the largest, e.g. ReLU units that never fire)."
        )
        if held:
            note += (
                f" Translation routes hold the {held} below {DEAD_SPREAD:g} of the largest at their anchor mean "
                "(dead_features_), so a head that standard-scales its input does not blow up a route's noise there."
            )
        if constant + dead > held:
            note += (
                (f" The other {constant + dead - held} still vary a little." if held else "")
                + " An index reads them as little as they vary; a head that standard-scales its input (LinearHead, "
                "StandardScaler + a classifier) blows them up, so a route that puts variance into them (procrustes, "
                "procrustes_scaled: a rotation spreads the source's variance over every target feature) can collapse "
                "such a head while retrieval stays good. With such a head, pass it as fit(..., head=) or compare "
                "r2_scaled in the route table."
            )
        notes.append(note)
    return notes


def fit_notes(
    results: list[Any], rows: list[Any], reliable: bool, anchors: Any, widths: tuple[int, int], unconverged: int
) -> tuple[list[str], list[str]]:
    """The fit's notes and the ones worth a warning: feature notes, rank deficiency (with fewer training anchors than
    features), routes that could not be fitted, no route clearly better than shuffled pairs, unconverged heads."""
    notes, warn = feature_notes(anchors), []
    deficient = {r.score.route: r.rank_deficient for r in results if r.rank_deficient}
    if deficient and anchors.n_train < max(widths):
        names = ", ".join(f"{name} ({count} fits)" for name, count in deficient.items())
        notes.append(
            f"Rank deficiency while cross-validating: {names}. With about {anchors.n_train} training anchors per "
            f"fold for {widths[0]} source / {widths[1]} target features, these maps "
            "are not unique and one optimum was used; routes with a regularised or scale-free solution (ridge, "
            "relative) are not affected. More anchors than features remove it."
        )
        warn.append(notes[-1])
    for row in rows:
        if row.error:
            notes.append(f"Route {row.route} could not be fitted: {row.error}")
    if not reliable:
        best = max((r for r in rows if not r.error), key=lambda r: r.z)
        notes.append(
            f"No route is clearly better than shuffled pairs: the best, {best.route}, finds an anchor's own "
            f"partner with MRR {best.mrr[0]:.3f} against {best.chance_mrr:.3f} for shuffled pairs "
            f"({best.z:.1f} standard errors above; {CLEAR_Z:g} needed). Check that the two files hold the "
            "same items in the same order (or match them by ids), or give more anchors. The bridge is kept "
            "but is not reliable."
            + (
                " If the two sides hold no pairs at all (different items), the route 'unpaired' (routes="
                "['unpaired'], CLI --routes unpaired) aligns them from their structure alone; its score_ tells "
                "whether that worked."
                if "unpaired" not in {r.route for r in rows}
                else ""
            )
        )
        warn.append(notes[-1])
    if unconverged:
        notes.append(
            f"The linear heads that score relative routes with the head did not converge in {unconverged} "
            "fits; their agreement may be slightly low."
        )
    return notes, warn
