"""Test macro-F1 along training, absolute vs relative, with the paper's values as lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from latentstitch._core.figures import pyplot, save_figure
from latentstitch.experiments.relative_training.patterns import PAPER_F1

LATENTS = ("absolute", "relative")


def plot_curves(curves: dict, tasks: dict, path: Path) -> str:
    plt = pyplot()
    figure, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 4), squeeze=False)
    for ax, (key, task) in zip(axes[0], tasks.items(), strict=True):
        for latent, colour in zip(LATENTS, ("tab:blue", "tab:orange"), strict=True):
            runs = np.asarray(curves[f"{key}/{latent}"])
            epochs = np.arange(1, runs.shape[1] + 1)
            mean, std = runs.mean(axis=0), runs.std(axis=0)
            ax.plot(epochs, mean, color=colour, marker="o", ms=3, label=f"{latent} (ours, mean of {len(runs)} seeds)")
            ax.fill_between(epochs, mean - std, mean + std, color=colour, alpha=0.2)
            ax.axhline(PAPER_F1[key, latent][0], color=colour, ls="--", lw=1, label=f"{latent} (paper, ResNet)")
        ax.set_xlabel("epoch")
        ax.set_ylabel("test macro-F1 x 100")
        ax.set_title(task.name)
        ax.legend(fontsize=8, loc="lower right")
    figure.suptitle("Classifiers trained with absolute vs relative latents", fontsize=11)
    figure.tight_layout()
    return save_figure(figure, path)
