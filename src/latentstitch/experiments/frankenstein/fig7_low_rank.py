"""Section 7 / Figure 7: rank-r least squares (reduced-rank regression, by SVD in activation space) vs a trained
rank-r bottleneck (task loss)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from latentstitch.experiments._report import ResultTable
from latentstitch.experiments.frankenstein.context import Context, new_figure, save
from latentstitch.stitching import ReducedRank, fit_direct, fit_task_loss, stitch


def measure(context: Context) -> list[dict[str, Any]]:
    """Per layer and rank: the least-squares matching truncated by SVD against a trained bottleneck. Each (layer,
    rank) is a stage of its own in the run's checkpoint, so an interrupted run resumes at the one it stopped in (every
    training is seeded: the numbers are those of one uninterrupted run)."""
    config = context.config
    model_a, model_b = context.pair()
    return [
        context.checkpoint.numbers(
            f"figure7_{layer}_rank{rank}", lambda layer=layer, rank=rank: _row(context, model_a, model_b, layer, rank)
        )
        for layer in config.rank_layers
        for rank in config.ranks
    ]


def _row(context: Context, model_a, model_b, layer: str, rank: int) -> dict[str, Any]:
    context.stage(f"Figure 7: {layer}, rank {rank}")
    direct = fit_direct(ReducedRank(rank), model_a, model_b, layer, layer, context.direct_data)
    svd = context.metrics(stitch(model_a, model_b, layer, layer, direct))["relative_accuracy"]
    bottleneck = stitch(model_a, model_b, layer, layer)
    fit_task_loss(bottleneck, context.stitch_data, **context.task_loss(sweep=True, rank=rank, init="random"))
    trained = context.metrics(bottleneck)["relative_accuracy"]
    return {"layer": layer, "rank": rank, "channels": direct.n_features_in_, "svd": svd, "task": trained}


def table(rows: list[dict[str, Any]]) -> ResultTable:
    return ResultTable(
        "Section 7 / Figure 7: low-rank matching, relative accuracy",
        ["layer", "channels", "rank", "least squares by SVD", "trained bottleneck", "paper"],
        [[r["layer"], r["channels"], r["rank"], r["svd"], r["task"], "bottleneck > SVD"] for r in rows],
    )


def plot(rows: list[dict[str, Any]], path: Path) -> str:
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    figure, axes = new_figure(5 * len(layers), 3.8, len(layers))
    for ax, layer in zip(axes, layers, strict=True):
        chosen = [r for r in rows if r["layer"] == layer]
        positions = np.arange(len(chosen))
        ax.bar(positions - 0.2, [r["svd"] for r in chosen], 0.4, label="least squares by SVD (reduced rank)")
        ax.bar(positions + 0.2, [r["task"] for r in chosen], 0.4, label="trained bottleneck (task loss)")
        ax.set_xticks(positions, [str(r["rank"]) for r in chosen])
        ax.set_xlabel("rank of the stitching matrix")
        ax.set_ylabel("relative accuracy")
        ax.set_ylim(0, 1.3)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        ax.set_title(f"Tiny-10 {layer} ({chosen[0]['channels']} channels)", fontsize=10)
        ax.legend(fontsize=8, loc="upper left")
    figure.suptitle("Fig. 7: low-rank stitching, SVD in activation space vs task loss")
    return save(figure, path)
