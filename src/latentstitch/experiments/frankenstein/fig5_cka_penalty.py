"""Experiment 4 / Figure 5: a network stitched to itself from the identity, trained with cross-entropy plus a CKA
penalty: CKA at the stitching point drops while accuracy holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from latentstitch.experiments._report import ResultTable
from latentstitch.experiments.frankenstein.context import Context, new_figure, save
from latentstitch.stitching import fit_task_loss, stitch


def measure(context: Context, weight: float | None = None) -> dict[str, Any]:
    """The self-stitched network trained with the CKA penalty ``weight`` (default: the config's ``cka_penalty``)."""
    config = context.config
    weight = config.cka_penalty if weight is None else weight
    model = context.model(config.width, config.seeds[0])
    layer = config.cka_layer
    context.stage(f"Experiment 4: self-stitch at {layer} with a CKA penalty of {weight:g}")
    stitched = stitch(model, model, layer, layer, "identity", example=context.x_test[:2])
    before = context.metrics(stitched)
    outcome = fit_task_loss(
        stitched,
        context.stitch_data,
        **context.task_loss(cka_penalty=weight, track_every=config.track_every, probe=context.probe, seed=0),
    )
    return {
        "before": before,
        "after": context.metrics(stitched),
        "trace": outcome.trace,
        "layer": layer,
        "weight": weight,
    }


def measure_sweep(context: Context) -> list[dict[str, Any]]:
    """Experiment 4 at every weight of ``cka_penalty_sweep`` other than the main one (the paper does not state its
    weight, so a sweep shows whether the plateau is a setting): end CKA, relative accuracy, and the CKA a quarter
    of the way through (a plateau reached early is not a budget effect). Each weight is a stage of its own in the
    run's checkpoint (a full training at the paper's budget), so an interrupted run resumes at the weight it stopped
    in; every run is seeded, so the numbers are those of one uninterrupted sweep."""
    weights = [w for w in context.config.cka_penalty_sweep if w != context.config.cka_penalty]
    return [
        context.checkpoint.numbers(f"figure5_sweep_weight{weight:g}", lambda w=weight: sweep_row(measure(context, w)))
        for weight in weights
    ]


def sweep_row(numbers: dict[str, Any]) -> dict[str, Any]:
    """One run of Experiment 4 (``measure``) as a row of the sweep."""
    trace = numbers["trace"]
    return {
        "weight": numbers.get("weight"),
        "cka_start": trace[0]["cka"],
        "cka_quarter": trace[len(trace) // 4]["cka"],
        "cka_end": trace[-1]["cka"],
        "relative_accuracy": numbers["after"]["relative_accuracy"],
    }


def sweep_rows(main: dict[str, Any], sweep: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sweep's rows and the main run's (``sweep_row``), by weight."""
    return sorted([sweep_row(main), *sweep], key=lambda r: (r["weight"] is None, r["weight"] or 0.0))


def sweep_table(main: dict[str, Any], sweep: list[dict[str, Any]]) -> ResultTable:
    """One row per CKA-penalty weight, the main run's among them (a sweep, not a tuned point)."""
    rows = sweep_rows(main, sweep)
    return ResultTable(
        f"Experiment 4: sweep of the CKA-penalty weight at {main['layer']} (the paper does not state its weight)",
        ["weight per batch", "CKA at init", "CKA after 1/4 of the steps", "CKA at the end", "relative accuracy"],
        [[r["weight"], r["cka_start"], r["cka_quarter"], r["cka_end"], r["relative_accuracy"]] for r in rows],
        note="the main run (the figure and the pattern) uses the weight fixed before the run; the others are a sweep",
    )


def table(numbers: dict[str, Any]) -> ResultTable:
    trace = numbers["trace"]
    return ResultTable(
        f"Experiment 4 / Figure 5: self-stitched at {numbers['layer']}, CKA penalised",
        ["quantity", "identity init", "after training", "paper (ResNet layer 2.0)"],
        [
            ["CKA(stitched, own activation)", trace[0]["cka"], trace[-1]["cka"], "drops below 0.7"],
            [
                "relative accuracy",
                numbers["before"]["relative_accuracy"],
                numbers["after"]["relative_accuracy"],
                "essentially unchanged",
            ],
            ["agreement with the network itself", numbers["before"]["agreement"], numbers["after"]["agreement"], None],
        ],
    )


def plot(numbers: dict[str, Any], path: Path) -> str:
    figure, (ax,) = new_figure(7, 4.2)
    trace = numbers["trace"]
    steps = [r["step"] for r in trace]
    ax.plot(steps, [r["cka"] for r in trace], "-o", color="C0", markersize=3, label="CKA(stitched, own)")
    ax.plot(
        steps,
        [r["agreement"] for r in trace],
        "-s",
        color="C1",
        markersize=3,
        label="agreement with the network itself",
    )
    ax.set_xlabel("optimiser step (cross-entropy + CKA penalty)")
    ax.set_ylabel("CKA / agreement (probe images)")
    ax.set_ylim(0, 1.05)
    other = ax.twinx()
    other.plot(steps, [r["cross_entropy"] for r in trace], "--", color="C2", label="cross-entropy to itself")
    other.set_ylabel("cross-entropy to the network itself (dashed)")
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = other.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, fontsize=8, loc="center right")
    ax.set_title(f"Fig. 5: Tiny-10 stitched to itself at {numbers['layer']}, CKA penalised", fontsize=11)
    return save(figure, path)


def plot_sweep(main: dict[str, Any], sweep: list[dict[str, Any]], path: Path) -> str:
    """The sweep of the CKA-penalty weight as a trade-off: CKA at the end against relative accuracy, one point per
    weight (the main run's marked), with the paper's claim (CKA < 0.7 at essentially unchanged accuracy) shaded."""
    figure, (ax,) = new_figure(6, 4.4)
    rows = sweep_rows(main, sweep)
    accuracy = [r["relative_accuracy"] for r in rows]
    bottom, top = min(0.9, min(accuracy) - 0.02), 1.01
    ax.fill_between([0.0, 0.7], 0.95, top, color="0.88", zorder=0, label="paper: CKA < 0.7, accuracy kept")
    ax.plot([r["cka_end"] for r in rows], accuracy, "-o", color="C0", label="one training per weight")
    for r in rows:
        label = f"weight {r['weight']:g}" + (" (main run)" if r["weight"] == main.get("weight") else "")
        ax.annotate(
            label, (r["cka_end"], r["relative_accuracy"]), textcoords="offset points", xytext=(6, -10), fontsize=8
        )
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(bottom, top)
    ax.set_xlabel("CKA(stitched, own) at the end of training")
    ax.set_ylabel("relative accuracy")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"Experiment 4 at {main['layer']}: sweep of the CKA-penalty weight", fontsize=11)
    return save(figure, path)
