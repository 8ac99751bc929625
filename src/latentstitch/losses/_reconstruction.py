"""Reconstruction and KL terms of the autoencoders of Moschella et al. (``lucmos/relreps``)."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def calibrated_reconstruction_loss(reconstruction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The sigma-VAE ("calibrated decoder") Gaussian negative log-likelihood, summed over every element.

    ``sum[0.5 ((x - x_hat) / sigma)^2 + log sigma]`` with the optimal shared variance ``sigma^2 = mean((x - x_hat)^2)``
    of the batch (Rybkin et al. 2021), exactly as the official relative AE/VAE code computes it. Since
    ``sigma^2`` is the mean squared error, the value is ``0.5 N (1 + log MSE)`` for N elements: a log-MSE whose
    gradient is the MSE gradient divided by the MSE, so it keeps pushing when the error is already small.
    Not bounded below as the MSE goes to 0; compare runs on the plain MSE.
    """
    if reconstruction.shape != target.shape:
        raise ValueError(
            f"reconstruction and target shapes differ: {tuple(reconstruction.shape)} vs {tuple(target.shape)}"
        )
    if reconstruction.numel() == 0:
        raise ValueError("reconstruction: is empty; the calibrated likelihood needs at least one element")
    mse = F.mse_loss(reconstruction, target, reduction="mean")
    log_sigma = 0.5 * mse.log()
    return (0.5 * ((target - reconstruction) / log_sigma.exp()).square() + log_sigma).sum()


def gaussian_kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """``KL(N(mu, exp(logvar)) || N(0, I))`` of each sample (row): ``-0.5 sum(1 + logvar - mu^2 - exp(logvar))``.

    Returns a (n,) tensor; the relative VAE adds its sum over the batch, the absolute VAE its batch mean times a
    weight (0.025 in the paper's runs).
    """
    if mu.shape != logvar.shape:
        raise ValueError(f"mu and logvar shapes differ: {tuple(mu.shape)} vs {tuple(logvar.shape)}")
    return _kl_terms(mu, logvar).flatten(1).sum(dim=1)


def free_bits_kl(mu: torch.Tensor, logvar: torch.Tensor, free_bits: float) -> torch.Tensor:
    """The batch-mean KL of ``gaussian_kl`` with a floor of ``free_bits`` nats on each latent dimension (Kingma et al.
    2016, "Improved variational inference with inverse autoregressive flow", eq. 15): ``sum_d max(mean_n KL_nd,
    free_bits)``. A dimension whose mean KL is below the floor gets no gradient towards the prior, so a KL term that
    outweighs the reconstruction cannot switch every dimension off (posterior collapse onto the mean image). With
    ``free_bits=0`` it equals ``gaussian_kl(mu, logvar).mean()``."""
    if mu.shape != logvar.shape:
        raise ValueError(f"mu and logvar shapes differ: {tuple(mu.shape)} vs {tuple(logvar.shape)}")
    if not free_bits >= 0:
        raise ValueError(f"free_bits: expected a number >= 0, got {free_bits!r}")
    per_dimension = _kl_terms(mu, logvar).flatten(1).mean(dim=0)
    return per_dimension.clamp(min=free_bits).sum()


def _kl_terms(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """``KL(N(mu, exp(logvar)) || N(0, 1))`` of each element."""
    return -0.5 * (1 + logvar - mu.square() - logvar.exp())
