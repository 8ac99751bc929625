"""Experiment 2 / Figure 3: task-loss matching (least-squares init) between networks of 1x, 2x and 4x width; the
main width reuses Figure 2's runs (same settings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from latentstitch.experiments._grid import grid_client
from latentstitch.experiments._report import ResultTable
from latentstitch.experiments.frankenstein import fig2_layers
from latentstitch.experiments.frankenstein.config import Config
from latentstitch.experiments.frankenstein.context import Context, new_figure, save
from latentstitch.stitching import LeastSquares, TaskLoss


def measure(context: Context, figure2: dict[str, Any]) -> dict[str, dict[str, float]]:
    """``{width: {layer: relative accuracy}}`` (widths as strings, for JSON). Each (width, layer) is a stage of its
    own in the run's checkpoint, so an interrupted run resumes at the one it stopped in; every layer's training is
    seeded on its own, so the numbers are those of one sweep over the layers."""
    config = context.config
    main = fig2_layers.sweep_results(figure2)[0]
    out: dict[str, dict[str, float]] = {}
    for width in config.widths:
        if width == config.width:
            out[f"{width:g}"] = {layer: main.value(layer, "task loss") for layer in config.width_layers}
            continue
        pair = context.pair(width)
        methods = {"least squares": LeastSquares(), "task loss": TaskLoss(**context.task_loss(sweep=True))}
        context.stage(f"Experiment 2: width x{width / config.widths[0]:g}")
        names = {layer: f"experiment2_width{width:g}_{layer}" for layer in config.width_layers}
        missing = [layer for layer in config.width_layers if not context.checkpoint.has(names[layer])]
        client = grid_client()  # the missing layers at once on the cluster of reproduce --workers N, if any
        batch = None
        if client is not None and missing:
            batch = fig2_layers.layer_sweep(context, *pair, missing, methods, client)

        def layer_value(layer: str, pair=pair, methods=methods, batch=batch) -> float:
            result = batch if batch is not None else fig2_layers.layer_sweep(context, *pair, [layer], methods)
            return result.value(layer, "task loss")

        out[f"{width:g}"] = {
            layer: context.checkpoint.numbers(names[layer], lambda layer=layer: layer_value(layer))
            for layer in config.width_layers
        }
    return out


def means(numbers: dict[str, dict[str, float]], config: Config) -> list[float]:
    """Mean relative accuracy over the layers, per width (in ``config.widths`` order)."""
    return [float(np.mean(list(numbers[f"{w:g}"].values()))) for w in config.widths]


def table(numbers: dict[str, dict[str, float]], config: Config) -> ResultTable:
    x1 = config.widths[0]
    rows = [[layer, *[numbers[f"{w:g}"][layer] for w in config.widths]] for layer in config.width_layers]
    rows.append(["mean", *means(numbers, config)])
    rows.append(["paper (ResNet-20, Fig. 3)", "already very high", *["increasing" for _ in config.widths[1:]]])
    return ResultTable(
        "Experiment 2 / Figure 3: task-loss relative accuracy by network width",
        ["layer", *[f"x{w / x1:g} (width {w:g})" for w in config.widths]],
        rows,
    )


def plot(numbers: dict[str, dict[str, float]], config: Config, path: Path) -> str:
    figure, (ax,) = new_figure(6, 4.2)
    multipliers = [w / config.widths[0] for w in config.widths]
    for index, layer in enumerate(config.width_layers):
        ax.plot(multipliers, [numbers[f"{w:g}"][layer] for w in config.widths], "-o", color=f"C{index}", label=layer)
    ax.set_xscale("log", base=2)
    ax.set_xticks(multipliers, [f"x{m:g}" for m in multipliers])
    ax.set_xlabel(f"width multiplier (x1 = {config.widths[0]:g} of the paper's Tiny-10)")
    ax.set_ylabel("relative accuracy (task loss, LS init)")
    ax.legend(fontsize=8, title="layer")
    ax.set_title("Fig. 3: stitching networks of different width", fontsize=11)
    return save(figure, path)
