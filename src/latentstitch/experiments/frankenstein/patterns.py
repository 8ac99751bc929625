"""The paper's twelve patterns, declared once: the claim, the paper's evidence, what our number is and the rule that
decides. ``measure(numbers, config)`` computes our number for each from the run's JSON numbers."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from latentstitch.experiments._report import Pattern, above, at_least, at_most, below
from latentstitch.experiments.frankenstein import (
    exp6_mode_connectivity,
    fig2_layers,
    fig3_width,
    fig4_similarity_trace,
    fig6_init,
    fig8_sparsity,
)
from latentstitch.experiments.frankenstein.config import Config

NEAR_PERFECT = 0.95  # "near 100% relative accuracy"
MODE_DIP = 0.95  # a path is connected when its minimum stays within 5% of its lower endpoint


def patterns(config: Config) -> list[Pattern]:
    """The patterns of a run with ``config`` (Experiment 6 has one per layer it looks at)."""
    declared = [
        Pattern(
            "fig2-task-loss-near-perfect",
            "Fig. 2: task loss reaches near 100% relative accuracy on most layers",
            "near 100% on Tiny-10 (CIFAR-10), no collapse",
            f"share of layers with task loss >= {NEAR_PERFECT:g}",
            above(0.5),
        ),
        Pattern(
            "fig2-task-loss-beats-ls",
            "Fig. 2: task loss >= least squares on every layer",
            "task loss above least squares everywhere",
            "smallest (task loss - least squares) over layers",
            at_least(0.0),
            headline=True,
        ),
        Pattern(
            "fig2-procrustes-as-ls",
            "Sec. 5.1: Procrustes as good as least squares on the later layers",
            "same accuracy on later layers",
            "largest |Procrustes - LS| on the last 3 layers",
            at_most(0.05),
        ),
        Pattern(
            "fig4-r2-falls",
            "Fig. 4: R^2 falls along task-loss training from least squares",
            "decreasing",
            "largest R^2 change (end - start) over runs",
            below(0.0),
        ),
        Pattern(
            "fig4-cka-falls",
            "Fig. 4: CKA falls while the cross-entropy to B falls",
            "decreasing, large variance",
            "mean CKA change (end - start) over runs",
            below(0.0),
        ),
        Pattern(
            "fig5-low-cka-high-accuracy",
            "Fig. 5: a CKA penalty drives CKA below 0.7 at unchanged accuracy",
            "CKA < 0.7, accuracy essentially unchanged",
            "final CKA (with relative accuracy >= 0.95)",
            below(0.7),
        ),
        Pattern(
            "fig7-bottleneck-beats-svd",
            "Fig. 7: a trained bottleneck beats SVD at every rank",
            "task loss above SVD at ranks 4, 8, 16",
            "smallest (bottleneck - SVD) over layers and ranks",
            above(0.0),
        ),
        Pattern(
            "fig8-sparse-task-loss-wins",
            "Fig. 8: at 80% sparsity task loss keeps more accuracy than direct",
            "direct drops drastically at 80-90%, task loss holds",
            "task loss - direct at 80% sparsity",
            above(0.0),
        ),
        Pattern(
            "exp5-ls-init-stable",
            "Exp. 5: least-squares init more stable than random",
            "LS init consistently well, random sometimes stuck",
            "share of layers with LS spread <= random's and LS worst run >= random's",
            at_least(1.0),
            headline=True,
        ),
    ]
    for layer in config.init_layers:
        if exp6_mode_connectivity.is_early(layer):
            declared.append(
                Pattern(
                    f"exp6-{layer}",
                    f"Exp. 6 at {layer}: no linear mode connectivity (first layers)",
                    "lacking on the first three layers",
                    "worst path minimum / endpoint",
                    below(MODE_DIP),
                )
            )
        else:
            declared.append(
                Pattern(
                    f"exp6-{layer}",
                    f"Exp. 6 at {layer}: linear mode connectivity holds",
                    "holds on most layers",
                    "worst path minimum / endpoint",
                    at_least(MODE_DIP),
                )
            )
    declared.append(
        Pattern(
            "fig3-width-helps",
            "Fig. 3: relative accuracy grows with width",
            "increasing with width",
            "smallest step of the mean over layers between widths",
            at_least(0.0),
        )
    )
    return declared


def measure(numbers: dict[str, Any], config: Config) -> dict[str, Any]:
    """Our value (and a detail line) for every pattern key, from the run's numbers."""
    return {
        **_measure_layers(numbers, config),
        **_measure_traces(numbers, config),
        **_measure_rank_sparsity(numbers),
        **_measure_init_width(numbers, config),
    }


def _measure_layers(numbers: dict[str, Any], config: Config) -> dict[str, Any]:
    """Figure 2: task loss near perfect and above least squares; Procrustes as least squares."""
    figure2 = numbers["figure2"]
    layers = list(config.layers)
    task = {x: fig2_layers.over_pairs(figure2, x, "task loss")[0] for x in layers}
    ls = {x: fig2_layers.over_pairs(figure2, x, "least squares")[0] for x in layers}
    procrustes = {x: fig2_layers.over_pairs(figure2, x, "Procrustes")[0] for x in layers}
    ce_task = {x: fig2_layers.over_pairs(figure2, x, "task loss", "cross_entropy")[0] for x in layers}
    ce_ls = {x: fig2_layers.over_pairs(figure2, x, "least squares", "cross_entropy")[0] for x in layers}
    near = [x for x in layers if task[x] >= NEAR_PERFECT]
    gains = {x: task[x] - ls[x] for x in layers}
    worst = min(gains, key=gains.get)
    later = layers[-3:]
    out: dict[str, Any] = {
        "fig2-task-loss-near-perfect": (
            len(near) / len(layers),
            f"{len(near)}/{len(layers)} layers; " + ", ".join(f"{x} {task[x]:.3f}" for x in layers),
        ),
        "fig2-task-loss-beats-ls": (
            gains[worst],
            f"smallest at {worst}: {task[worst]:.3f} vs {ls[worst]:.3f} (cross-entropy to B {ce_task[worst]:.3f} vs "
            f"{ce_ls[worst]:.3f})",
        ),
        "fig2-procrustes-as-ls": (
            max(abs(procrustes[x] - ls[x]) for x in later),
            ", ".join(f"{x}: Procrustes {procrustes[x]:.3f}, LS {ls[x]:.3f}" for x in later),
        ),
    }
    return out


def _measure_traces(numbers: dict[str, Any], config: Config) -> dict[str, Any]:
    """Figures 4 and 5: R^2 and CKA fall along task-loss training; low CKA with high accuracy."""
    out: dict[str, Any] = {}
    traces = numbers["experiment5"][config.trace_layer]["traces"]
    r2_changes = [t[-1]["r2"] - t[0]["r2"] for t in traces]
    cka_changes = [t[-1]["cka"] - t[0]["cka"] for t in traces]
    start, end = fig4_similarity_trace.endpoints(traces)
    out["fig4-r2-falls"] = (max(r2_changes), ", ".join(f"{t[0]['r2']:.3f} -> {t[-1]['r2']:.3f}" for t in traces))
    out["fig4-cka-falls"] = (
        float(np.mean(cka_changes)),
        f"CKA {start['cka'][0]:.3f} -> {end['cka'][0]:.3f} (spread over runs at the end {end['cka'][1]:.4f}); "
        "cross-entropy to B "
        + ", ".join(f"{t[0]['cross_entropy']:.3f} -> {t[-1]['cross_entropy']:.3f}" for t in traces),
    )
    figure5 = numbers["figure5"]
    kept = figure5["after"]["relative_accuracy"]
    cka_final = figure5["trace"][-1]["cka"]
    out["fig5-low-cka-high-accuracy"] = (
        cka_final if kept >= NEAR_PERFECT else None,
        f"CKA {figure5['trace'][0]['cka']:.3f} -> {cka_final:.3f}, relative accuracy "
        f"{figure5['before']['relative_accuracy']:.3f} -> {kept:.3f}",
    )
    return out


def _measure_rank_sparsity(numbers: dict[str, Any]) -> dict[str, Any]:
    """Figures 7 and 8: a trained bottleneck beats SVD; sparse task-loss matching beats Lasso."""
    out: dict[str, Any] = {}
    rank_rows = numbers["figure7"]
    out["fig7-bottleneck-beats-svd"] = (
        min(r["task"] - r["svd"] for r in rank_rows),
        "; ".join(f"{r['layer']} rank {r['rank']}: SVD {r['svd']:.3f}, bottleneck {r['task']:.3f}" for r in rank_rows),
    )
    at = fig8_sparsity.at_sparsity(numbers["figure8"], 0.8)
    task_sparse, direct_sparse = at["task loss (L1)"], at["direct (Lasso)"]
    if task_sparse is None or direct_sparse is None:
        reached = {m: max(r["sparsity"] for r in numbers["figure8"] if r["method"] == m) for m in at}
        out["fig8-sparse-task-loss-wins"] = (
            None,
            "a curve does not reach 80% sparsity: " + ", ".join(f"{m} max {v:.2f}" for m, v in reached.items()),
        )
    else:
        out["fig8-sparse-task-loss-wins"] = (
            task_sparse - direct_sparse,
            f"at 80% sparsity: task loss {task_sparse:.3f}, direct {direct_sparse:.3f}",
        )
    return out


def _measure_init_width(numbers: dict[str, Any], config: Config) -> dict[str, Any]:
    """Experiments 5 and 6 (initialisation, mode connectivity) and Figure 3 (width)."""
    out: dict[str, Any] = {"exp5-ls-init-stable": fig6_init.stability(numbers["experiment5"])}
    for layer, entry in numbers["experiment6"].items():
        dip = exp6_mode_connectivity.worst_dip(entry)
        detail = (
            f"{len(entry['paths'])} pairs of {entry['kept']}/{entry['runs']} runs >= {config.mode_threshold:g}"
            if entry["paths"]
            else f"fewer than two of {entry['runs']} random-init runs reach {config.mode_threshold:g} ({entry['kept']})"
        )
        out[f"exp6-{layer}"] = (dip, detail)
    width_means = fig3_width.means(numbers["experiment2"], config)
    steps = [b - a for a, b in itertools.pairwise(width_means)]
    out["fig3-width-helps"] = (
        min(steps),
        ", ".join(f"x{w / config.widths[0]:g} {m:.3f}" for w, m in zip(config.widths, width_means, strict=True)),
    )
    return out
