"""Validation accuracy against similarity to the best run, every epoch of every run."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from latentstitch._core.figures import pyplot, save_figure


def plot_scatter(trajectories, best: int, mean_per_run: float, pooled: float, name: str, path: Path) -> None:
    plt = pyplot()

    figure, ax = plt.subplots(figsize=(7.5, 5.5))
    for optimizer, marker in (("adam", "o"), ("sgd", "^")):
        chosen = [t for t in trajectories if t["config"]["optimizer"] == optimizer]
        if not chosen:
            continue
        sim = np.concatenate([t["similarity"] for t in chosen])
        acc = np.concatenate([t["val_accuracy"] for t in chosen])
        epoch = np.concatenate([np.arange(1, len(t["similarity"]) + 1) for t in chosen])
        points = ax.scatter(sim, acc, c=epoch, cmap="viridis", marker=marker, s=9, alpha=0.6, label=optimizer)
    reference = trajectories[best]
    ax.scatter(
        reference["similarity"][-1], reference["val_accuracy"][-1], marker="*", s=220, color="red", label="best run"
    )
    figure.colorbar(points, ax=ax, label="epoch")
    ax.set_xlabel("similarity to the best run (mean cosine of matched relative vectors)")
    ax.set_ylabel("validation accuracy")
    ax.set_title(
        f"{name}: every epoch of {len(trajectories)} GCN runs\n"
        f"Pearson r: {mean_per_run:.3f} per run (mean), {pooled:.3f} pooled"
    )
    ax.legend(title="optimiser", loc="lower right")
    figure.tight_layout()
    save_figure(figure, path, dpi=100)
