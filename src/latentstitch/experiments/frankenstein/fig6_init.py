"""Experiment 5 / Figure 6: task-loss matching from random vs least-squares initialisations at a few layers. The
least-squares runs at the trace layer record Figure 4's similarity traces; the random-init stitching layers feed
Experiment 6 (mode connectivity)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from latentstitch.experiments._report import ResultTable, mean_std
from latentstitch.experiments.frankenstein.context import Context, new_figure, save
from latentstitch.stitching import LeastSquares, fit_direct, fit_task_loss, stitch

INITS = ("random", "least squares")


def measure(context: Context) -> tuple[dict[str, Any], dict[str, list[nn.Module]]]:
    """Per layer: relative accuracy of every run per init, Figure 4's traces; and the random-init layers."""
    config = context.config
    model_a, model_b = context.pair()
    runs: dict[str, dict[str, list[Any]]] = {}
    random_layers: dict[str, list[nn.Module]] = {}
    for layer in config.init_layers:
        least_squares = fit_direct(LeastSquares(), model_a, model_b, layer, layer, context.direct_data)
        runs[layer] = {"random": [], "least squares": [], "traces": []}
        random_layers[layer] = []
        for seed in range(config.init_runs):
            for init in INITS:
                context.stage(f"Experiment 5: {layer}, {init} init, run {seed + 1}/{config.init_runs}")
                stitched = stitch(model_a, model_b, layer, layer)
                track = init == "least squares" and layer == config.trace_layer
                outcome = fit_task_loss(
                    stitched,
                    context.stitch_data,
                    **context.task_loss(
                        sweep=layer not in config.long_layers,
                        init="random" if init == "random" else least_squares,
                        seed=seed,
                        track_every=config.track_every if track else None,
                        probe=context.probe if track else None,
                    ),
                )
                runs[layer][init].append(context.metrics(stitched)["relative_accuracy"])
                if init == "random":
                    random_layers[layer].append(stitched.stitching_layer)
                if track:
                    runs[layer]["traces"].append(outcome.trace)
    return runs, random_layers


def layer_tensors(random_layers: dict[str, list[nn.Module]]) -> dict[str, torch.Tensor]:
    """The random-init stitching layers as tensors (``LAYER.RUN.PARAMETER``), for the run's checkpoint."""
    return {
        f"{layer}.{run}.{name}": value
        for layer, modules in random_layers.items()
        for run, module in enumerate(modules)
        for name, value in module.state_dict().items()
    }


def layers_from_tensors(context: Context, tensors: dict[str, torch.Tensor]) -> dict[str, list[nn.Module]]:
    """``layer_tensors`` back into stitching layers of the main pair (strict: every parameter present)."""
    model_a, model_b = context.pair()
    out: dict[str, list[nn.Module]] = {}
    for layer in context.config.init_layers:
        out[layer] = []
        for run in range(context.config.init_runs):
            prefix = f"{layer}.{run}."
            module = stitch(model_a, model_b, layer, layer).initialize("random", example=context.probe[:2])
            state = {key[len(prefix) :]: value for key, value in tensors.items() if key.startswith(prefix)}
            module.stitching_layer.load_state_dict(state)
            out[layer].append(module.stitching_layer)
    return out


def table(numbers: dict[str, Any]) -> ResultTable:
    rows = []
    for layer, entry in numbers.items():
        for init in INITS:
            values = entry[init]
            rows.append([layer, init, mean_std(values), min(values), max(values), len(values)])
    rows.append(["paper (Fig. 6)", "LS init", "consistently well", None, None, 50])
    rows.append(["paper (Fig. 6)", "random init", "same order, sometimes stuck", None, None, 50])
    return ResultTable(
        "Experiment 5 / Figure 6: relative accuracy by initialisation of task-loss matching",
        ["layer", "init", "mean ± std", "min", "max", "runs"],
        rows,
    )


def stability(numbers: dict[str, Any]) -> tuple[float, str]:
    """Layers where least-squares init is at least as stable as random (spread no larger, worst run no lower)."""
    stable, parts = 0, []
    for layer, entry in numbers.items():
        r, q = entry["random"], entry["least squares"]
        stable += bool(np.std(q) <= np.std(r) and min(q) >= min(r))
        parts.append(
            f"{layer}: random {np.mean(r):.3f} ± {np.std(r):.3f} (min {min(r):.3f}), "
            f"LS {np.mean(q):.3f} ± {np.std(q):.3f} (min {min(q):.3f})"
        )
    return stable / len(numbers), "; ".join(parts)


def plot(numbers: dict[str, Any], path: Path) -> str:
    figure, axes = new_figure(5 * len(numbers), 3.8, len(numbers))
    for ax, (layer, entry) in zip(axes, numbers.items(), strict=True):
        for row, (init, color) in enumerate((("random", "C3"), ("least squares", "C0"))):
            values = entry[init]
            ax.scatter(values, [row] * len(values), color=color, s=40, alpha=0.7, label=f"{init} init")
        ax.set_yticks([0, 1], ["random", "least squares"])
        ax.set_ylim(-0.6, 1.6)
        ax.set_xlabel("relative accuracy after task-loss training")
        ax.set_ylabel("initialisation")
        ax.set_title(f"Tiny-10 {layer}", fontsize=10)
        ax.legend(fontsize=8, loc="lower left")
    figure.suptitle("Fig. 6: relative accuracy by initialisation (one dot per run)")
    return save(figure, path)
