"""The per-domain model: a frozen sentence encoder's embeddings -> a trainable residual adapter -> a relative layer
(vanilla cosine, or robust: batch-norm statistics shared by samples and anchors, then cosine) or none (absolute) ->
a linear head; trained with the paper's class-accumulation schedule, optionally with topological densification."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from latentstitch.losses import TopologicalDensificationLoss
from latentstitch.models import LatentClassifier
from latentstitch.training import ClassAccumulationSampler, ClassificationObjective, cyclical_weight, fit

VARIANTS = ("absolute", "vanilla", "robust", "robust+topo")


class ResidualAdapter(nn.Module):
    """``x + W2 dropout(GELU(W1 x))`` with ``W2 = 0`` at initialisation: a trainable encoder on frozen embeddings
    that starts as the identity, so training fine-tunes the pretrained embedding rather than replacing it."""

    def __init__(self, width: int, hidden: int, dropout: float = 0.1):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, width))
        nn.init.zeros_(self.inner[-1].weight)
        nn.init.zeros_(self.inner[-1].bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.inner(x)


def build_model(variant: str, width: int, anchors: torch.Tensor, num_classes: int, seed: int):
    torch.manual_seed(seed)
    relative = variant != "absolute"
    latent_width = len(anchors) if relative else width
    return LatentClassifier(
        ResidualAdapter(width, width),
        width,
        num_classes,
        anchor_inputs=anchors if relative else None,
        projection="cosine" if variant == "vanilla" else "robust",
        anchor_refresh=60,
        head=nn.Linear(latent_width, num_classes),
    )


def train_model(model, x: torch.Tensor, y: torch.Tensor, variant: str, *, epochs: int, seed: int) -> None:
    """The paper's schedule: class-accumulation batches of 16, one optimiser step per group, AdamW with weight
    decay 0.01, gradient clipping at 1, cosine learning-rate decay; topological densification for robust+topo."""
    sampler = ClassAccumulationSampler(y.numpy(), 16, seed=seed)
    batches = sampler.tagged(x, y)
    groups = len(sampler) // sampler.group_size
    if variant == "robust+topo":
        objective = ClassificationObjective(
            {
                "embeddings": (TopologicalDensificationLoss(beta=3.0), 0.1),
                "latents": (TopologicalDensificationLoss(beta=3.0), 0.9),
            },
            weight=cyclical_weight(epochs * groups * sampler.class_pure_batches, 0.02),
        )
    else:
        objective = ClassificationObjective()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * groups)
    fit(
        model,
        objective,
        batches,
        epochs=epochs,
        optimizer=optimizer,
        scheduler=scheduler,
        accumulate=sampler.group_size,
        grad_clip=1.0,
        seed=seed,
        progress=False,
    )


@torch.no_grad()
def evaluate(model, x: torch.Tensor, y: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import f1_score

    model.eval()
    predicted = model(x).argmax(dim=1).numpy()
    return {
        "accuracy": float(np.mean(predicted == y)),
        "weighted_f1": float(f1_score(y, predicted, average="weighted")),
        "macro_f1": float(f1_score(y, predicted, average="macro")),
    }
