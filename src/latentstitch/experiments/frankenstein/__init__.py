"""Dr. Frankenstein (Csiszárik et al., NeurIPS 2021) on Fashion-MNIST: two Tiny-10 networks of the same
architecture trained from different seeds, stitched at every layer.

One module per figure of the paper (each measures, tabulates and draws its own part):

- ``fig2_layers``: Experiment 1 / Figure 2, least squares, Procrustes and task-loss matching at every layer;
- ``fig3_width``: Experiment 2 / Figure 3, networks of 1x, 2x and 4x width;
- ``fig4_similarity_trace``: Experiment 3 / Figure 4, CKA and R^2 along task-loss training;
- ``fig5_cka_penalty``: Experiment 4 / Figure 5, a network stitched to itself with a CKA penalty;
- ``fig6_init``: Experiment 5 / Figure 6, random vs least-squares initialisation;
- ``exp6_mode_connectivity``: Experiment 6, linear mode connectivity of random-init stitching matrices;
- ``fig7_low_rank``: Section 7 / Figure 7, rank-r matching by SVD vs a trained bottleneck;
- ``fig8_sparsity``: Experiment 7 / Figure 8, sparsity of L1 task-loss vs direct (Lasso) matching.

``config`` holds the full and quick settings, ``context`` the data and base networks, ``patterns`` the paper's
twelve patterns and how our numbers judge them. ``latentstitch reproduce frankenstein`` runs it on one CPU thread.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from latentstitch._core.params import check_device
from latentstitch.experiments._checkpoint import FOLDER as CHECKPOINT
from latentstitch.experiments._checkpoint import Checkpoint, console_log, run_settings
from latentstitch.experiments._report import Report, ResultTable, judge
from latentstitch.experiments._run import chosen
from latentstitch.experiments.frankenstein import (
    exp6_mode_connectivity,
    fig2_layers,
    fig3_width,
    fig4_similarity_trace,
    fig5_cka_penalty,
    fig6_init,
    fig7_low_rank,
    fig8_sparsity,
    patterns,
)
from latentstitch.experiments.frankenstein.config import FULL, QUICK, Config, channels, layer_channels
from latentstitch.experiments.frankenstein.context import Context

HELP = "stitch two Tiny-10s on Fashion-MNIST at every layer: least squares vs task loss, rank, sparsity, CKA, width"
PAPER = (
    "Csiszárik, Kőrösi-Szabó, Matszangosz, Papp, Varga. Similarity and Matching of Neural Network "
    "Representations. NeurIPS 2021 (Dr. Frankenstein)"
)

__all__ = ["FULL", "HELP", "PAPER", "QUICK", "Config", "render", "render_saved", "run"]


def run(
    *,
    quick: bool,
    out_dir: Path,
    progress: bool,
    resume: bool = False,
    config: Config | None = None,
    device: str = "cpu",
) -> Report:
    """Train the networks, run every experiment, draw the figures into ``out_dir``; return the report.

    Finished stages (base networks, each experiment) are kept in ``out_dir/checkpoint`` until the report is drawn;
    ``resume=True`` goes on from those of an interrupted run of the same settings (``reproduce --resume``).
    ``config`` (default ``QUICK`` if ``quick`` else ``FULL``) holds every setting; ``quick`` says what to report.
    ``device``: where the networks train and every stitching layer is fitted (a checkpoint setting: float sums in
    another order give slightly other numbers)."""
    from threadpoolctl import threadpool_limits

    # numpy's BLAS (direct matching) gets the same thread budget as torch: with more threads than free cores it
    # spin-waits, and a least-squares fit that takes 0.1 s alone took 10 s on the busy 2-core machine.
    with threadpool_limits(limits=torch.get_num_threads()):
        config = chosen(quick, config, QUICK, FULL)
        device = str(check_device(device, "device"))
        checkpoint = Checkpoint(
            Path(out_dir) / CHECKPOINT,
            run_settings("frankenstein", quick, config, device),
            resume=resume,
            log=console_log if progress else lambda text: None,
        )
        numbers = measure(config, progress, checkpoint, device)
        report = render(numbers, config, Path(out_dir), quick=quick, seconds=checkpoint.seconds())
        checkpoint.finish()
        return report


def measure(
    config: Config, progress: bool, checkpoint: Checkpoint | None = None, device: str = "cpu"
) -> dict[str, Any]:
    """Every experiment's numbers (plain JSON values), in the order the base networks are needed; each finished
    experiment kept in ``checkpoint`` (if given) and taken from it when it is there already."""
    checkpoint = checkpoint if checkpoint is not None else Checkpoint(None, {}, resume=False)

    stages = 2 + 2 + len(config.cka_penalty_sweep) + len(config.init_layers) * (2 * config.init_runs + 1) + 1 + 1
    stages += len(config.rank_layers) * len(config.ranks) + len(config.widths) - 1 + 2 * (len(config.widths) - 1)
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    from latentstitch._core.progress import new_progress

    with new_progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), disable=not progress) as bar:
        task = bar.add_task("frankenstein", total=stages)

        def stage(description: str) -> None:
            bar.update(task, advance=1, description=f"frankenstein: {description}")
            if not progress:
                return
            bar.console.log(description)

        context = Context(config, stage, checkpoint, device)
        figure2 = checkpoint.numbers("figure2", lambda: fig2_layers.measure(context))

        def experiment5() -> dict[str, Any]:
            runs, layers = fig6_init.measure(context)
            checkpoint.tensors("experiment5_random_layers", lambda: fig6_init.layer_tensors(layers))
            return runs

        experiment5 = checkpoint.numbers("experiment5", experiment5)

        def experiment6() -> dict[str, Any]:
            tensors = checkpoint.kept_tensors("experiment5_random_layers")
            layers = fig6_init.layers_from_tensors(context, tensors)
            return exp6_mode_connectivity.measure(context, experiment5, layers)

        experiment6 = checkpoint.numbers("experiment6", experiment6)
        figure5 = checkpoint.numbers("figure5", lambda: fig5_cka_penalty.measure(context))
        figure5_sweep = checkpoint.numbers("figure5_sweep", lambda: fig5_cka_penalty.measure_sweep(context))
        figure7 = checkpoint.numbers("figure7", lambda: fig7_low_rank.measure(context))
        figure8 = checkpoint.numbers("figure8", lambda: fig8_sparsity.measure(context))
        experiment2 = checkpoint.numbers("experiment2", lambda: fig3_width.measure(context, figure2))
        for width, seed in [(w, s) for w in config.widths for s in config.seeds]:
            context.model(width, seed)  # every base network's accuracy for the table (from the checkpoint if resumed)
        bar.update(task, completed=stages, description="frankenstein: done")
    return {
        "config": asdict(config),
        "device": device,
        "threads": torch.get_num_threads(),
        "base_accuracy": [
            {"width": w, "seed": s, "accuracy": a} for (w, s), a in sorted(context.base_accuracy.items())
        ],
        "figure2": figure2,
        "experiment5": experiment5,
        "experiment6": experiment6,
        "figure5": figure5,
        "figure5_sweep": figure5_sweep,
        "figure7": figure7,
        "figure8": figure8,
        "experiment2": experiment2,
    }


def render(numbers: dict[str, Any], config: Config, out_dir: Path, *, quick: bool, seconds: float | None) -> Report:
    """The report (tables, verdicts, figures drawn into ``out_dir``) from a run's numbers."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = draw(numbers, config, out_dir)
    return Report(
        name="frankenstein",
        title="Dr. Frankenstein on Fashion-MNIST: stitching two Tiny-10 networks",
        paper=PAPER,
        setting=setting(numbers, config),
        differences=differences(config, quick),
        tables=tables(numbers, config),
        patterns=judge(patterns.patterns(config), patterns.measure(numbers, config), quick=quick),
        figures=figures,
        numbers=numbers,
        seconds=seconds,
        quick=quick,
    )


def draw(numbers: dict[str, Any], config: Config, out_dir: Path) -> dict[str, str]:
    """Every figure, in ``out_dir``: caption -> path."""
    traces = numbers["experiment5"][config.trace_layer]["traces"]
    return {
        "Figure 2: relative accuracy and cross-entropy per layer": fig2_layers.plot(
            numbers["figure2"], out_dir / "fig2_layers.png"
        ),
        "Figure 4: CKA, R^2 and cross-entropy along task-loss training": fig4_similarity_trace.plot(
            traces, config.trace_layer, out_dir / "fig4_similarity_trace.png"
        ),
        "Figure 5: CKA penalised, accuracy kept": fig5_cka_penalty.plot(
            numbers["figure5"], out_dir / "fig5_low_cka.png"
        ),
        **(
            {
                "Experiment 4: sweep of the CKA-penalty weight": fig5_cka_penalty.plot_sweep(
                    numbers["figure5"], numbers["figure5_sweep"], out_dir / "fig5_sweep.png"
                )
            }
            if numbers.get("figure5_sweep")
            else {}
        ),
        "Figure 6: relative accuracy by initialisation": fig6_init.plot(
            numbers["experiment5"], out_dir / "fig6_init.png"
        ),
        "Experiment 6: linear mode connectivity": exp6_mode_connectivity.plot(
            numbers["experiment6"], out_dir / "exp6_mode_connectivity.png"
        ),
        "Figure 7: low rank, SVD vs trained bottleneck": fig7_low_rank.plot(
            numbers["figure7"], out_dir / "fig7_low_rank.png"
        ),
        "Figure 8: relative accuracy vs sparsity": fig8_sparsity.plot(
            numbers["figure8"], config.sparsity_layer, out_dir / "fig8_sparsity.png"
        ),
        "Figure 3: relative accuracy vs width": fig3_width.plot(
            numbers["experiment2"], config, out_dir / "fig3_width.png"
        ),
    }


def tables(numbers: dict[str, Any], config: Config) -> list[ResultTable]:
    """The base networks' accuracy, then each figure's tables."""
    traces = numbers["experiment5"][config.trace_layer]["traces"]
    return [
        ResultTable(
            "Base networks: test accuracy",
            ["network", "seed", "accuracy", "paper"],
            [
                [f"x{b['width'] / config.widths[0]:g} (width {b['width']:g})", b["seed"], b["accuracy"], None]
                for b in numbers["base_accuracy"]
            ],
            note="the paper reports no base accuracy in its text (Tiny-10 on CIFAR-10)",
        ),
        fig2_layers.table(numbers["figure2"]),
        fig2_layers.baselines_table(numbers["figure2"]),
        fig4_similarity_trace.table(traces, config.trace_layer),
        fig5_cka_penalty.table(numbers["figure5"]),
        *(
            [fig5_cka_penalty.sweep_table(numbers["figure5"], numbers["figure5_sweep"])]
            if "figure5_sweep" in numbers
            else []
        ),
        fig7_low_rank.table(numbers["figure7"]),
        fig8_sparsity.table(numbers["figure8"], config.sparsity_layer),
        fig6_init.table(numbers["experiment5"]),
        exp6_mode_connectivity.table(numbers["experiment6"], config.lambdas),
        fig3_width.table(numbers["experiment2"], config),
    ]


def setting(numbers: dict[str, Any], config: Config) -> dict[str, Any]:
    main_accuracy = ", ".join(f"{b['accuracy']:.3f}" for b in numbers["base_accuracy"] if b["width"] == config.width)
    return {
        "data": f"Fashion-MNIST (Debian dataset-fashion-mnist, official split): {config.n_train} stratified "
        f"training images, {config.n_test} test images",
        "networks": f"Tiny-10 at width x{config.width:g} of the paper's (channels "
        f"{', '.join(str(c) for c in channels(config.width))}), seeds {config.seeds[0]} and {config.seeds[1]}, "
        f"Adam 1e-3, batch {config.base_batch}, {config.base_epochs} epochs; test accuracy {main_accuracy}",
        "stitching": "after each batch norm (bn1..bn8, as the reference code), 1x1 convolution; direct matching "
        f"on {config.n_direct} training images (every spatial position a sample); task loss: soft labels from "
        f"model B, Adam 1e-3, lr x0.1 after 1/3 and 2/3 of the steps, batch {config.stitch_batch}, on "
        f"{config.n_stitch} images, least-squares init; both networks frozen",
        "optimisation budget": _budget(config) + " (paper: 30 epochs of 50,000 images at batch 128, ~11,700 steps, "
        "everywhere)",
        "evaluation": f"relative accuracy = accuracy(stitched) / accuracy(model B) on {config.n_test} test images",
        "pairs": f"seed {config.seeds[0]} -> {config.seeds[1]} and back (Figure 2); {config.seeds[0]} -> "
        f"{config.seeds[1]} elsewhere",
        "threads": numbers.get("threads", torch.get_num_threads()),
        "device": numbers.get("device", "cpu"),
    }


def _budget(config: Config) -> str:
    """The task-loss budget per stitching layer, in words."""
    long = f"{config.stitch_epochs} epochs = {config.steps(config.stitch_epochs):,} Adam steps per stitching layer"
    if config.sweep_epochs == config.stitch_epochs:
        return f"{long} in every figure and experiment"
    return (
        f"{long} in Figures 4-5 and Experiments 5-6 at {', '.join(config.long_layers)}; {config.sweep_epochs} epochs "
        f"= {config.steps(config.sweep_epochs):,} steps in Figures 2, 3, 7, 8 and Experiments 5-6 at the other layers"
    )


def differences(config: Config, quick: bool) -> list[str]:
    x1 = config.widths[0]
    full_rank = [
        f"{layer} ({layer_channels(config, layer)} channels)"
        for layer in config.rank_layers
        if max(config.ranks) >= layer_channels(config, layer)
    ]
    rank_note = f"; rank {max(config.ranks)} is full rank at " + ", ".join(full_rank) if full_rank else ""
    quick_note = [
        "--quick: a miniature (networks trained on 6,000 images, 3 layers, 64 Adam steps per stitching layer) that "
        "judges the headline patterns only"
    ]
    return [
        *(quick_note if quick else []),
        "Fashion-MNIST (28x28 grey) instead of CIFAR-10; subsets of the official split "
        f"({config.n_train} training / {config.n_test} test images)",
        f"Tiny-10 at x{config.width:g} of the paper's width; base networks trained with Adam 1e-3 for "
        f"{config.base_epochs} epochs at batch {config.base_batch} (paper: SGD 0.1 Nesterov, weight decay 1e-4, "
        "110k iterations)",
        f"2 seeds, i.e. 2 directed pairs for Figure 2 and 1 elsewhere (paper: 10 runs); Experiment 5 with "
        f"{config.init_runs} random + {config.init_runs} least-squares runs per layer (paper: 50 + 50); Figure 4 "
        f"from {config.init_runs} runs (paper: 10) that differ only in data order (one pair, one least-squares init)",
        budget_difference(config),
        f"direct matching fitted on {config.n_direct} images (paper: the whole training set)",
        "cross-entropy to model B is mean_n sum_c -p_B log p_F; the reference code also averaged over the 10 "
        "classes, so its values may be 10x smaller on the same networks",
        "R^2 in Figure 4 is 1 - ||S(a) - b||^2 / ||b - mean b||^2 over per-position rows (the least-squares "
        "objective, largest at the least-squares init); CKA is linear CKA over one flattened row per sample, as "
        "the reference code",
        f"Figure 5 on Tiny-10 {config.cka_layer} (paper: layer 2.0 of a 3x-wide ResNet), CKA penalty weight "
        f"{config.cka_penalty:g} per batch of {config.stitch_batch} (the paper does not state its weight)",
        f"Figure 7 bottleneck from the reference code's random orthogonal init{rank_note}",
        f"Figure 8 at {config.sparsity_layer}, L1 strengths and Lasso alphas chosen to span sparsity 0..1 "
        "(paper: values not stated)",
        f"Experiment 2 on Tiny-10 (paper: ResNet-20) with x1 = {x1:g}, "
        + ", ".join(f"x{w / x1:g} = {w:g}" for w in config.widths[1:])
        + f" of the paper's Tiny-10 width; {len(config.width_layers)} layers, 1 pair",
        "Experiment 6 interpolates the random-init runs of Experiment 5 (paper: separate runs)",
    ]


def render_saved(results_json: str | Path, out_dir: str | Path | None = None) -> Report:
    """The report of a saved run (its results.json), drawn again: a change of tables, figures or pattern
    declarations applies to a run of hours without repeating it. ``out_dir`` defaults to the file's folder."""
    import json

    saved = json.loads(Path(results_json).read_text())
    numbers = saved["numbers"]
    if "threads" not in numbers and isinstance(saved.get("setting"), dict) and "threads" in saved["setting"]:
        numbers["threads"] = saved["setting"]["threads"]  # a run saved before the numbers kept their thread count
    config = Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in numbers["config"].items()})
    target = Path(out_dir) if out_dir is not None else Path(results_json).parent
    return render(numbers, config, target, quick=bool(saved.get("quick")), seconds=saved.get("seconds"))


def budget_difference(config: Config) -> str:
    """How the run's task-loss budget compares with the paper's ~11,700 Adam steps per stitching layer."""
    long = f"{config.steps(config.stitch_epochs):,}"
    lr = "; the lr steps happen after 1/3 and 2/3 of the steps rather than at epoch boundaries"
    if config.sweep_epochs == config.stitch_epochs:
        return f"task-loss budget: {long} Adam steps per stitching layer everywhere (paper: ~11,700){lr}"
    return (
        f"task-loss budget: {long} Adam steps per stitching layer in Figures 4-5 and Experiments 5-6 at "
        f"{', '.join(config.long_layers)} ({config.stitch_epochs} epochs of {config.n_stitch:,} images at batch "
        f"{config.stitch_batch}), but {config.steps(config.sweep_epochs):,} in Figures 2, 3, 7, 8 and Experiments "
        f"5-6 at the other layers (paper: ~11,700 everywhere){lr}"
    )
