"""The grid of MLPs (the paper's Cora network with linear layers in place of graph convolutions), one training run
per grid point recording every epoch, and the similarity-to-the-best scores with their correlations."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from latentstitch.models import LatentClassifier
from latentstitch.relative import relative_projection
from latentstitch.similarity import matched_cosine
from latentstitch.training import RandomBatchSampler, TensorBatches, classification_loss, fit

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}
OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}


class UnitRows(nn.Module):
    """Scale every row to unit L2 norm (the paper's normalised latent before the classifier)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(x, dim=1)


def build_mlp(in_features: int, num_classes: int, *, hidden: int, layers: int, dropout: float, activation: str):
    """``dropout -> Linear(hidden) -> act -> (layers - 1) x [dropout -> Linear -> act] -> Linear(hidden) ->
    L2-normalise`` as the encoder, ``Linear(hidden, num_classes)`` as the head (the paper's Cora network with
    linear layers in place of graph convolutions)."""
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


def proxy_scores(accuracy: np.ndarray, relative: np.ndarray, grid_epochs: tuple[int, ...]) -> dict:
    """Similarities to the best grid model and their correlations with accuracy.

    ``accuracy``: (runs, epochs) validation accuracy after each epoch; ``relative``: (runs, epochs, n, |A|) relative
    representations of the validation samples. Grid models are (run, e) for e in ``grid_epochs``, in that order.
    """
    from scipy.stats import pearsonr, spearmanr

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
