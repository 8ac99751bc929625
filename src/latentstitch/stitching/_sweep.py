"""Stitching every layer with several matching methods (the paper's Figure 2).

A *method* is a direct-matching estimator of ``latentstitch.stitching`` (fitted on activations, then evaluated in
the stitched network) or a ``TaskLoss`` (``fit_task_loss`` with its options). Results are tables of the metrics of
``stitch_metrics`` per (layer, method), with plots. The sparsity sweep (Figure 8): ``latentstitch.stitching._sparsity``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import clone
from torch import nn

from latentstitch._core.figures import write_figure
from latentstitch._core.params import check_seed
from latentstitch.distributed import map_tasks
from latentstitch.stitching._direct import fit_direct
from latentstitch.stitching._hooks import resolve_layer
from latentstitch.stitching._methods import TaskLoss, as_methods
from latentstitch.stitching._metrics import stitch_metrics
from latentstitch.stitching._model import stitch
from latentstitch.stitching._nulls import NULLS, stitch_nulls
from latentstitch.stitching._task_loss import fit_task_loss


@dataclass
class SweepResult:
    """Metrics of every (layer, method) of a ``sweep``.

    ``rows``: one dict per (layer, method): ``layer``, ``layer_b``, ``method``, ``seconds`` and the metrics of
    ``stitch_metrics`` (``relative_accuracy``, ``accuracy``, ``accuracy_b``, ``agreement``, ``cross_entropy``).
    ``stitching_layers[(layer, method)]``: the stitching layer each produced; ``traces[(layer, method)]``: the
    similarity trace of task-loss runs with ``track_every``. With ``sweep(..., nulls=...)`` every row also holds the
    same metrics of the same stitch fitted from null senders, prefixed ``shuffled_`` and ``noise_``
    (``to_markdown("shuffled_relative_accuracy")``; see ``stitch_nulls``).
    """

    layers: list[str]
    methods: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    stitching_layers: dict[tuple[str, str], nn.Module] = field(default_factory=dict)
    traces: dict[tuple[str, str], list[dict[str, float]]] = field(default_factory=dict)

    def value(self, layer: str, method: str, metric: str = "relative_accuracy") -> float:
        for row in self.rows:
            if row["layer"] == layer and row["method"] == method:
                return row[metric]
        raise KeyError(f"no result for layer {layer!r} and method {method!r}")

    def to_markdown(self, metric: str = "relative_accuracy", digits: int = 3) -> str:
        """A layers x methods table of ``metric``."""
        lines = ["| layer | " + " | ".join(self.methods) + " |", "|---|" + "---|" * len(self.methods)]
        for layer in self.layers:
            cells = [f"{self.value(layer, method, metric):.{digits}f}" for method in self.methods]
            lines.append(f"| {layer} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def plot(self, path: str | Path | None = None, **options: Any):
        """``plot_sweep([self], path, ...)``."""
        return plot_sweep([self], path, **options)


def sweep(
    model_a: nn.Module,
    model_b: nn.Module,
    layers: Sequence[str],
    methods: Sequence[str] | Mapping[str, Any] = ("least_squares", "task_loss"),
    *,
    data: Any,
    eval_data: Any,
    layers_b: Sequence[str] | None = None,
    direct_data: Any = None,
    batch_size: int = 256,
    progress: Any = True,
    client: Any = None,
    workers: int | None = None,
    nulls: bool | Sequence[str] = False,
    null_seed: int = 0,
) -> SweepResult:
    """Stitch ``model_a`` into ``model_b`` at every layer with every method and measure the stitched networks.

    Parameters
    ----------
    layers : sequence of str
        Layer names of ``model_a`` (and of ``model_b`` unless ``layers_b`` pairs them differently).
    methods : names or {label: method}
        Names: ``"least_squares"``, ``"procrustes"``, ``"task_loss"``. A mapping gives any estimator of
        ``latentstitch.stitching`` (``ReducedRank(8)``, ``SparseLasso(0.01)``...; cloned, fitted on
        ``direct_data`` with ``fit_direct``) or a ``TaskLoss(**fit_task_loss_options)`` per label.
    data : training data of task-loss methods (see ``latentstitch.stitching`` for its forms).
    eval_data : labelled data the stitched networks are measured on (``stitch_metrics``).
    direct_data : data for direct matching (default ``data``).
    client, workers : run each layer (all its methods) as a task on a ``dask.distributed`` cluster
        (``latentstitch.distributed.get_client``: a ``Client``, a scheduler address, or ``workers`` local worker
        processes). The models and data travel to the workers; results equal the in-process sweep's.
    nulls : True (both), or some of ``("shuffled", "noise")``: also fit every stitch from a null sender (A's
        activations of permuted inputs; Gaussian noise with their mean and covariance) and report its metrics in the
        same row (``shuffled_relative_accuracy``...): what stitching reaches from nothing, the control a stitching
        accuracy needs (``stitch_nulls``; data must be in memory). Each null costs one more fit per method.
    null_seed : seeds the nulls' permutations and noise.

    Returns
    -------
    SweepResult
        ``to_markdown()`` and ``plot()`` give the paper's Figure 2 (relative accuracy per layer and method).
    """
    methods = as_methods(methods)
    null_seed = check_seed(null_seed, "null_seed")
    layers = [layers] if isinstance(layers, str) else list(layers)
    if not layers:
        raise ValueError("layers: expected at least one layer name")
    layers_b = list(layers) if layers_b is None else [layers_b] if isinstance(layers_b, str) else list(layers_b)
    if len(layers_b) != len(layers):
        raise ValueError(f"layers_b: expected {len(layers)} names, one per layer, got {len(layers_b)}")
    pairs = list(zip(layers, layers_b, strict=True))
    for layer_a, layer_b in pairs:
        resolve_layer(model_a, layer_a, "layers")
        resolve_layer(model_b, layer_b, "layers_b")
    direct_data = data if direct_data is None else direct_data
    null_names = NULLS if nulls is True else tuple(nulls or ())
    result = SweepResult(layers, list(methods))
    run_layer = functools.partial(
        _sweep_layer,
        model_a=model_a,
        model_b=model_b,
        methods=methods,
        data=data,
        eval_data=eval_data,
        direct_data=direct_data,
        batch_size=batch_size,
        nulls=null_names,
        null_seed=null_seed,
    )
    if client is None and workers is None:
        outcomes = [run_layer(pair, progress=progress) for pair in pairs]
    else:
        outcomes = map_tasks(
            functools.partial(run_layer, progress=False),
            pairs,
            client=client,
            workers=workers,
            progress=bool(progress),
            description=f"stitching sweep, {len(pairs)} layers",
        )
    for rows, traces, stitching_layers in outcomes:
        result.rows.extend(rows)
        result.traces.update(traces)
        result.stitching_layers.update(stitching_layers)
    return result


def _sweep_layer(
    pair: tuple[str, str],
    *,
    model_a: nn.Module,
    model_b: nn.Module,
    methods: dict[str, Any],
    data: Any,
    eval_data: Any,
    direct_data: Any,
    batch_size: int,
    progress: Any,
    nulls: tuple[str, ...] = (),
    null_seed: int = 0,
) -> tuple[list[dict], dict, dict]:
    """Every method at one layer pair: the rows, task-loss traces and stitching layers of ``sweep``."""
    layer_a, layer_b = pair
    rows: list[dict] = []
    traces: dict = {}
    stitching_layers: dict = {}
    fitted: dict[str, Any] = {}
    # direct methods first, so that task loss can start from this layer's least-squares fit
    order = sorted(methods, key=lambda name: isinstance(methods[name], TaskLoss))
    for name in order:
        method = methods[name]
        started = time.perf_counter()
        if isinstance(method, TaskLoss):
            options = dict(method.options)
            stitched = stitch(model_a, model_b, layer_a, layer_b)
            if "init" not in options and "least_squares" in fitted and options.get("rank") is None:
                options["init"] = fitted["least_squares"]
            options.setdefault("progress", progress)
            outcome = fit_task_loss(stitched, data, **options)
            if outcome.trace:
                traces[layer_a, name] = outcome.trace
        else:
            estimator = fit_direct(
                clone(method), model_a, model_b, layer_a, layer_b, direct_data, batch_size=batch_size
            )
            fitted[name] = estimator
            stitched = stitch(model_a, model_b, layer_a, layer_b, estimator)
        metrics = stitch_metrics(stitched, eval_data)
        stitching_layers[layer_a, name] = stitched.stitching_layer
        seconds = round(time.perf_counter() - started, 3)
        for null, null_metrics in (
            stitch_nulls(
                model_a,
                model_b,
                layer_a,
                layer_b,
                method,
                data=data,
                eval_data=eval_data,
                direct_data=direct_data,
                nulls=nulls,
                seed=null_seed,
                batch_size=batch_size,
            ).items()
            if nulls
            else ()
        ):
            metrics.update({f"{null}_{key}": value for key, value in null_metrics.items()})
        rows.append({"layer": layer_a, "layer_b": layer_b, "method": name, **metrics, "seconds": seconds})
    return rows, traces, stitching_layers


def plot_sweep(
    results: Sequence[SweepResult],
    path: str | Path | None = None,
    *,
    title: str = "Relative accuracy of stitched networks per layer",
    cross_entropy: bool = True,
):
    """The paper's Figure 2: relative accuracy (left axis, solid) and cross-entropy to model B (right axis, dashed)
    per layer and method; with several results (network pairs), the mean with a band of one standard deviation.

    Returns the matplotlib ``Figure``; written to ``path`` as PNG when given.
    """
    from matplotlib.figure import Figure

    first = results[0]
    layers, methods = first.layers, first.methods
    figure = Figure(figsize=(max(6.0, 0.8 * len(layers) + 3), 5.5))
    axes = figure.add_subplot()
    other = axes.twinx() if cross_entropy else None
    positions = np.arange(len(layers))
    for index, method in enumerate(methods):
        color = f"C{index}"
        for metric, ax, style in (("relative_accuracy", axes, "-o"), ("cross_entropy", other, "--s")):
            if ax is None:
                continue
            values = np.array([[r.value(layer, method, metric) for layer in layers] for r in results])
            mean, std = values.mean(0), values.std(0)
            label = method if metric == "relative_accuracy" else f"{method} (cross-entropy)"
            ax.plot(positions, mean, style, color=color, label=label, markersize=4)
            if len(results) > 1:
                ax.fill_between(positions, mean - std, mean + std, color=color, alpha=0.15)
    axes.set_xticks(positions, layers, rotation=45 if len(layers) > 6 else 0)
    axes.set_xlabel("stitching layer")
    axes.set_ylabel("relative accuracy (stitched / model B)")
    axes.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    handles, labels = axes.get_legend_handles_labels()
    if other is not None:
        other.set_ylabel("cross-entropy to model B (dashed)")
        more_handles, more_labels = other.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    axes.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(3, len(labels)))
    suffix = f" (mean ± std over {len(results)} pairs)" if len(results) > 1 else ""
    axes.set_title(title + suffix, fontsize=11)
    figure.tight_layout()
    if path is not None:
        write_figure(figure, path, dpi=100)
    return figure
