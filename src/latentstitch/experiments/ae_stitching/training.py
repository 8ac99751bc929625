"""Training the autoencoders of every kind and seed, and the reconstruction error of encoder i with decoder j."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import torch

from latentstitch.experiments._image_tasks import ImageTask, fit_seeded
from latentstitch.experiments._report import mean_std
from latentstitch.experiments.ae_stitching.config import Config
from latentstitch.models import ConvAutoencoder, reconstruction_objective


@torch.no_grad()
def test_mse(encoder_side: torch.nn.Module, decoder_side: torch.nn.Module, x: torch.Tensor, batch: int = 500) -> float:
    """Mean over images of the per-image MSE of ``decoder_side.decode(encoder_side.encode(x))``, in eval mode."""
    encoder_side.eval()
    decoder_side.eval()
    total = 0.0
    for start in range(0, len(x), batch):
        chunk = x[start : start + batch]
        reconstruction = decoder_side.decode(encoder_side.encode(chunk))
        total += float((reconstruction - chunk).square().flatten(1).mean(dim=1).sum())
    return total / len(x)


def mean_image_mse(task: ImageTask) -> float:
    """Every test image reconstructed as the mean training image: what a model that ignores its latent reaches."""
    return float((task.x_test - task.x_train.mean(dim=0)).square().flatten(1).mean(dim=1).mean())


def train_kind(
    task: ImageTask,
    model_kind: str,
    latent: str,
    anchors: torch.Tensor,
    config: Config,
    epochs: int,
    bar: Any,
    device: str | torch.device = "cpu",
) -> dict[int, torch.nn.Module]:
    """One autoencoder per seed of ``config.seeds``, trained on ``device``; relative ones share the same anchor
    images (given on the CPU: each model is built there, with the same initial weights on every device)."""
    task = task.to(device)
    build = functools.partial(
        ConvAutoencoder,
        task.x_train.shape[1:],
        width=config.width,
        latent_dim=256,
        variational=model_kind == "VAE",
        anchor_inputs=anchors.cpu() if latent == "relative" else None,
        free_bits=config.free_bits if (model_kind, latent) == ("VAE", "absolute") else 0.0,
    )
    return {
        seed: fit_seeded(
            build,
            reconstruction_objective,
            (task.x_train,),
            seed=seed,
            epochs=epochs,
            batch_size=config.batch_size,
            bar=bar,
            description=f"{task.name} {latent} {model_kind} seed {seed}",
            lr=1e-3,
            grad_clip=10.0,
            device=device,
        )
        for seed in config.seeds
    }


def stitching_errors(models: dict[int, torch.nn.Module], x_test: torch.Tensor) -> dict[str, Any]:
    """Non-stitched errors per seed and stitched errors for every ordered pair of seeds, with mean ± std."""
    own = {seed: test_mse(model, model, x_test) for seed, model in models.items()}
    crossed = {(i, j): test_mse(models[i], models[j], x_test) for i, j in itertools.permutations(models, 2)}
    return {
        "non_stitched": {str(s): v for s, v in own.items()},
        "stitched": {f"{i}->{j}": v for (i, j), v in crossed.items()},
        "non_stitched_mean_std": mean_std(list(own.values())),
        "stitched_mean_std": mean_std(list(crossed.values())),
    }
