"""Experiment 1 / Figure 2: least squares, Procrustes and task-loss matching at every layer, both directions of the
main pair, with the paper's baselines (identity stitching's cross-entropy, CKA after task loss)."""

from __future__ import annotations

from functools import partial
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
    """Both directions, every layer. Each (direction, layer) is a stage of its own in the run's checkpoint (about
    ten minutes of one core at the full settings), so an interrupted run resumes at the layer it stopped in; the
    layers are independent and seeded, so the numbers are those of one sweep over every layer."""
    config = context.config
    a, b = config.seeds
    methods = dict(zip(METHODS, (LeastSquares(), Procrustes(), TaskLoss(**context.task_loss(sweep=True))), strict=True))
    sweeps, identity_ce, cka_after = [], [], []
    for first, second in ((a, b), (b, a)):
        model_a, model_b = context.model(config.width, first), context.model(config.width, second)
        context.stage(f"Figure 2: every layer, seed {first} -> seed {second}")
        names = {layer: f"figure2_seed{first}_to_seed{second}_{layer}" for layer in config.layers}
        client = grid_client()  # each layer a task on the cluster of reproduce --workers N, if any
        missing = [layer for layer in config.layers if not context.checkpoint.has(names[layer])]
        batch = None
        if client is not None and missing:  # the missing layers at once on the cluster, each then kept
            batch = layer_sweep(context, model_a, model_b, missing, methods, client)
        parts = [
            context.checkpoint.numbers(names[layer], partial(_layer, context, model_a, model_b, layer, methods, batch))
            for layer in config.layers
        ]
        rows = [row for part in parts for row in part["rows"]]
        sweeps.append(
            {"direction": [first, second], "layers": list(config.layers), "methods": list(methods), "rows": rows}
        )
        identity_ce += [part["identity_cross_entropy"] for part in parts]
        cka_after += [part["cka_after_task_loss"] for part in parts]
    return {"sweeps": sweeps, "identity_cross_entropy": identity_ce, "cka_after_task_loss": cka_after}


def layer_sweep(context: Context, model_a, model_b, layers: list[str], methods: dict[str, Any], client: Any = None):
    """``stitching.sweep`` of ``methods`` at ``layers`` on the run's data (on the cluster of ``client``, if any)."""
    return sweep(
        model_a,
        model_b,
        layers,
        methods,
        data=context.stitch_data,
        eval_data=context.eval_data,
        direct_data=context.direct_data,
        progress=False,
        client=client,
    )


def _layer(context: Context, model_a, model_b, layer: str, methods: dict[str, Any], batch: Any) -> dict[str, Any]:
    """One layer of one direction: every method's rows, identity stitching's cross-entropy and the CKA between the
    task-loss stitched activations and B's."""
    done = batch is not None and layer in batch.layers
    result = batch if done else layer_sweep(context, model_a, model_b, [layer], methods)
    plain = stitch(model_a, model_b, layer, layer, "identity", example=context.probe)
    stitched = stitch(model_a, model_b, layer, layer, result.stitching_layers[layer, "task loss"])
    acts_a = get_activations(model_a, context.probe, layer)
    acts_b = get_activations(model_b, context.probe, layer)
    with torch.no_grad():
        transformed = stitched.stitching_layer(acts_a)
    return {
        "rows": [row for row in result.rows if row["layer"] == layer],
        "identity_cross_entropy": context.metrics(plain)["cross_entropy"],
        "cka_after_task_loss": float(cka(transformed.flatten(1).double(), acts_b.flatten(1).double())),
    }


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
