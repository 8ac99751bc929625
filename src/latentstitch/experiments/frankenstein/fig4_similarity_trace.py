"""Experiment 3 / Figure 4: CKA, R^2 and cross-entropy to model B along task-loss training from the least-squares
initialisation (the traces are recorded by Experiment 5's least-squares runs at the trace layer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from latentstitch.experiments._report import ResultTable, mean_std
from latentstitch.experiments.frankenstein.context import new_figure, save

QUANTITIES = ("cka", "r2", "cross_entropy")


def endpoints(traces: list[list[dict[str, float]]]) -> tuple[dict[str, tuple], dict[str, tuple]]:
    """Mean ± std over runs of each quantity at the first and the last record."""
    start = {k: mean_std([t[0][k] for t in traces]) for k in QUANTITIES}
    end = {k: mean_std([t[-1][k] for t in traces]) for k in QUANTITIES}
    return start, end


def table(traces: list[list[dict[str, float]]], layer: str) -> ResultTable:
    start, end = endpoints(traces)
    return ResultTable(
        f"Experiment 3 / Figure 4: along task-loss training at {layer}, from least squares ({len(traces)} runs)",
        ["quantity", "at init", "after training", "paper (Tiny-10 layer 3)"],
        [
            ["CKA(transformed A, B)", start["cka"], end["cka"], "large variance, decreasing"],
            ["R^2 of B by transformed A", start["r2"], end["r2"], "decreasing"],
            ["cross-entropy to B (probe)", start["cross_entropy"], end["cross_entropy"], "decreasing"],
        ],
    )


def _band(ax: Any, steps: np.ndarray, values: np.ndarray, color: str, label: str) -> None:
    for run in values:
        ax.plot(steps, run, ":", color=color, linewidth=0.8, alpha=0.7)
    mean, std = values.mean(0), values.std(0)
    ax.plot(steps, mean, "-", color=color, linewidth=2, label=label)
    ax.fill_between(steps, mean - std, mean + std, color=color, alpha=0.15)


def plot(traces: list[list[dict[str, float]]], layer: str, path: Path) -> str:
    figure, axes = new_figure(12, 3.8, 3)
    steps = np.array([record["step"] for record in traces[0]])
    labels = ("linear CKA(transformed A, B)", "R^2 of B by transformed A", "cross-entropy to model B")
    for ax, key, label, color in zip(axes, QUANTITIES, labels, ("C0", "C1", "C2"), strict=True):
        values = np.array([[record[key] for record in trace] for trace in traces])
        _band(ax, steps, values, color, f"mean of {len(traces)} runs (dotted: each run)")
        ax.set_xlabel("optimiser step of task-loss training")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    figure.suptitle(f"Fig. 4: similarity indices along task-loss training from least squares, Tiny-10 {layer}")
    return save(figure, path)
