"""Accuracy of every variant in every direction."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from latentstitch._core.figures import pyplot, save_figure
from latentstitch.experiments._text import SHORT_NAMES
from latentstitch.experiments.robust_relative.models import VARIANTS


def plot_results(results: dict, domains: dict[str, str], title: str, path: Path) -> str:
    plt = pyplot()

    keys = list(results)
    x = np.arange(len(keys))
    width = 0.2
    figure, ax = plt.subplots(figsize=(max(10, 1.3 * len(keys)), 4.8))
    for j, variant in enumerate(VARIANTS):
        runs = [results[k][variant] for k in keys]
        means = [np.mean([100 * r["accuracy"] for r in rs]) if rs else np.nan for rs in runs]
        stds = [np.std([100 * r["accuracy"] for r in rs]) if rs else 0.0 for rs in runs]
        ax.bar(x + (j - 1.5) * width, means, width, yerr=stds, capsize=3, label=variant)
    ax.set_xticks(x, [f"{k}\n({'stitched' if k.split('->')[0] != k.split('->')[1] else 'own head'})" for k in keys])
    ax.set_xlabel("A->B: encoder and anchors of domain A, head of domain B, test texts of A")
    ax.set_ylabel("test accuracy x 100")
    ax.set_ylim(0, 100)
    names = " / ".join(f"{lang}: {SHORT_NAMES[model]}" for lang, model in domains.items())
    ax.set_title(f"{title} ({names}): relative transforms for stitching", fontsize=10)
    ax.legend(ncols=4, loc="upper center")
    figure.tight_layout()
    return save_figure(figure, path, dpi=100)
