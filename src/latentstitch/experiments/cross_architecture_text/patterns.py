"""The paper's patterns for cross-architecture text stitching, declared once, and our numbers for them."""

from __future__ import annotations

from typing import Any

import numpy as np

from latentstitch.experiments._report import Pattern, at_least, below

KEEPS = 0.75  # relative stitched keeps >= 0.75x of relative non-stitched (the paper: 0.74-0.86x)
NEAR_CHANCE = 40.0  # absolute stitched macro-F1 < 40 (5 balanced topics: uniform guessing ~20)
FAR_ABOVE = 20.0  # relative stitched >= absolute stitched + 20 points


def patterns() -> list[Pattern]:
    return [
        Pattern(
            "relative-keeps",
            "relative stitched keeps most of relative non-stitched",
            "0.74-0.86x (75.9 / 88.1 TREC, 80.5 / 97.4 DBpedia, 72.4 / 85.1 Amazon)",
            "relative stitched / non-stitched macro-F1",
            at_least(KEEPS, "x"),
            headline=True,
        ),
        Pattern(
            "absolute-near-chance",
            "absolute stitched near chance (equal-width pairs)",
            "21.5 TREC, 7.0 DBpedia, 49.6 Amazon (2 classes)",
            "absolute stitched macro-F1 x 100",
            below(NEAR_CHANCE),
            headline=True,
        ),
        Pattern(
            "relative-far-above",
            "relative stitched far above absolute stitched",
            "+54, +74, +23 points",
            "relative - absolute stitched macro-F1 (points)",
            at_least(FAR_ABOVE),
            headline=True,
        ),
    ]


def measure(rel_own, rel_st, cen_own, cen_st, abs_st) -> dict[str, Any]:
    rel_own, rel_st, cen_own, cen_st = (float(np.mean(v)) for v in (rel_own, rel_st, cen_own, cen_st))
    absolute = float(np.mean(abs_st)) if abs_st else None
    none = "no pair of equal width"
    return {
        "relative-keeps": (
            rel_st / rel_own,
            f"{rel_st:.1f} vs {rel_own:.1f}; centred: {cen_st:.1f} vs {cen_own:.1f} ({cen_st / cen_own:.2f}x)",
        ),
        "absolute-near-chance": (absolute, f"over {len(abs_st)} runs of equal-width pairs" if abs_st else none),
        "relative-far-above": (
            None if absolute is None else rel_st - absolute,
            f"{rel_st:.1f} vs {absolute:.1f}" if absolute is not None else none,
        ),
    }
