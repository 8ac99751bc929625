"""Experiment 6: linear mode connectivity between the random-init stitching matrices of Experiment 5 that reach the
threshold: relative accuracy along M = lambda M1 + (1 - lambda) M2."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from latentstitch.experiments._report import ResultTable, mean_std
from latentstitch.experiments.frankenstein.context import Context, new_figure, save
from latentstitch.stitching import interpolate_layers, stitch


def measure(context: Context, init_runs: dict[str, Any], random_layers: dict[str, list[nn.Module]]) -> dict[str, Any]:
    config = context.config
    model_a, model_b = context.pair()
    out: dict[str, Any] = {}
    for layer in config.init_layers:
        context.stage(f"Experiment 6: mode connectivity at {layer}")
        accuracies = init_runs[layer]["random"]
        kept = [
            (i, lay)
            for i, (lay, acc) in enumerate(zip(random_layers[layer], accuracies, strict=True))
            if acc >= config.mode_threshold
        ]
        paths = []
        for (i, first), (j, second) in itertools.combinations(kept, 2):
            curve = []
            for weight in config.lambdas:
                stitched = stitch(model_a, model_b, layer, layer, interpolate_layers(first, second, weight))
                curve.append(context.metrics(stitched)["relative_accuracy"])
            paths.append({"pair": [i, j], "relative_accuracy": curve})
        out[layer] = {"kept": len(kept), "runs": len(accuracies), "paths": paths}
    return out


def worst_dip(entry: dict[str, Any]) -> float | None:
    """Smallest (path minimum / lower endpoint) over the pairs of a layer; None without a pair."""
    if not entry["paths"]:
        return None
    return min(
        min(p["relative_accuracy"]) / max(min(p["relative_accuracy"][0], p["relative_accuracy"][-1]), 1e-9)
        for p in entry["paths"]
    )


def is_early(layer: str) -> bool:
    """The paper saw no mode connectivity on the first three layers."""
    return int(layer[2:]) <= 3


def table(numbers: dict[str, Any], lambdas: tuple[float, ...]) -> ResultTable:
    rows = []
    for layer, entry in numbers.items():
        paths = entry["paths"]
        if paths:
            ends = mean_std([v for p in paths for v in (p["relative_accuracy"][0], p["relative_accuracy"][-1])])
            lowest = mean_std([min(p["relative_accuracy"]) for p in paths])
            middle = mean_std([p["relative_accuracy"][len(lambdas) // 2] for p in paths])
        else:
            ends = lowest = middle = None
        rows.append([layer, f"{entry['kept']}/{entry['runs']}", len(paths), ends, middle, lowest, worst_dip(entry)])
    rows.append(["paper (Exp. 6)", ">= 0.8 kept", None, None, "holds on most layers", "not on the first three", None])
    return ResultTable(
        "Experiment 6: relative accuracy along M = lambda M1 + (1 - lambda) M2 between random-init runs",
        ["layer", "kept (>= 0.8)", "pairs", "endpoints", "lambda = 0.5", "minimum on the path", "worst min / end"],
        rows,
    )


def plot(numbers: dict[str, Any], path: Path) -> str:
    figure, axes = new_figure(5 * len(numbers), 3.8, len(numbers))
    for ax, (layer, entry) in zip(axes, numbers.items(), strict=True):
        for index, item in enumerate(entry["paths"]):
            curve = item["relative_accuracy"]
            ax.plot(
                np.linspace(0, 1, len(curve)),
                curve,
                "-o",
                color=f"C{index}",
                markersize=3,
                label=f"runs {item['pair'][0]} and {item['pair'][1]}",
            )
        ax.set_xlabel("lambda in M = lambda M1 + (1 - lambda) M2")
        ax.set_ylabel("relative accuracy")
        ax.set_title(f"Tiny-10 {layer}: {entry['kept']}/{entry['runs']} runs >= 0.8", fontsize=10)
        if entry["paths"]:
            ax.legend(fontsize=8)
    figure.suptitle("Experiment 6: linear mode connectivity of stitching matrices (random inits)")
    return save(figure, path)
