"""Macro-F1 of every pairing, absolute vs relative."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from latentstitch._core.figures import pyplot, save_figure
from latentstitch.experiments._text import SHORT_NAMES


def plot_results(results: list[dict], chance: float, title: str, path: Path) -> str:
    plt = pyplot()
    labels = [
        f"{SHORT_NAMES[d[0]]} ({d[1]}) head\n<- {SHORT_NAMES[e[0]]} ({e[1]})"
        for d, e in ((r["decoder"], r["encoder"]) for r in results)
    ]
    x = np.arange(len(results))
    figure, ax = plt.subplots(figsize=(max(8, 1.6 * len(results)), 4.8))
    for offset, route, color in ((-0.2, "absolute", "tab:blue"), (0.2, "relative", "tab:orange")):
        means = [
            np.mean([100 * s["macro_f1"] for s in r["runs"][route]]) if r["runs"][route] else np.nan for r in results
        ]
        stds = [np.std([100 * s["macro_f1"] for s in r["runs"][route]]) if r["runs"][route] else 0 for r in results]
        ax.bar(x + offset, means, 0.4, yerr=stds, capsize=3, label=route, color=color)
        for xi, m in zip(x, means, strict=True):
            if np.isnan(m):
                ax.text(xi + offset, 2, "n/a", ha="center", fontsize=8)
    ax.axhline(chance, color="gray", linestyle="--", linewidth=1, label="majority class")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("macro-F1 x 100 (test)")
    ax.set_xlabel("decoder head (trained on English) <- encoder that reads the test texts")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.legend()
    figure.tight_layout()
    return save_figure(figure, path, dpi=100)
