"""The sparsity sweep (the paper's Experiment 7, Figure 8): relative accuracy against the sparsity of the stitching
matrix, L1 task loss against L1 direct matching (Lasso)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from latentstitch._core.figures import write_figure
from latentstitch._core.params import check_nonnegative
from latentstitch.stitching._direct import fit_direct
from latentstitch.stitching._lasso import SPARSITY_THRESHOLD, SparseLasso
from latentstitch.stitching._layers import affine_map, sparsify_layer
from latentstitch.stitching._metrics import stitch_metrics
from latentstitch.stitching._model import stitch
from latentstitch.stitching._task_loss import fit_task_loss


@dataclass
class SparsityResult:
    """Rows ``method`` ("task loss (L1)" or "direct (Lasso)"), ``penalty`` (``l1`` or ``alpha``), ``sparsity``
    (share of stitching-matrix entries below the threshold, which are set to zero before evaluation) and the
    metrics of ``stitch_metrics``. ``matrices[(method, penalty)]``: the thresholded (p, q) matrices."""

    layer: str
    threshold: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    matrices: dict[tuple[str, float], np.ndarray] = field(default_factory=dict)

    def plot(self, path: str | Path | None = None, *, title: str | None = None):
        """The paper's Figure 8 (right): relative accuracy against sparsity, task loss vs direct matching."""
        from matplotlib.figure import Figure

        figure = Figure(figsize=(6.0, 4.5))
        axes = figure.add_subplot()
        for index, method in enumerate(dict.fromkeys(row["method"] for row in self.rows)):
            points = sorted((r["sparsity"], r["relative_accuracy"]) for r in self.rows if r["method"] == method)
            xs, ys = zip(*points, strict=True)
            axes.plot(xs, ys, "-o", color=f"C{index}", label=method, markersize=4)
        axes.set_xlabel(f"sparsity (share of |m_ij| < {self.threshold:g}, set to zero)")
        axes.set_ylabel("relative accuracy (stitched / model B)")
        axes.set_xlim(-0.02, 1.02)
        axes.legend(fontsize=9)
        axes.set_title(title or f"Sparse stitching at {self.layer}: L1 task loss vs L1 direct matching", fontsize=11)
        figure.tight_layout()
        if path is not None:
            write_figure(figure, path, dpi=100)
        return figure


def sparsity_sweep(
    model_a: nn.Module,
    model_b: nn.Module,
    layer: str,
    *,
    data: Any,
    eval_data: Any,
    l1: Sequence[float] = (0.0, 1.0, 3.0, 10.0, 30.0, 100.0),
    alphas: Sequence[float] = (0.0, 0.003, 0.01, 0.03, 0.1, 0.3),
    layer_b: str | None = None,
    task_loss: Mapping[str, Any] | None = None,
    direct_data: Any = None,
    threshold: float = SPARSITY_THRESHOLD,
    batch_size: int = 256,
    progress: Any = True,
) -> SparsityResult:
    """Relative accuracy against sparsity of the stitching matrix (the paper's Experiment 7, Figure 8).

    Task loss: ``fit_task_loss(..., l1=value, **task_loss)`` for every ``l1`` (penalty ``l1 * mean|W|``, from
    the least-squares initialisation unless ``task_loss`` sets ``init``). Direct: ``SparseLasso(alpha)`` on
    ``direct_data`` (default ``data``) for every ``alpha`` (scikit-learn's per-sample units; 0 is least squares).
    Each matrix then has its entries below ``threshold`` set to zero (the paper's 1e-4), its sparsity is the share
    of zeros, and the stitched network with the thresholded layer is measured on ``eval_data``.
    """
    layer_b = layer if layer_b is None else layer_b
    threshold = check_nonnegative(threshold, "threshold")
    direct_data = data if direct_data is None else direct_data
    options = dict(task_loss or {})
    options.setdefault("progress", progress)
    result = SparsityResult(layer, threshold)
    least_squares = None
    for alpha in alphas:
        estimator = fit_direct(
            SparseLasso(alpha=alpha), model_a, model_b, layer, layer_b, direct_data, batch_size=batch_size
        )
        if alpha == 0:
            least_squares = estimator
        _add_sparse(result, "direct (Lasso)", alpha, stitch(model_a, model_b, layer, layer_b, estimator), eval_data)
    for value in l1:
        stitched = stitch(model_a, model_b, layer, layer_b)
        run_options = dict(options)
        if "init" not in run_options and least_squares is not None:
            run_options["init"] = least_squares
        fit_task_loss(stitched, data, l1=value, **run_options)
        _add_sparse(result, "task loss (L1)", value, stitched, eval_data)
    return result


def _add_sparse(result: SparsityResult, method: str, penalty: float, stitched: Any, eval_data: Any) -> None:
    layer, sparsity = sparsify_layer(stitched.stitching_layer, result.threshold)
    stitched.initialize(layer)
    metrics = stitch_metrics(stitched, eval_data)
    result.matrices[method, penalty] = affine_map(layer)[0].detach().cpu().numpy()
    result.rows.append({"method": method, "penalty": float(penalty), "sparsity": sparsity, **metrics})
