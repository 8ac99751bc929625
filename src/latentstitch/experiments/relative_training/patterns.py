"""The paper's pattern (relative latents cost almost nothing in accuracy), declared once per dataset."""

from __future__ import annotations

from typing import Any

from latentstitch.experiments._image_tasks import DATASETS
from latentstitch.experiments._report import Pattern, at_least, at_most

# Macro-F1 x 100, mean ± std (/work/shared/papers/relative-representations.md).
PAPER_F1 = {
    ("mnist", "relative"): (97.91, 0.07),
    ("mnist", "absolute"): (97.95, 0.10),
    ("fashion-mnist", "relative"): (90.19, 0.27),
    ("fashion-mnist", "absolute"): (90.32, 0.21),
}
CLOSE = 1.0  # the paper's closeness: relative within ~1 macro-F1 point of absolute
NOT_FAR_BELOW = 3.0  # the coarse form a small quick run can test: relative at most 3 points below absolute
LEARNS = 50.0  # a classifier that learns: macro-F1 >= 50 (5x chance on 10 balanced classes)


def patterns(keys: list[str]) -> list[Pattern]:
    declared = []
    for key in keys:
        name = DATASETS[key]
        paper_gap = PAPER_F1[key, "relative"][0] - PAPER_F1[key, "absolute"][0]
        declared += [
            Pattern(
                f"{key}-relative-learns",
                f"{name}: the relative classifier learns the task",
                f"macro-F1 {PAPER_F1[key, 'relative'][0]:g}",
                "relative macro-F1 x 100",
                at_least(LEARNS),
                headline=True,
            ),
            Pattern(
                f"{key}-relative-not-far-below",
                f"{name}: relative not far below absolute",
                f"{paper_gap:+.2f} points",
                "relative - absolute macro-F1 (points)",
                at_least(-NOT_FAR_BELOW),
                headline=True,
            ),
            Pattern(
                f"{key}-relative-close",
                f"{name}: relative within {CLOSE:g} point of absolute",
                f"{paper_gap:+.2f} points",
                "|relative - absolute| macro-F1 (points)",
                at_most(CLOSE),
            ),
        ]
    return declared


def measure(scores: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in keys:
        relative = scores[f"{key}/relative"]["macro_f1_mean_std"][0]
        absolute = scores[f"{key}/absolute"]["macro_f1_mean_std"][0]
        detail = f"relative {relative:.2f}, absolute {absolute:.2f}"
        out[f"{key}-relative-learns"] = (relative, detail)
        out[f"{key}-relative-not-far-below"] = (relative - absolute, detail)
        out[f"{key}-relative-close"] = (abs(relative - absolute), detail)
    return out
