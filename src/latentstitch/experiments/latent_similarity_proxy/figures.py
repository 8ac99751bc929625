"""Similarity to the best model against validation accuracy, one point per grid model."""

from __future__ import annotations

from pathlib import Path

from latentstitch._core.figures import pyplot, save_figure
from latentstitch.experiments.latent_similarity_proxy.patterns import PAPER_PEARSON


def plot_proxy(models: list[dict], scores: dict, path: Path) -> str:
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(7, 5.2))
    epochs = sorted({m["epochs"] for m in models})
    colours = dict(zip(epochs, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False))
    markers = {"adam": "o", "sgd": "^"}
    for optimizer, marker in markers.items():
        for e in epochs:
            chosen = [m for m in models if m["optimizer"] == optimizer and m["epochs"] == e]
            ax.scatter(
                [m["similarity_to_best"] for m in chosen],
                [100 * m["val_accuracy"] for m in chosen],
                marker=marker,
                color=colours[e],
                s=24,
                alpha=0.75,
                label=f"{optimizer}, {e} epochs",
            )
    best = models[scores["best"]]
    ax.scatter(
        [best["similarity_to_best"]], [100 * best["val_accuracy"]], marker="*", s=220, color="black", label="best"
    )
    ax.set_xlabel("similarity to the best model: mean cos(r_model(v), r_best(v)) over validation images")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title(
        f"{len(models)} MLPs on MNIST: Pearson r = {scores['pearson']:.3f} over the {len(models) - 1} non-best models\n"
        f"(paper, Cora GNNs: {PAPER_PEARSON})",
        fontsize=11,
    )
    ax.legend(fontsize=8, ncol=2, loc="lower right")
    figure.tight_layout()
    return save_figure(figure, path)
