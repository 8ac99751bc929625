"""Notes on the anchors that name a true cause: constant and near-dead features of either side."""

from __future__ import annotations

from typing import Any

#: A feature whose spread over the anchors is below this fraction of the largest feature's is "near-dead".
NEAR_DEAD = 1e-3


def feature_notes(anchors: Any) -> list[str]:
    """One note per side with constant or near-dead features, saying what they do to the routes."""
    notes = []
    for side, values in (("source (new model)", anchors.source64), ("target (old model)", anchors.target64)):
        spread = values.std(dim=0, correction=0)
        top = float(spread.max()) if spread.numel() else 0.0
        constant = int((spread <= 1e-12 * max(top, 1e-300)).sum())
        dead = int((spread < NEAR_DEAD * top).sum()) - constant
        if constant or dead:
            parts = [f"{constant} constant" if constant else "", f"{dead} near-dead" if dead else ""]
            notes.append(
                f"The {side} has {' and '.join(p for p in parts if p)} of its {values.shape[1]} features over the "
                f"{values.shape[0]} anchors (spread below {NEAR_DEAD:g} of the largest, e.g. ReLU units that never "
                "fire). An index reads them as little as they vary; a head that standard-scales its input "
                "(LinearHead, StandardScaler + a classifier) blows them up, so a route that puts variance into them "
                "(procrustes, procrustes_scaled: a rotation spreads the source's variance over every target "
                "feature) can collapse such a head while retrieval stays good. With such a head, pass it as "
                "fit(..., head=) or compare r2_scaled in the route table."
            )
    return notes
