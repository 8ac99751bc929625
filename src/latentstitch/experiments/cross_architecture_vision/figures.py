"""Macro-F1 of each zero-shot route, per (head, features) pair."""

from __future__ import annotations

import itertools
from pathlib import Path

from latentstitch._core.figures import pyplot, save_figure
from latentstitch.experiments.cross_architecture_vision.config import ENCODERS, ROUTES, SHORT
from latentstitch.experiments.cross_architecture_vision.tables import cell


def plot_routes(summary: dict, path: Path) -> str:
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(9, 4.6))
    groups = list(itertools.product(ENCODERS, ENCODERS))
    colours = ("tab:grey", "tab:blue", "tab:orange", "tab:green")
    width = 0.2
    for k, (route, colour) in enumerate(zip(ROUTES, colours, strict=True)):
        xs, ys, errs = [], [], []
        for g, (decoder, encoder) in enumerate(groups):
            value = cell(summary, decoder, encoder, route)
            if value is not None:
                xs.append(g + (k - 1.5) * width)
                ys.append(value[0])
                errs.append(value[1])
        ax.bar(xs, ys, width, yerr=errs, color=colour, label=route)
    ax.axhline(10.0, color="black", ls=":", lw=1, label="chance (10 classes)")
    ax.set_xticks(
        range(len(groups)),
        [f"{SHORT[e]} features\n-> {SHORT[d]} head" + ("" if d != e else "\n(non-stitched)") for d, e in groups],
    )
    ax.set_ylabel("test macro-F1 x 100")
    ax.set_ylim(0, 100)
    ax.set_title("Fashion-MNIST on frozen EfficientNet-lite features: zero-shot routes across encoders", fontsize=11)
    ax.legend(fontsize=8, loc="upper center", ncol=5, bbox_to_anchor=(0.5, -0.2))
    figure.tight_layout()
    return save_figure(figure, path)
