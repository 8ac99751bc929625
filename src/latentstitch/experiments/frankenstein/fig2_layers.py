"""Experiment 1 / Figure 2: least squares, Procrustes and task-loss matching at every layer, both directions of the
main pair, with the paper's baselines (identity stitching's cross-entropy, CKA after task loss)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from latentstitch.experiments._grid import grid_client
from latentstitch.experiments._report import ResultTable, mean_std
from latentstitch.experiments.frankenstein.context import Context, save
from latentstitch.similarity import cka
from latentstitch.stitching import (
    LeastSquares,
    Procrustes,
    SweepResult,
    TaskLoss,
    get_activations,
    plot_sweep,
    stitch,
    sweep,
)

METHODS = ("least squares", "Procrustes", "task loss")


def measure(context: Context) -> dict[str, Any]:
    config = context.config
    a, b = config.seeds
    methods = dict(zip(METHODS, (LeastSquares(), Procrustes(), TaskLoss(**context.task_loss(sweep=True))), strict=True))
    sweeps, identity_ce, cka_after = [], [], []
    for first, second in ((a, b), (b, a)):
        model_a, model_b = context.model(config.width, first), context.model(config.width, second)
        context.stage(f"Figure 2: every layer, seed {first} -> seed {second}")
        result = sweep(
            model_a,
            model_b,
            config.layers,
            methods,
            data=context.stitch_data,
            eval_data=context.eval_data,
            direct_data=context.direct_data,
            progress=False,
            client=grid_client(),  # each layer a task on the cluster of reproduce --workers N, if any
        )
        sweeps.append(
            {"direction": [first, second], "layers": result.layers, "methods": result.methods, "rows": result.rows}
        )
        for layer in config.layers:
            plain = stitch(model_a, model_b, layer, layer, "identity", example=context.probe)
            identity_ce.append(context.metrics(plain)["cross_entropy"])
            stitched = stitch(model_a, model_b, layer, layer, result.stitching_layers[layer, "task loss"])
            acts_a = get_activations(model_a, context.probe, layer)
            acts_b = get_activations(model_b, context.probe, layer)
            with torch.no_grad():
                transformed = stitched.stitching_layer(acts_a)
            cka_after.append(float(cka(transformed.flatten(1).double(), acts_b.flatten(1).double())))
    return {"sweeps": sweeps, "identity_cross_entropy": identity_ce, "cka_after_task_loss": cka_after}


def sweep_results(numbers: dict[str, Any]) -> list[Any]:
    """The sweeps as ``SweepResult`` objects (rows only), from the JSON numbers."""
    return [SweepResult(s["layers"], s["methods"], s["rows"]) for s in numbers["sweeps"]]


def over_pairs(numbers: dict[str, Any], layer: str, method: str, metric: str = "relative_accuracy"):
    """Mean ± std of ``metric`` over both directions."""
    return mean_std([r.value(layer, method, metric) for r in sweep_results(numbers)])


def table(numbers: dict[str, Any]) -> ResultTable:
    results = sweep_results(numbers)
    methods = results[0].methods
    rows = []
    for layer in results[0].layers:
        cells = [over_pairs(numbers, layer, m) for m in methods]
        rows.append(
            [layer, *cells, cells[-1][0] - cells[0][0], over_pairs(numbers, layer, "task loss", "cross_entropy")]
        )
    rows.append(
        [
            "paper (Tiny-10, CIFAR-10, Fig. 2)",
            "fairly well on almost every layer",
            "same as LS on later layers",
            "near 100%, no collapse",
            None,
            None,
        ]
    )
    return ResultTable(
        "Experiment 1 / Figure 2: relative accuracy per stitching layer (mean ± std over both directions)",
        ["layer", *methods, "task loss - LS", "task loss CE to B"],
        rows,
        note="relative accuracy = stitched / model B on the test images; CE = cross-entropy to model B's outputs",
    )


def baselines_table(numbers: dict[str, Any]) -> ResultTable:
    identity, after = mean_std(numbers["identity_cross_entropy"]), mean_std(numbers["cka_after_task_loss"])
    return ResultTable(
        "Baselines over all layers and both directions",
        ["quantity", "ours", "paper (Tiny-10)"],
        [
            ["cross-entropy to B, stitched without transformation (Sec. 5.1)", identity, (6.99, 1.96)],
            ["CKA(transformed A, B) after task loss (Sec. 6.3)", after, (0.883, 0.050)],
        ],
        note="paper values from Sec. 5.1 (Figure 2 caption) and Sec. 6.3; their cross-entropy convention may "
        "differ by the number of classes (see differences)",
    )


def plot(numbers: dict[str, Any], path: Path) -> str:
    figure = plot_sweep(
        sweep_results(numbers), title="Fig. 2: stitching two Tiny-10s on Fashion-MNIST", cross_entropy=True
    )
    return save(figure, path)
