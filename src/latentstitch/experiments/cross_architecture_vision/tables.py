"""The results table (ours beside the paper's) and which zero-shot route wins per direction."""

from __future__ import annotations

import itertools

import numpy as np

from latentstitch.experiments._report import ResultTable
from latentstitch.experiments.cross_architecture_vision.config import ENCODERS, PAPER_F1, ROUTES, SHORT


def cell(summary: dict, decoder: str, encoder: str, route: str):
    return summary.get(f"{decoder}<-{encoder}/{route}")


def results_table(summary: dict) -> ResultTable:
    rows = []
    for decoder, encoder in itertools.product(ENCODERS, ENCODERS):
        kind = "non-stitched" if decoder == encoder else "stitched"
        rows.append(
            [f"{SHORT[decoder]} head", f"{SHORT[encoder]} features", kind]
            + [cell(summary, decoder, encoder, route) for route in ROUTES]
            + [PAPER_F1[kind, "absolute"], PAPER_F1[kind, "relative"]]
        )
    return ResultTable(
        "Fashion-MNIST test macro-F1 x 100 (mean ± std over head seeds)",
        ["head trained on", "applied to", "type", *ROUTES, "paper absolute", "paper relative"],
        rows,
        note="paper: CIFAR-100 coarse, head on vit-base-patch16-224; stitched = features of vit-base-resnet50-384 "
        "(Moschella et al. ICLR 2023). Translation is n/a when no encoder is swapped.",
        digits=2,
    )


def winners_table(summary: dict, pairs: list) -> ResultTable:
    rows = []
    for decoder, encoder in pairs:
        ranked = sorted(ROUTES, key=lambda r: -cell(summary, decoder, encoder, r)[0])
        first, second = (cell(summary, decoder, encoder, r)[0] for r in ranked[:2])
        rows.append([f"{SHORT[encoder]} -> {SHORT[decoder]} head", ranked[0], first, ranked[1], second, first - second])
    mean = {r: np.mean([cell(summary, d, e, r)[0] for d, e in pairs]) for r in ROUTES}
    ranked = sorted(ROUTES, key=lambda r: -mean[r])
    rows.append(
        ["mean of both", ranked[0], mean[ranked[0]], ranked[1], mean[ranked[1]], mean[ranked[0]] - mean[ranked[1]]]
    )
    return ResultTable(
        "Which zero-shot route wins (macro-F1 x 100)",
        ["direction", "best route", "its F1", "runner-up", "its F1", "margin (points)"],
        rows,
        digits=2,
    )
