"""The figures: a grid of reconstructions (non-stitched and stitched), and the MSE bars beside the paper's."""

from __future__ import annotations

from pathlib import Path

import torch

from latentstitch._core.figures import pyplot, save_figure
from latentstitch.experiments.ae_stitching.config import PAPER_MSE


def plot_reconstructions(samples: dict, tasks: dict, seeds: tuple, path: Path) -> str:
    plt = pyplot()
    rows = list(next(iter(samples.values())))
    n = next(iter(samples.values()))["original"].shape[0]
    figure, axes = plt.subplots(
        len(rows), len(tasks), figsize=(4.2 * len(tasks), 0.62 * len(rows) + 1.0), squeeze=False
    )
    for col, (key, task) in enumerate(tasks.items()):
        for row, label in enumerate(rows):
            images = samples[key][label].clamp(0, 1)[:, 0]
            strip = torch.cat(list(images), dim=1).numpy()
            ax = axes[row, col]
            ax.imshow(strip, cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if col == 0:
                ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=9)
            if row == 0:
                ax.set_title(f"{task.name}: {n} test images", fontsize=10)
    figure.suptitle(
        f"Reconstructions: non-stitched = seed {seeds[0]}; stitched = encoder + anchors of seed {seeds[0]}, "
        f"decoder of seed {seeds[1]}",
        fontsize=10,
    )
    figure.tight_layout()
    return save_figure(figure, path)


def plot_mse(mse: dict, baselines: dict, tasks: dict, kinds: tuple, path: Path) -> str:
    plt = pyplot()
    figure, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4.2), squeeze=False)
    labels = [f"{m}\n{lat}" for m, lat in kinds]
    width = 0.38
    for ax, (key, task) in zip(axes[0], tasks.items(), strict=True):
        for offset, kind, colour in ((-width / 2, "non_stitched", "tab:blue"), (width / 2, "stitched", "tab:red")):
            values = [mse[f"{key}/{m}/{lat}"][f"{kind}_mean_std"] for m, lat in kinds]
            xs = [i + offset for i in range(len(kinds))]
            ax.bar(
                xs,
                [v[0] * 1e3 for v in values],
                width,
                yerr=[v[1] * 1e3 for v in values],
                color=colour,
                label=f"{kind.replace('_', '-')} (ours)",
            )
            paper = [PAPER_MSE.get((m, lat, kind.replace("_", "-"), key)) for m, lat in kinds]
            px = [x for x, p in zip(xs, paper, strict=True) if p]
            py = [p[0] for p in paper if p]
            ax.scatter(px, py, marker="_", s=400, color="black", zorder=3, label="paper" if offset < 0 else None)
        ax.axhline(baselines[key] * 1e3, color="grey", ls=":", lw=1.2, label="mean training image")
        ax.set_yscale("log")
        ax.set_xticks(range(len(kinds)), labels)
        ax.set_ylabel("test MSE x 10^-3 (log scale)")
        ax.set_title(task.name)
    handles, names = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, names, loc="lower center", ncol=4, fontsize=9)
    figure.suptitle("Zero-shot stitching across seeds: reconstruction error", fontsize=11)
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    return save_figure(figure, path)
