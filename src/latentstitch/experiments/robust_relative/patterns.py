"""The paper's patterns (robust beats vanilla, densification adds a little, robust beats absolute), declared once per
pair of domains, and our numbers for them."""

from __future__ import annotations

from typing import Any

import numpy as np

from latentstitch.experiments._report import Pattern, above
from latentstitch.experiments.robust_relative.experiment import stitched_mean

# methods §2, results/rel_multi_topo of the official repository: (accuracy, weighted F1) x 100, mean ± std, 5 seeds.
PAPER_TABLE = {
    "en->en": {
        "absolute": ((59.25, 0.57), (58.55, 0.96)),
        "vanilla": ((36.84, 1.23), (23.50, 2.77)),
        "robust": ((60.97, 0.63), (60.52, 0.79)),
        "robust+topo": ((61.16, 0.42), (61.26, 0.18)),
    },
    "en->fr": {
        "absolute": ((24.96, 9.27), (23.19, 8.12)),
        "vanilla": ((35.42, 1.16), (20.86, 1.09)),
        "robust": ((60.74, 0.88), (60.18, 1.14)),
        "robust+topo": ((60.93, 0.56), (61.23, 0.46)),
    },
    "fr->en": {
        "absolute": ((24.28, 10.11), (22.27, 8.86)),
        "vanilla": ((40.96, 2.40), (31.15, 3.29)),
        "robust": ((49.92, 1.51), (50.13, 1.60)),
        "robust+topo": ((50.48, 1.04), (50.85, 1.25)),
    },
    "fr->fr": {
        "absolute": ((49.26, 1.04), (48.74, 0.73)),
        "vanilla": ((41.99, 3.18), (35.33, 4.57)),
        "robust": ((50.31, 0.88), (50.95, 0.82)),
        "robust+topo": ((50.63, 0.79), (50.97, 0.85)),
    },
}


def _paper_stitched(variant: str, metric: int = 0) -> float:
    return float(np.mean([PAPER_TABLE[key][variant][metric][0] for key in ("en->fr", "fr->en")]))


def _paper(first: str, second: str) -> str:
    a, b = _paper_stitched(first), _paper_stitched(second)
    return f"en/fr reviews: {a:.1f} vs {b:.1f} accuracy ({a - b:+.1f})"


def patterns(bible: bool, cldr_pairs: list[tuple[str, str]], headline_pair: tuple[str, str] | None) -> list[Pattern]:
    declared = []
    if bible:
        declared += [
            Pattern(
                "bible-robust-beats-vanilla",
                "Bible verses en/es: robust > vanilla (stitched accuracy and F1)",
                _paper("robust", "vanilla"),
                "smaller gain in accuracy and weighted F1 (points)",
                above(0.0),
            ),
            Pattern(
                "bible-topo-adds",
                "Bible verses en/es: topological densification adds on top of robust",
                _paper("robust+topo", "robust"),
                "smaller gain in accuracy and weighted F1 (points)",
                above(0.0),
            ),
            Pattern(
                "bible-robust-beats-absolute",
                "Bible verses en/es: robust > absolute (stitched accuracy)",
                _paper("robust", "absolute"),
                "accuracy gain (points)",
                above(0.0),
            ),
        ]
    for a, b in cldr_pairs:
        headline = (a, b) == headline_pair
        paper = (lambda x, y: _paper(x, y)) if {a, b} == {"en", "fr"} else (lambda x, y: "n/a (the paper: en/fr only)")
        declared += [
            Pattern(
                f"cldr-{a}-{b}-robust-beats-vanilla",
                f"emoji names {a}/{b}: robust > vanilla (stitched accuracy and F1)",
                paper("robust", "vanilla"),
                "smaller gain in accuracy and weighted F1 (points)",
                above(0.0),
                headline=headline,
            ),
            Pattern(
                f"cldr-{a}-{b}-robust-beats-absolute",
                f"emoji names {a}/{b}: robust > absolute (stitched accuracy)",
                paper("robust", "absolute"),
                "accuracy gain (points)",
                above(0.0),
            ),
        ]
    if cldr_pairs:
        declared.append(
            Pattern(
                "cldr-topo-adds",
                "emoji names: topological densification adds on top of robust (mean over pairs)",
                _paper("robust+topo", "robust"),
                "smaller mean gain in accuracy and weighted F1 (points)",
                above(0.0),
            )
        )
    return declared


def _gain(found: dict, pair: tuple[str, str], better: str, worse: str) -> tuple[float, str]:
    gains = [
        100 * (stitched_mean(found, pair, better, m) - stitched_mean(found, pair, worse, m))
        for m in ("accuracy", "weighted_f1")
    ]
    detail = (
        f"accuracy {100 * stitched_mean(found, pair, better):.1f} vs {100 * stitched_mean(found, pair, worse):.1f}, "
        f"weighted F1 {100 * stitched_mean(found, pair, better, 'weighted_f1'):.1f} vs "
        f"{100 * stitched_mean(found, pair, worse, 'weighted_f1'):.1f}"
    )
    return min(gains), detail


def _other_seed(found: dict, pair: tuple[str, str], variant: str) -> str:
    values = [
        r["accuracy"]
        for key in (f"{pair[0]}->{pair[1]}", f"{pair[1]}->{pair[0]}")
        for r in found["other_seed"].get(key, {}).get(variant, [])
    ]
    return f"{100 * np.mean(values):.1f}" if values else "n/a"


def _versus_absolute(found: dict, pair: tuple[str, str]) -> tuple[float, str]:
    robust, absolute = stitched_mean(found, pair, "robust"), stitched_mean(found, pair, "absolute")
    return (
        100 * (robust - absolute),
        f"{100 * robust:.1f} vs {100 * absolute:.1f}; with heads of a different seed: robust "
        f"{_other_seed(found, pair, 'robust')}, absolute {_other_seed(found, pair, 'absolute')}",
    )


def measure(bible: dict | None, cldr: dict | None, cldr_pairs: list[tuple[str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if bible is not None:
        pair = ("en", "es")
        out["bible-robust-beats-vanilla"] = _gain(bible, pair, "robust", "vanilla")
        out["bible-topo-adds"] = _gain(bible, pair, "robust+topo", "robust")
        out["bible-robust-beats-absolute"] = _versus_absolute(bible, pair)
    topo = []
    for pair in cldr_pairs:
        a, b = pair
        out[f"cldr-{a}-{b}-robust-beats-vanilla"] = _gain(cldr, pair, "robust", "vanilla")
        out[f"cldr-{a}-{b}-robust-beats-absolute"] = _versus_absolute(cldr, pair)
        topo.append(_gain(cldr, pair, "robust+topo", "robust"))
    if cldr_pairs:
        out["cldr-topo-adds"] = (
            float(np.mean([g for g, _ in topo])),
            "; ".join(f"{a}/{b}: {detail}" for (a, b), (_, detail) in zip(cldr_pairs, topo, strict=True)),
        )
    return out
