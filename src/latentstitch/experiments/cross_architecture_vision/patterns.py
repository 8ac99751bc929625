"""The paper's pattern (a zero-shot route far above absolute stitching), declared once per route."""

from __future__ import annotations

from typing import Any

from latentstitch.experiments._report import Pattern, at_least
from latentstitch.experiments.cross_architecture_vision.config import ROUTES, SHORT
from latentstitch.experiments.cross_architecture_vision.tables import cell

FAR_ABOVE = 20.0  # "far above absolute stitched": at least this many macro-F1 points more, fixed before running


def patterns() -> list[Pattern]:
    paper = {"relative": "81.4 vs 6.2 (+75 points, ViT heads on CIFAR-100)"}
    return [
        Pattern(
            f"{route}-far-above-absolute",
            f"{route} stitched far above absolute stitched (both directions)",
            paper.get(route, "n/a (latent translation is not in the paper)"),
            "smallest (route - absolute) stitched macro-F1 (points)",
            at_least(FAR_ABOVE),
            headline=True,
        )
        for route in ROUTES[1:]
    ]


def measure(summary: dict, pairs: list) -> dict[str, Any]:
    out = {}
    for route in ROUTES[1:]:
        gaps = [cell(summary, d, e, route)[0] - cell(summary, d, e, "absolute")[0] for d, e in pairs]
        detail = ", ".join(
            f"{SHORT[e]}->{SHORT[d]}: {cell(summary, d, e, route)[0]:.1f} vs {cell(summary, d, e, 'absolute')[0]:.1f}"
            for d, e in pairs
        )
        out[f"{route}-far-above-absolute"] = (min(gaps), detail)
    return out
