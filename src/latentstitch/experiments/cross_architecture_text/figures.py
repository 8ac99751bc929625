"""Macro-F1 of every (decoder head, encoder) pair for each route, as matrices."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from latentstitch._core.figures import pyplot, save_figure
from latentstitch.experiments._text import SHORT_NAMES


def plot_matrices(results: dict, names: list[str], path: Path) -> None:
    plt = pyplot()

    routes = ("absolute", "relative", "relative (centred)", "translated: ridge LS", "translated: Procrustes")
    figure, axes = plt.subplots(1, len(routes), figsize=(3.7 * len(routes), 4.2), constrained_layout=True)
    labels = [SHORT_NAMES[n] for n in names]
    for ax, route in zip(axes, routes, strict=True):
        matrix = np.full((len(names), len(names)), np.nan)
        for i, decoder in enumerate(names):
            for j, encoder in enumerate(names):
                runs = results[decoder, encoder][route]
                if not runs and route.startswith("translated") and decoder == encoder:
                    runs = results[decoder, encoder]["absolute"]
                if runs:
                    matrix[i, j] = np.mean([100 * r["macro_f1"] for r in runs])
        image = ax.imshow(matrix, vmin=0, vmax=100, cmap="viridis")
        for i in range(len(names)):
            for j in range(len(names)):
                text = "n/a" if np.isnan(matrix[i, j]) else f"{matrix[i, j]:.0f}"
                dark = not np.isnan(matrix[i, j]) and matrix[i, j] < 60
                ax.text(j, i, text, ha="center", va="center", color="w" if dark else "k", fontsize=9)
        ax.set_xticks(range(len(names)), labels, rotation=30, ha="right")
        ax.set_yticks(range(len(names)), labels)
        ax.set_xlabel("encoder (test embeddings)")
        ax.set_ylabel("decoder (trained head)")
        ax.set_title(route)
    figure.colorbar(image, ax=axes, shrink=0.8, label="macro-F1 x 100")
    figure.suptitle(
        "BBC News: a head trained on one encoder reads another (diagonal: non-stitched; translated panels' "
        "diagonal: the absolute head on its own encoder)"
    )
    save_figure(figure, path, dpi=90)
