"""Experiment 7 / Figure 8: sparsity of L1-regularised task-loss matching vs L1 direct matching (Lasso), entries
below 1e-4 set to zero."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from latentstitch.experiments._report import ResultTable
from latentstitch.experiments.frankenstein.context import Context, interpolated, save
from latentstitch.stitching import SparsityResult, sparsity_sweep

THRESHOLD = 1e-4
METHODS = ("task loss (L1)", "direct (Lasso)")


def measure(context: Context) -> list[dict[str, Any]]:
    config = context.config
    model_a, model_b = context.pair()
    context.stage(f"Figure 8: sparsity at {config.sparsity_layer}")
    result = sparsity_sweep(
        model_a,
        model_b,
        config.sparsity_layer,
        data=context.stitch_data,
        eval_data=context.eval_data,
        direct_data=context.direct_data,
        l1=config.l1,
        alphas=config.alphas,
        threshold=THRESHOLD,
        task_loss=context.task_loss(sweep=True),
        progress=False,
    )
    return result.rows


def at_sparsity(rows: list[dict[str, Any]], sparsity: float) -> dict[str, float | None]:
    """Each method's relative accuracy interpolated at ``sparsity`` (None where its curve does not reach it)."""
    return {
        m: interpolated([(r["sparsity"], r["relative_accuracy"]) for r in rows if r["method"] == m], sparsity)
        for m in METHODS
    }


def table(rows: list[dict[str, Any]], layer: str) -> ResultTable:
    cells = [[r["method"], r["penalty"], r["sparsity"], r["relative_accuracy"]] for r in rows]
    cells.append(["paper (Fig. 8)", None, "0.8-0.9", "direct drops drastically, task loss holds"])
    return ResultTable(
        f"Experiment 7 / Figure 8: sparsity at {layer} (entries < {THRESHOLD:g} set to zero)",
        ["method", "L1 strength / Lasso alpha", "sparsity", "relative accuracy"],
        cells,
    )


def plot(rows: list[dict[str, Any]], layer: str, path: Path) -> str:
    return save(SparsityResult(layer, THRESHOLD, rows).plot(), path)
