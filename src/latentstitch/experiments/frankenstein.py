"""Dr. Frankenstein (Csiszárik et al., NeurIPS 2021) on Fashion-MNIST: two Tiny-10 networks of the same
architecture trained from different seeds, stitched at every layer.

Experiments (numbered as in the paper):

- Experiment 1 / Figure 2: least squares, Procrustes and task-loss matching at every layer (relative accuracy and
  cross-entropy to model B), with the paper's baselines (identity stitching, CKA after task loss).
- Experiment 3 / Figure 4: CKA and R^2 between the transformed activations of A and B along task-loss training.
- Experiment 4 / Figure 5: a network stitched to itself, trained with a CKA penalty: CKA drops, accuracy holds.
- Section 7 / Figure 7: rank 4 / 8 / 16 matching by SVD (reduced-rank regression) vs a trained bottleneck.
- Experiment 7 / Figure 8: sparsity of L1-regularised task-loss vs direct (Lasso) matching.
- Experiment 5 / Figure 6: random vs least-squares initialisation of task-loss matching.
- Experiment 6: linear mode connectivity of stitching matrices found from random initialisations.
- Experiment 2 / Figure 3: networks of 1x, 2x and 4x width.

Everything runs on one CPU thread (``latentstitch reproduce frankenstein``); ``--quick`` is a miniature of it.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from latentstitch.experiments._grid import grid_client
from latentstitch.experiments._report import Expectation, Report, ResultTable, mean_std, save_figure

HELP = "stitch two Tiny-10s on Fashion-MNIST at every layer: least squares vs task loss, rank, sparsity, CKA, width"
PAPER = (
    "Csiszárik, Kőrösi-Szabó, Matszangosz, Papp, Varga. Similarity and Matching of Neural Network "
    "Representations. NeurIPS 2021 (Dr. Frankenstein)"
)
TINY10_LAYERS = tuple(f"bn{i}" for i in range(1, 9))


@dataclass(frozen=True)
class Config:
    """Every setting of one run, chosen before looking at results (full and quick versions below)."""

    n_train: int  # base networks' training images (stratified subset of the official 60k)
    n_test: int  # evaluation images (stratified subset of the official 10k test split)
    n_stitch: int  # images the stitching layers are trained on (the first of the training subset)
    n_direct: int  # images direct matching is fitted on (all spatial positions of each)
    width: float  # Tiny-10 width multiplier of the main pair (1.0 = the paper's 16..64 channels)
    widths: tuple[float, ...]  # Experiment 2: widths compared (x1, x2, x4...)
    seeds: tuple[int, int]  # the two base networks
    base_epochs: int
    base_batch: int
    layers: tuple[str, ...]
    stitch_epochs: int
    stitch_batch: int
    track_every: int
    trace_layer: str  # Figure 4 (the paper: Tiny-10 layer 3)
    cka_layer: str  # Figure 5
    cka_penalty: float
    rank_layers: tuple[str, ...]
    ranks: tuple[int, ...]
    sparsity_layer: str
    l1: tuple[float, ...]
    alphas: tuple[float, ...]
    init_layers: tuple[str, ...]  # Experiments 5 and 6
    init_runs: int
    mode_threshold: float  # Experiment 6 keeps transformations above this relative accuracy (the paper: 0.8)
    lambdas: tuple[float, ...]
    width_layers: tuple[str, ...]


FULL = Config(
    n_train=10_000,
    n_test=2_000,
    n_stitch=5_000,
    n_direct=2_000,
    width=0.5,
    widths=(0.25, 0.5, 1.0),
    seeds=(0, 1),
    base_epochs=6,
    base_batch=128,
    layers=TINY10_LAYERS,
    stitch_epochs=4,
    stitch_batch=32,
    track_every=25,
    trace_layer="bn3",
    cka_layer="bn4",
    cka_penalty=1.0,
    rank_layers=("bn4", "bn7"),
    ranks=(4, 8, 16),
    sparsity_layer="bn6",
    l1=(0.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0),
    alphas=(0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0),
    init_layers=("bn3", "bn6"),
    init_runs=3,
    mode_threshold=0.8,
    lambdas=(0.0, 0.25, 0.5, 0.75, 1.0),
    width_layers=("bn3", "bn5", "bn7"),
)

QUICK = Config(
    n_train=1_000,
    n_test=500,
    n_stitch=500,
    n_direct=300,
    width=0.25,
    widths=(0.25, 0.5),
    seeds=(0, 1),
    base_epochs=3,
    base_batch=32,
    layers=("bn3", "bn7"),
    stitch_epochs=1,
    stitch_batch=32,
    track_every=5,
    trace_layer="bn3",
    cka_layer="bn3",
    cka_penalty=1.0,
    rank_layers=("bn7",),
    ranks=(4,),
    sparsity_layer="bn7",
    l1=(0.0, 100.0),
    alphas=(0.0, 0.1),
    init_layers=("bn3", "bn7"),
    init_runs=2,
    mode_threshold=0.8,
    lambdas=(0.0, 0.5, 1.0),
    width_layers=("bn7",),
)


def run(*, quick: bool, out_dir: Path, progress: bool) -> Report:
    """Train the networks, run every experiment, draw the figures into ``out_dir``; return the report."""
    from threadpoolctl import threadpool_limits

    # numpy's BLAS (direct matching) gets the same thread budget as torch: with more threads than free cores it
    # spin-waits, and a least-squares fit that takes 0.1 s alone took 10 s on the busy 2-core machine.
    with threadpool_limits(limits=torch.get_num_threads()):
        return _run(QUICK if quick else FULL, Path(out_dir), progress, quick)


# --- shared pieces ------------------------------------------------------------------------------------------------


class _Context:
    """Data, base networks and the stitching settings every experiment uses."""

    def __init__(self, config: Config, stage: Any):
        from latentstitch.data import load_fashion_mnist

        self.config = config
        self.stage = stage
        data = load_fashion_mnist(n_train=config.n_train, n_test=config.n_test, seed=0)
        self.x_train, self.y_train = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
        self.x_test, self.y_test = torch.from_numpy(data.x_test), torch.from_numpy(data.y_test)
        self.stitch_data = (self.x_train[: config.n_stitch], self.y_train[: config.n_stitch])
        self.direct_data = self.x_train[: config.n_direct]
        self.eval_data = (self.x_test, self.y_test)
        self.models: dict[tuple[float, int], nn.Module] = {}
        self.base_accuracy: dict[tuple[float, int], float] = {}

    def model(self, width: float, seed: int) -> nn.Module:
        from latentstitch.models import accuracy, tiny10, train_classifier

        if (width, seed) not in self.models:
            self.stage(f"training Tiny-10 x{width:g} seed {seed}")
            torch.manual_seed(seed)
            model = tiny10(width)
            train_classifier(
                model,
                self.x_train,
                self.y_train,
                epochs=self.config.base_epochs,
                batch_size=self.config.base_batch,
                seed=seed,
            )
            self.models[width, seed] = model
            self.base_accuracy[width, seed] = accuracy(model, self.x_test, self.y_test)
        return self.models[width, seed]

    def task_loss(self, **options: Any) -> dict[str, Any]:
        """``fit_task_loss`` options shared by every run (overridable)."""
        base = {"epochs": self.config.stitch_epochs, "batch_size": self.config.stitch_batch, "progress": False}
        return {**base, **options}


def _relative(stitched: Any, context: _Context) -> dict[str, float]:
    from latentstitch.stitching import stitch_metrics

    return stitch_metrics(stitched, context.eval_data)


def _figure(width: float, height: float, columns: int = 1):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    axes = figure.subplots(1, columns, squeeze=False)[0]
    return figure, list(axes)


def _save(figure: Any, path: Path) -> str:
    figure.tight_layout()
    return save_figure(figure, path)


def _interpolated(points: list[tuple[float, float]], at: float) -> float | None:
    """Relative accuracy at sparsity ``at`` by linear interpolation along a sparsity curve (None outside it)."""
    points = sorted(points)
    xs = [p[0] for p in points]
    if not points or at < xs[0] or at > xs[-1]:
        return None
    return float(np.interp(at, xs, [p[1] for p in points]))


# --- the experiments ----------------------------------------------------------------------------------------------


def _experiment_1(context: _Context) -> dict[str, Any]:
    """Figure 2: every layer, both directions of the main pair; identity and CKA baselines."""
    from latentstitch.similarity import cka
    from latentstitch.stitching import LeastSquares, Procrustes, TaskLoss, get_activations, stitch, sweep

    config = context.config
    a, b = config.seeds
    methods = {
        "least squares": LeastSquares(),
        "Procrustes": Procrustes(),
        "task loss": TaskLoss(**context.task_loss()),
    }
    results, identity_ce, cka_after = [], [], []
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
        results.append(result)
        probe = context.x_test[:500]
        for layer in config.layers:
            plain = stitch(model_a, model_b, layer, layer, "identity", example=probe)
            identity_ce.append(_relative(plain, context)["cross_entropy"])
            stitched = stitch(model_a, model_b, layer, layer, result.stitching_layers[layer, "task loss"])
            acts_a = get_activations(model_a, probe, layer)
            acts_b = get_activations(model_b, probe, layer)
            with torch.no_grad():
                transformed = stitched.stitching_layer(acts_a)
            cka_after.append(float(cka(transformed.flatten(1).double(), acts_b.flatten(1).double())))
    return {"results": results, "identity_ce": identity_ce, "cka_after": cka_after}


def _experiment_5(context: _Context) -> dict[str, Any]:
    """Figure 6 / Experiment 5 (random vs least-squares init) with the traces of Figure 4 and the random-init layers
    of Experiment 6."""
    from latentstitch.stitching import LeastSquares, fit_direct, fit_task_loss, stitch

    config = context.config
    a, b = config.seeds
    model_a, model_b = context.model(config.width, a), context.model(config.width, b)
    runs: dict[str, dict[str, list[Any]]] = {}
    for layer in config.init_layers:
        least_squares = fit_direct(LeastSquares(), model_a, model_b, layer, layer, context.direct_data)
        runs[layer] = {"random": [], "least squares": [], "layers": [], "traces": []}
        for seed in range(config.init_runs):
            for init in ("random", "least squares"):
                context.stage(f"Experiment 5: {layer}, {init} init, run {seed + 1}/{config.init_runs}")
                stitched = stitch(model_a, model_b, layer, layer)
                track = init == "least squares" and layer == config.trace_layer
                outcome = fit_task_loss(
                    stitched,
                    context.stitch_data,
                    **context.task_loss(
                        init="random" if init == "random" else least_squares,
                        seed=seed,
                        track_every=config.track_every if track else None,
                        probe=context.x_test[:512] if track else None,
                    ),
                )
                runs[layer][init].append(_relative(stitched, context)["relative_accuracy"])
                if init == "random":
                    runs[layer]["layers"].append(stitched.stitching_layer)
                if track:
                    runs[layer]["traces"].append(outcome.trace)
    return runs


def _experiment_6(context: _Context, init_runs: dict[str, Any]) -> dict[str, Any]:
    """Linear mode connectivity between the random-init stitching layers of Experiment 5 that reach the threshold."""
    from latentstitch.stitching import interpolate_layers, stitch

    config = context.config
    a, b = config.seeds
    model_a, model_b = context.model(config.width, a), context.model(config.width, b)
    out: dict[str, Any] = {}
    for layer in config.init_layers:
        context.stage(f"Experiment 6: mode connectivity at {layer}")
        kept = [
            (i, lay)
            for i, (lay, acc) in enumerate(zip(init_runs[layer]["layers"], init_runs[layer]["random"], strict=True))
            if acc >= config.mode_threshold
        ]
        paths = []
        for (i, first), (j, second) in itertools.combinations(kept, 2):
            curve = []
            for weight in config.lambdas:
                stitched = stitch(model_a, model_b, layer, layer, interpolate_layers(first, second, weight))
                curve.append(_relative(stitched, context)["relative_accuracy"])
            paths.append({"pair": (i, j), "relative_accuracy": curve})
        out[layer] = {"kept": len(kept), "runs": len(init_runs[layer]["random"]), "paths": paths}
    return out


def _experiment_4(context: _Context) -> dict[str, Any]:
    """Figure 5: model A stitched to itself from the identity, trained with cross-entropy + CKA penalty."""
    from latentstitch.stitching import fit_task_loss, stitch

    config = context.config
    model = context.model(config.width, config.seeds[0])
    layer = config.cka_layer
    context.stage(f"Experiment 4: self-stitch at {layer} with a CKA penalty")
    stitched = stitch(model, model, layer, layer, "identity", example=context.x_test[:2])
    before = _relative(stitched, context)
    outcome = fit_task_loss(
        stitched,
        context.stitch_data,
        **context.task_loss(
            cka_penalty=config.cka_penalty, track_every=config.track_every, probe=context.x_test[:512], seed=0
        ),
    )
    after = _relative(stitched, context)
    return {"before": before, "after": after, "trace": outcome.trace, "layer": layer}


def _low_rank(context: _Context) -> dict[str, Any]:
    """Figure 7: rank-r least squares (reduced-rank regression, by SVD) vs a trained rank-r bottleneck."""
    from latentstitch.stitching import ReducedRank, fit_direct, fit_task_loss, stitch

    config = context.config
    a, b = config.seeds
    model_a, model_b = context.model(config.width, a), context.model(config.width, b)
    rows = []
    for layer in config.rank_layers:
        for rank in config.ranks:
            context.stage(f"Figure 7: {layer}, rank {rank}")
            direct = fit_direct(ReducedRank(rank), model_a, model_b, layer, layer, context.direct_data)
            svd = _relative(stitch(model_a, model_b, layer, layer, direct), context)["relative_accuracy"]
            bottleneck = stitch(model_a, model_b, layer, layer)
            fit_task_loss(bottleneck, context.stitch_data, **context.task_loss(rank=rank, init="random"))
            trained = _relative(bottleneck, context)["relative_accuracy"]
            rows.append({"layer": layer, "rank": rank, "channels": direct.n_features_in_, "svd": svd, "task": trained})
    return {"rows": rows}


def _sparsity(context: _Context):
    """Figure 8: L1 task loss vs L1 direct matching (Lasso), thresholded at 1e-4."""
    from latentstitch.stitching import sparsity_sweep

    config = context.config
    a, b = config.seeds
    context.stage(f"Figure 8: sparsity at {config.sparsity_layer}")
    return sparsity_sweep(
        context.model(config.width, a),
        context.model(config.width, b),
        config.sparsity_layer,
        data=context.stitch_data,
        eval_data=context.eval_data,
        direct_data=context.direct_data,
        l1=config.l1,
        alphas=config.alphas,
        task_loss=context.task_loss(),
        progress=False,
    )


def _experiment_2(context: _Context, main: Any) -> dict[str, Any]:
    """Figure 3: task-loss matching (least-squares init) for networks of every width; the main width reuses
    Experiment 1's runs (same settings)."""
    from latentstitch.stitching import LeastSquares, TaskLoss, sweep

    config = context.config
    a, b = config.seeds
    out: dict[float, dict[str, float]] = {}
    for width in config.widths:
        if width == config.width:
            out[width] = {layer: main.value(layer, "task loss") for layer in config.width_layers}
            continue
        model_a, model_b = context.model(width, a), context.model(width, b)
        context.stage(f"Experiment 2: width x{width / config.widths[0]:g}")
        result = sweep(
            model_a,
            model_b,
            config.width_layers,
            {"least squares": LeastSquares(), "task loss": TaskLoss(**context.task_loss())},
            data=context.stitch_data,
            eval_data=context.eval_data,
            direct_data=context.direct_data,
            progress=False,
            client=grid_client(),  # each layer a task on the cluster of reproduce --workers N, if any
        )
        out[width] = {layer: result.value(layer, "task loss") for layer in config.width_layers}
    return out


# --- the run ------------------------------------------------------------------------------------------------------


def _run(config: Config, out_dir: Path, progress: bool, quick: bool) -> Report:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    stages = 4 * 2 + 2 + len(config.init_layers) * (2 * config.init_runs + 1) + 1 + 1
    stages += len(config.rank_layers) * len(config.ranks) + len(config.widths) - 1
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), disable=not progress) as bar:
        task = bar.add_task("frankenstein", total=stages)

        def stage(description: str) -> None:
            bar.update(task, advance=1, description=f"frankenstein: {description}")

        context = _Context(config, stage)
        exp1 = _experiment_1(context)
        init_runs = _experiment_5(context)
        mode = _experiment_6(context, init_runs)
        exp4 = _experiment_4(context)
        low_rank = _low_rank(context)
        sparsity = _sparsity(context)
        width = _experiment_2(context, exp1["results"][0])
        bar.update(task, completed=stages, description="frankenstein: done")

    figures = {
        "Figure 2: relative accuracy and cross-entropy per layer": _plot_layers(exp1, out_dir / "fig2_layers.png"),
        "Figure 4: CKA, R^2 and cross-entropy along task-loss training": _plot_traces(
            init_runs[config.trace_layer]["traces"], config.trace_layer, out_dir / "fig4_similarity_trace.png"
        ),
        "Figure 5: CKA penalised, accuracy kept": _plot_cka_penalty(exp4, out_dir / "fig5_low_cka.png"),
        "Figure 6: relative accuracy by initialisation": _plot_init(init_runs, out_dir / "fig6_init.png"),
        "Experiment 6: linear mode connectivity": _plot_mode(mode, out_dir / "exp6_mode_connectivity.png"),
        "Figure 7: low rank, SVD vs trained bottleneck": _plot_low_rank(low_rank, out_dir / "fig7_low_rank.png"),
        "Figure 8: relative accuracy vs sparsity": _save(sparsity.plot(), out_dir / "fig8_sparsity.png"),
        "Figure 3: relative accuracy vs width": _plot_width(width, config, out_dir / "fig3_width.png"),
    }
    tables, expectations, numbers = _summarise(context, exp1, init_runs, mode, exp4, low_rank, sparsity, width)
    numbers["config"] = asdict(config)
    return Report(
        name="frankenstein",
        title="Dr. Frankenstein on Fashion-MNIST: stitching two Tiny-10 networks",
        paper=PAPER,
        setting={
            "data": f"Fashion-MNIST (Debian dataset-fashion-mnist, official split): {config.n_train} stratified "
            f"training images, {config.n_test} test images",
            "networks": f"Tiny-10 at width x{config.width:g} of the paper's (channels "
            f"{', '.join(str(c) for c in _channels(config.width))}), seeds {config.seeds[0]} and {config.seeds[1]}, "
            f"Adam 1e-3, batch {config.base_batch}, {config.base_epochs} epochs; test accuracy "
            + ", ".join(f"{context.base_accuracy[config.width, s]:.3f}" for s in config.seeds),
            "stitching": "after each batch norm (bn1..bn8, as the reference code), 1x1 convolution; direct matching "
            f"on {config.n_direct} training images (every spatial position a sample); task loss: soft labels from "
            f"model B, Adam 1e-3, lr x0.1 after 1/3 and 2/3 of the steps, batch {config.stitch_batch}, "
            f"{config.stitch_epochs} epochs on {config.n_stitch} images, least-squares init; both networks frozen",
            "evaluation": f"relative accuracy = accuracy(stitched) / accuracy(model B) on {config.n_test} test images",
            "pairs": f"seed {config.seeds[0]} -> {config.seeds[1]} and back (Figure 2); {config.seeds[0]} -> "
            f"{config.seeds[1]} elsewhere",
            "threads": torch.get_num_threads(),
            "quick": quick,
        },
        differences=(
            ["--quick: a miniature for CI (tiny networks, a few steps); its numbers mean nothing"] if quick else []
        )
        + _differences(config),
        tables=tables,
        expectations=expectations,
        figures=figures,
        numbers=numbers,
        seconds=time.perf_counter() - started,
    )


def _channels(width: float) -> tuple[int, ...]:
    from latentstitch.models import TINY10_CHANNELS
    from latentstitch.models._blocks import scaled_channels

    return scaled_channels(TINY10_CHANNELS, width)


def _differences(config: Config) -> list[str]:
    x1 = config.widths[0]
    channels = _channels(config.width)
    full_rank = [
        f"{layer} ({channels[int(layer[2:]) - 1]} channels)"
        for layer in config.rank_layers
        if max(config.ranks) >= channels[int(layer[2:]) - 1]
    ]
    rank_note = f"; rank {max(config.ranks)} is full rank at " + ", ".join(full_rank) if full_rank else ""
    return [
        "Fashion-MNIST (28x28 grey) instead of CIFAR-10; subsets of the official split "
        f"({config.n_train} training / {config.n_test} test images) to fit 2 CPU cores",
        f"Tiny-10 at x{config.width:g} of the paper's width; base networks trained with Adam 1e-3 for "
        f"{config.base_epochs} epochs at batch {config.base_batch} (paper: SGD 0.1 Nesterov, weight decay 1e-4, "
        "110k iterations)",
        f"2 seeds, i.e. 2 directed pairs for Figure 2 and 1 elsewhere (paper: 10 runs); Experiment 5 with "
        f"{config.init_runs} random + {config.init_runs} least-squares runs per layer (paper: 50 + 50); Figure 4 "
        f"from {config.init_runs} runs (paper: 10) that differ only in data order (one pair, one least-squares init)",
        f"task loss trained {config.stitch_epochs} epoch(s) on {config.n_stitch} images at batch "
        f"{config.stitch_batch} (about {config.stitch_epochs * config.n_stitch // config.stitch_batch} Adam steps; "
        "paper: 30 epochs of 50k at batch 128, about 11,700 steps); the lr steps happen after 1/3 and 2/3 of the "
        "steps rather than at epoch boundaries; batch 32 instead of 128 buys more steps for the same compute. The "
        "stitching layers may be less trained than the paper's: in the full run the Figure 4 losses still fall "
        "when the learning rate first drops, which matters most for the randomly initialised bottlenecks (Figure 7) "
        "and the CKA-penalised layer (Figure 5), which start far from a good map",
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


# --- tables and checks --------------------------------------------------------------------------------------------


def _summarise(context, exp1, init_runs, mode, exp4, low_rank, sparsity, width):
    config = context.config
    results = exp1["results"]
    layers = list(config.layers)
    method_names = results[0].methods

    def over_pairs(layer: str, method: str, metric: str = "relative_accuracy") -> tuple[float, float]:
        return mean_std([r.value(layer, method, metric) for r in results])

    rows = []
    for layer in layers:
        cells = [over_pairs(layer, m) for m in method_names]
        rows.append([layer, *cells, cells[-1][0] - cells[0][0], over_pairs(layer, "task loss", "cross_entropy")])
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
    table_layers = ResultTable(
        "Experiment 1 / Figure 2: relative accuracy per stitching layer (mean ± std over both directions)",
        ["layer", *method_names, "task loss - LS", "task loss CE to B"],
        rows,
        note="relative accuracy = stitched / model B on the test images; CE = cross-entropy to model B's outputs",
    )
    identity, after = mean_std(exp1["identity_ce"]), mean_std(exp1["cka_after"])
    table_baselines = ResultTable(
        "Baselines over all layers and both directions",
        ["quantity", "ours", "paper (Tiny-10)"],
        [
            ["cross-entropy to B, stitched without transformation (Sec. 5.1)", identity, (6.99, 1.96)],
            ["CKA(transformed A, B) after task loss (Sec. 6.3)", after, (0.883, 0.050)],
        ],
        note="paper values from Sec. 5.1 (Figure 2 caption) and Sec. 6.3; their cross-entropy convention may "
        "differ by the number of classes (see differences)",
    )

    base_rows = [
        [f"x{w / config.widths[0]:g} (width {w:g})", s, context.base_accuracy[w, s], None]
        for (w, s) in sorted(context.base_accuracy)
    ]
    table_base = ResultTable(
        "Base networks: test accuracy",
        ["network", "seed", "accuracy", "paper"],
        base_rows,
        note="the paper reports no base accuracy in its text (Tiny-10 on CIFAR-10)",
    )

    traces = init_runs[config.trace_layer]["traces"]
    start = {k: mean_std([t[0][k] for t in traces]) for k in ("cka", "r2", "cross_entropy")}
    end = {k: mean_std([t[-1][k] for t in traces]) for k in ("cka", "r2", "cross_entropy")}
    table_trace = ResultTable(
        f"Experiment 3 / Figure 4: along task-loss training at {config.trace_layer}, from least squares "
        f"({len(traces)} runs)",
        ["quantity", "at init", "after training", "paper (Tiny-10 layer 3)"],
        [
            ["CKA(transformed A, B)", start["cka"], end["cka"], "large variance, decreasing"],
            ["R^2 of B by transformed A", start["r2"], end["r2"], "decreasing"],
            ["cross-entropy to B (probe)", start["cross_entropy"], end["cross_entropy"], "decreasing"],
        ],
    )

    cka_trace = exp4["trace"]
    table_cka = ResultTable(
        f"Experiment 4 / Figure 5: self-stitched at {exp4['layer']}, CKA penalised",
        ["quantity", "identity init", "after training", "paper (ResNet layer 2.0)"],
        [
            ["CKA(stitched, own activation)", cka_trace[0]["cka"], cka_trace[-1]["cka"], "drops below 0.7"],
            [
                "relative accuracy",
                exp4["before"]["relative_accuracy"],
                exp4["after"]["relative_accuracy"],
                "essentially unchanged",
            ],
            ["agreement with the network itself", exp4["before"]["agreement"], exp4["after"]["agreement"], None],
        ],
    )

    table_rank = ResultTable(
        "Section 7 / Figure 7: low-rank matching, relative accuracy",
        ["layer", "channels", "rank", "least squares by SVD", "trained bottleneck", "paper"],
        [[r["layer"], r["channels"], r["rank"], r["svd"], r["task"], "bottleneck > SVD"] for r in low_rank["rows"]],
    )

    sparse_rows = [[r["method"], r["penalty"], r["sparsity"], r["relative_accuracy"]] for r in sparsity.rows]
    sparse_rows.append(["paper (Fig. 8)", None, "0.8-0.9", "direct drops drastically, task loss holds"])
    table_sparse = ResultTable(
        f"Experiment 7 / Figure 8: sparsity at {config.sparsity_layer} (entries < 1e-4 set to zero)",
        ["method", "L1 strength / Lasso alpha", "sparsity", "relative accuracy"],
        sparse_rows,
        digits=3,
    )

    init_rows = []
    for layer in config.init_layers:
        for init in ("random", "least squares"):
            values = init_runs[layer][init]
            init_rows.append([layer, init, mean_std(values), min(values), max(values), len(values)])
    init_rows.append(["paper (Fig. 6)", "LS init", "consistently well", None, None, 50])
    init_rows.append(["paper (Fig. 6)", "random init", "same order, sometimes stuck", None, None, 50])
    table_init = ResultTable(
        "Experiment 5 / Figure 6: relative accuracy by initialisation of task-loss matching",
        ["layer", "init", "mean ± std", "min", "max", "runs"],
        init_rows,
    )

    mode_rows = []
    for layer, entry in mode.items():
        paths = entry["paths"]
        if paths:
            ends = mean_std([v for p in paths for v in (p["relative_accuracy"][0], p["relative_accuracy"][-1])])
            lowest = mean_std([min(p["relative_accuracy"]) for p in paths])
            middle = mean_std([p["relative_accuracy"][len(config.lambdas) // 2] for p in paths])
        else:
            ends = lowest = middle = None
        mode_rows.append([layer, f"{entry['kept']}/{entry['runs']}", len(paths), ends, middle, lowest])
    mode_rows.append(["paper (Exp. 6)", ">= 0.8 kept", None, None, "holds on most layers", "not on the first three"])
    table_mode = ResultTable(
        "Experiment 6: relative accuracy along M = lambda M1 + (1 - lambda) M2 between random-init runs",
        ["layer", "kept (>= 0.8)", "pairs", "endpoints", "lambda = 0.5", "minimum on the path"],
        mode_rows,
    )

    x1 = config.widths[0]
    width_rows = [[layer, *[width[w][layer] for w in config.widths]] for layer in config.width_layers]
    width_rows.append(["mean", *[float(np.mean(list(width[w].values()))) for w in config.widths]])
    width_rows.append(["paper (ResNet-20, Fig. 3)", "already very high", *["increasing" for _ in config.widths[1:]]])
    table_width = ResultTable(
        "Experiment 2 / Figure 3: task-loss relative accuracy by network width",
        ["layer", *[f"x{w / x1:g} (width {w:g})" for w in config.widths]],
        width_rows,
    )

    expectations = _expectations(
        config, results, method_names, traces, exp4, low_rank, sparsity, init_runs, mode, width
    )
    numbers = {
        "base_accuracy": {f"width {w:g} seed {s}": v for (w, s), v in context.base_accuracy.items()},
        "figure2": [r.rows for r in results],
        "identity_cross_entropy": exp1["identity_ce"],
        "cka_after_task_loss": exp1["cka_after"],
        "figure4_traces": traces,
        "figure5": {k: exp4[k] for k in ("before", "after", "trace", "layer")},
        "figure7": low_rank["rows"],
        "figure8": sparsity.rows,
        "experiment5": {
            layer: {k: v for k, v in entry.items() if k not in ("layers", "traces")}
            for layer, entry in init_runs.items()
        },
        "experiment6": mode,
        "experiment2": {f"{w:g}": values for w, values in width.items()},
    }
    tables = [
        table_base,
        table_layers,
        table_baselines,
        table_trace,
        table_cka,
        table_rank,
        table_sparse,
        table_init,
        table_mode,
        table_width,
    ]
    return tables, expectations, numbers


def _expectations(config, results, method_names, traces, exp4, low_rank, sparsity, init_runs, mode, width):
    layers = list(config.layers)

    def mean_over_pairs(layer: str, method: str) -> float:
        return float(np.mean([r.value(layer, method) for r in results]))

    task = {layer: mean_over_pairs(layer, "task loss") for layer in layers}
    ls = {layer: mean_over_pairs(layer, "least squares") for layer in layers}
    procrustes = {layer: mean_over_pairs(layer, "Procrustes") for layer in layers}
    near = [layer for layer in layers if task[layer] >= 0.95]
    worse = [layer for layer in layers if task[layer] < ls[layer]]
    ce_task = {x: float(np.mean([r.value(x, "task loss", "cross_entropy") for r in results])) for x in layers}
    ce_ls = {x: float(np.mean([r.value(x, "least squares", "cross_entropy") for r in results])) for x in layers}
    later = layers[-3:]
    gap = max(abs(procrustes[layer] - ls[layer]) for layer in later)
    out = [
        Expectation(
            "task loss near 100% relative accuracy (>= 0.95) on most layers",
            len(near) > len(layers) / 2,
            f"{len(near)}/{len(layers)} layers; " + ", ".join(f"{layer} {task[layer]:.3f}" for layer in layers),
        ),
        Expectation(
            "task loss >= least squares on every layer",
            not worse,
            (
                "lower at "
                + ", ".join(
                    f"{x} ({task[x]:.3f} vs {ls[x]:.3f}; cross-entropy to B {ce_task[x]:.3f} vs {ce_ls[x]:.3f})"
                    for x in worse
                )
                if worse
                else f"smallest gain {min(task[x] - ls[x] for x in layers):+.3f}"
            ),
        ),
        Expectation(
            "Procrustes as good as least squares on the later layers (within 0.05)",
            gap <= 0.05,
            f"largest |Procrustes - LS| on {', '.join(later)}: {gap:.3f}",
        ),
    ]
    cka_start = np.mean([t[0]["cka"] for t in traces])
    cka_end = np.mean([t[-1]["cka"] for t in traces])
    r2_down = all(t[-1]["r2"] < t[0]["r2"] for t in traces)
    ce_down = all(t[-1]["cross_entropy"] < t[0]["cross_entropy"] for t in traces)
    out += [
        Expectation(
            f"Figure 4: R^2 decreases along task-loss training from the least-squares init ({config.trace_layer})",
            r2_down,
            ", ".join(f"{t[0]['r2']:.3f} -> {t[-1]['r2']:.3f}" for t in traces),
        ),
        Expectation(
            "Figure 4: CKA decreases while the cross-entropy to model B decreases",
            bool(cka_end < cka_start) and ce_down,
            f"CKA {cka_start:.3f} -> {cka_end:.3f} (spread over runs at the end "
            f"{np.ptp([t[-1]['cka'] for t in traces]):.4f}); CE "
            + ", ".join(f"{t[0]['cross_entropy']:.3f} -> {t[-1]['cross_entropy']:.3f}" for t in traces),
        ),
    ]
    cka_final = exp4["trace"][-1]["cka"]
    kept = exp4["after"]["relative_accuracy"]
    out.append(
        Expectation(
            "Figure 5: CKA drops below 0.7 while relative accuracy stays >= 0.95",
            cka_final < 0.7 and kept >= 0.95,
            f"CKA {exp4['trace'][0]['cka']:.3f} -> {cka_final:.3f}, relative accuracy "
            f"{exp4['before']['relative_accuracy']:.3f} -> {kept:.3f}",
        )
    )
    losing = [f"{r['layer']} r{r['rank']}" for r in low_rank["rows"] if r["task"] < r["svd"]]
    out.append(
        Expectation(
            "Figure 7: the trained bottleneck beats least squares by SVD at every rank",
            not losing,
            "; ".join(
                f"{r['layer']} rank {r['rank']}: SVD {r['svd']:.3f}, bottleneck {r['task']:.3f}"
                for r in low_rank["rows"]
            ),
        )
    )
    curves = {
        method: [(r["sparsity"], r["relative_accuracy"]) for r in sparsity.rows if r["method"] == method]
        for method in ("task loss (L1)", "direct (Lasso)")
    }
    at = {method: _interpolated(points, 0.8) for method, points in curves.items()}
    if None in at.values():
        detail = "a curve does not reach 80% sparsity: " + ", ".join(
            f"{m} max {max(p[0] for p in points):.2f}" for m, points in curves.items()
        )
        holds = False
    else:
        detail = f"at 80% sparsity: task loss {at['task loss (L1)']:.3f}, direct {at['direct (Lasso)']:.3f}"
        holds = at["task loss (L1)"] > at["direct (Lasso)"]
    out.append(Expectation("Figure 8: at high sparsity (80%) task loss keeps more accuracy than direct", holds, detail))
    stable = []
    for layer in config.init_layers:
        random_runs, ls_runs = init_runs[layer]["random"], init_runs[layer]["least squares"]
        stable.append(
            (layer, np.std(ls_runs) <= np.std(random_runs) and min(ls_runs) >= min(random_runs), random_runs, ls_runs)
        )
    out.append(
        Expectation(
            "Experiment 5: least-squares init more stable than random (smaller spread, higher worst run)",
            all(s[1] for s in stable),
            "; ".join(
                f"{layer}: random {np.mean(r):.3f} ± {np.std(r):.3f} (min {min(r):.3f}), "
                f"LS {np.mean(q):.3f} ± {np.std(q):.3f} (min {min(q):.3f})"
                for layer, _, r, q in stable
            ),
        )
    )
    for layer, entry in mode.items():
        paths = entry["paths"]
        early = int(layer[2:]) <= 3
        if not paths:
            out.append(
                Expectation(
                    f"Experiment 6 at {layer}: at least two random-init runs >= 0.8",
                    False,
                    f"{entry['kept']} of {entry['runs']} kept",
                )
            )
            continue
        ratio = min(
            min(p["relative_accuracy"]) / max(min(p["relative_accuracy"][0], p["relative_accuracy"][-1]), 1e-9)
            for p in paths
        )
        connected = ratio >= 0.95
        description = f"Experiment 6 at {layer}: " + (
            "mode connectivity lacking on the first three layers (path dips > 5%)"
            if early
            else "linear mode connectivity holds (path within 5% of its endpoints)"
        )
        out.append(
            Expectation(
                description,
                (not connected) if early else connected,
                f"worst path minimum / endpoint = {ratio:.3f} over {len(paths)} pairs",
            )
        )
    means = [float(np.mean(list(width[w].values()))) for w in config.widths]
    out.append(
        Expectation(
            "Figure 3: relative accuracy increases with width (mean over layers)",
            all(b >= a for a, b in itertools.pairwise(means)),
            ", ".join(f"x{w / config.widths[0]:g} {m:.3f}" for w, m in zip(config.widths, means, strict=True)),
        )
    )
    return out


# --- plots --------------------------------------------------------------------------------------------------------


def _plot_layers(exp1: dict[str, Any], path: Path) -> str:
    from latentstitch.stitching import plot_sweep

    figure = plot_sweep(exp1["results"], title="Fig. 2: stitching two Tiny-10s on Fashion-MNIST", cross_entropy=True)
    return _save(figure, path)


def _band(ax: Any, steps: np.ndarray, values: np.ndarray, color: str, label: str) -> None:
    for run in values:
        ax.plot(steps, run, ":", color=color, linewidth=0.8, alpha=0.7)
    mean, std = values.mean(0), values.std(0)
    ax.plot(steps, mean, "-", color=color, linewidth=2, label=label)
    ax.fill_between(steps, mean - std, mean + std, color=color, alpha=0.15)


def _plot_traces(traces: list[list[dict[str, float]]], layer: str, path: Path) -> str:
    figure, axes = _figure(12, 3.8, 3)
    steps = np.array([record["step"] for record in traces[0]])
    for ax, (key, label, color) in zip(
        axes,
        (
            ("cka", "linear CKA(transformed A, B)", "C0"),
            ("r2", "R^2 of B by transformed A", "C1"),
            ("cross_entropy", "cross-entropy to model B", "C2"),
        ),
        strict=True,
    ):
        values = np.array([[record[key] for record in trace] for trace in traces])
        _band(ax, steps, values, color, f"mean of {len(traces)} runs (dotted: each run)")
        ax.set_xlabel("optimiser step of task-loss training")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    figure.suptitle(f"Fig. 4: similarity indices along task-loss training from least squares, Tiny-10 {layer}")
    return _save(figure, path)


def _plot_cka_penalty(exp4: dict[str, Any], path: Path) -> str:
    figure, (ax,) = _figure(7, 4.2)
    steps = [r["step"] for r in exp4["trace"]]
    ax.plot(steps, [r["cka"] for r in exp4["trace"]], "-o", color="C0", markersize=3, label="CKA(stitched, own)")
    ax.plot(
        steps,
        [r["agreement"] for r in exp4["trace"]],
        "-s",
        color="C1",
        markersize=3,
        label="agreement with the network itself",
    )
    ax.set_xlabel("optimiser step (cross-entropy + CKA penalty)")
    ax.set_ylabel("CKA / agreement (probe images)")
    ax.set_ylim(0, 1.05)
    other = ax.twinx()
    other.plot(steps, [r["cross_entropy"] for r in exp4["trace"]], "--", color="C2", label="cross-entropy to itself")
    other.set_ylabel("cross-entropy to the network itself (dashed)")
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = other.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, fontsize=8, loc="center right")
    ax.set_title(f"Fig. 5: Tiny-10 stitched to itself at {exp4['layer']}, CKA penalised", fontsize=11)
    return _save(figure, path)


def _plot_init(init_runs: dict[str, Any], path: Path) -> str:
    figure, axes = _figure(5 * len(init_runs), 3.8, len(init_runs))
    for ax, (layer, entry) in zip(axes, init_runs.items(), strict=True):
        for row, (init, color) in enumerate((("random", "C3"), ("least squares", "C0"))):
            values = entry[init]
            ax.scatter(values, [row] * len(values), color=color, s=40, alpha=0.7, label=f"{init} init")
        ax.set_yticks([0, 1], ["random", "least squares"])
        ax.set_ylim(-0.6, 1.6)
        ax.set_xlabel("relative accuracy after task-loss training")
        ax.set_ylabel("initialisation")
        ax.set_title(f"Tiny-10 {layer}", fontsize=10)
        ax.legend(fontsize=8, loc="lower left")
    figure.suptitle("Fig. 6: relative accuracy by initialisation (one dot per run)")
    return _save(figure, path)


def _plot_mode(mode: dict[str, Any], path: Path) -> str:
    figure, axes = _figure(5 * len(mode), 3.8, len(mode))
    for ax, (layer, entry) in zip(axes, mode.items(), strict=True):
        for index, item in enumerate(entry["paths"]):
            curve = item["relative_accuracy"]
            lambdas = np.linspace(0, 1, len(curve))
            ax.plot(
                lambdas,
                curve,
                "-o",
                color=f"C{index}",
                markersize=3,
                label=f"runs {item['pair'][0]} and {item['pair'][1]}",
            )
        ax.set_xlabel("lambda in M = lambda M1 + (1 - lambda) M2")
        ax.set_ylabel("relative accuracy")
        ax.set_title(f"Tiny-10 {layer}: {entry['kept']}/{entry['runs']} runs >= 0.8", fontsize=10)
        if entry["paths"]:
            ax.legend(fontsize=8)
    figure.suptitle("Experiment 6: linear mode connectivity of stitching matrices (random inits)")
    return _save(figure, path)


def _plot_low_rank(low_rank: dict[str, Any], path: Path) -> str:
    layers = list(dict.fromkeys(r["layer"] for r in low_rank["rows"]))
    figure, axes = _figure(5 * len(layers), 3.8, len(layers))
    for ax, layer in zip(axes, layers, strict=True):
        rows = [r for r in low_rank["rows"] if r["layer"] == layer]
        positions = np.arange(len(rows))
        ax.bar(positions - 0.2, [r["svd"] for r in rows], 0.4, label="least squares by SVD (reduced rank)")
        ax.bar(positions + 0.2, [r["task"] for r in rows], 0.4, label="trained bottleneck (task loss)")
        ax.set_xticks(positions, [str(r["rank"]) for r in rows])
        ax.set_xlabel("rank of the stitching matrix")
        ax.set_ylabel("relative accuracy")
        ax.set_ylim(0, 1.3)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        ax.set_title(f"Tiny-10 {layer} ({rows[0]['channels']} channels)", fontsize=10)
        ax.legend(fontsize=8, loc="upper left")
    figure.suptitle("Fig. 7: low-rank stitching, SVD in activation space vs task loss")
    return _save(figure, path)


def _plot_width(width: dict[float, dict[str, float]], config: Config, path: Path) -> str:
    figure, (ax,) = _figure(6, 4.2)
    multipliers = [w / config.widths[0] for w in config.widths]
    for index, layer in enumerate(config.width_layers):
        ax.plot(multipliers, [width[w][layer] for w in config.widths], "-o", color=f"C{index}", label=layer)
    ax.set_xscale("log", base=2)
    ax.set_xticks(multipliers, [f"x{m:g}" for m in multipliers])
    ax.set_xlabel(f"width multiplier (x1 = {config.widths[0]:g} of the paper's Tiny-10)")
    ax.set_ylabel("relative accuracy (task loss, LS init)")
    ax.legend(fontsize=8, title="layer")
    ax.set_title("Fig. 3: stitching networks of different width", fontsize=11)
    return _save(figure, path)
