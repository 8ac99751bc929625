"""Pearson r between validation accuracy and similarity to the best run: per run over its epochs (the paper's score),
with a bootstrap interval over runs, across runs at the final epoch, and pooled over every (run, epoch)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import pearsonr

from latentstitch._core.numerics import percentile_bootstrap_mean

LEVEL = 0.95


def optimizer_key(config: dict) -> str:
    """The optimiser and learning rate of a grid run, e.g. ``"sgd 0.02"``."""
    return f"{config['optimizer']} {config['lr']:g}"


def bootstrap_interval(values, resamples: int, *, level: float = LEVEL, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``values``, resampling them (the runs) with replacement."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float("nan"), float("nan")
    return percentile_bootstrap_mean(values, np.random.default_rng(seed), resamples, level)


def correlations(trajectories: list[dict], *, resamples: int = 2000) -> dict[str, Any]:
    """Every correlation of the report from the runs' trajectories (``val_accuracy`` and ``similarity`` per epoch)."""
    per_run, by_optimizer = [], {}
    for t in trajectories:
        acc, sim = np.asarray(t["val_accuracy"]), np.asarray(t["similarity"])
        if len(acc) > 2 and acc.std() > 0 and sim.std() > 0:  # a constant series has no correlation
            per_run.append(float(pearsonr(acc, sim).statistic))
            by_optimizer.setdefault(optimizer_key(t["config"]), []).append(per_run[-1])
    final_acc = np.asarray([t["val_accuracy"][-1] for t in trajectories])
    final_sim = np.asarray([t["similarity"][-1] for t in trajectories])
    all_acc = np.concatenate([t["val_accuracy"] for t in trajectories])
    all_sim = np.concatenate([t["similarity"] for t in trajectories])
    return {
        "per_run": per_run,
        "by_optimizer": by_optimizer,
        "mean_per_run": float(np.mean(per_run)) if per_run else float("nan"),
        "mean_per_run_interval": bootstrap_interval(per_run, resamples),
        "interval_level": LEVEL,
        "across_runs": float(pearsonr(final_acc, final_sim).statistic),
        "pooled": float(pearsonr(all_acc, all_sim).statistic),
    }
