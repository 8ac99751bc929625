"""Convolutional autoencoders and VAEs with absolute or relative latent spaces (Moschella et al., ICLR 2023;
``lucmos/relreps`` ``modules/ae.py``, ``vae.py``, ``rel_ae.py``, ``rel_vae.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.errors import model_input_errors
from latentstitch._core.params import check_bool, check_choice, check_nonnegative, check_positive_int
from latentstitch.losses import calibrated_reconstruction_loss, free_bits_kl, gaussian_kl
from latentstitch.models._blocks import (
    DEFAULT_CHANNELS,
    check_image_shape,
    conv_decoder,
    conv_encoder,
    encoder_output_shape,
    scaled_channels,
)
from latentstitch.models._classifier import AnchorEmbeddings
from latentstitch.relative import RelativeProjection

#: Reconstruction losses: the sigma-VAE "calibrated" Gaussian likelihood, or mean squared error.
RECONSTRUCTION_LOSSES = ("calibrated", "mse")


@dataclass
class AutoencoderOutput:
    """What ``ConvAutoencoder.forward`` returns. ``latents`` is what ``encode`` gives (the stitchable latent:
    relative vector or absolute code); ``mu``/``logvar`` are the Gaussian posterior of a VAE, else None."""

    reconstruction: torch.Tensor
    latents: torch.Tensor
    mu: torch.Tensor | None = None
    logvar: torch.Tensor | None = None


class ConvAutoencoder(nn.Module):
    """The relreps image autoencoder (AE) or VAE, with an absolute or a relative latent space.

    Encoder: ``[Conv2d(3x3, stride 2, pad 1) -> BatchNorm2d -> GELU]`` per entry of ``channels`` (default
    (32, 64, 128, 256)), flattened. Decoder: the mirror image, ``ConvTranspose2d -> BatchNorm2d -> GELU`` per
    level, then ``Conv2d(3x3) -> Sigmoid``; inputs and outputs in [0, 1], no input normalisation.

    - absolute AE: flattened map -> ``Linear(latent_dim) -> GELU`` = latent; decoder input ``Linear -> GELU``.
    - absolute VAE: ``fc_mu``, ``fc_var``: ``Linear(latent_dim)`` on the flattened map; latent = sample.
    - relative AE: the encoder's last GELU is removed; the flattened map's cosine similarities to the anchors
      (embedded by the current encoder without gradient) are the latent. The decoder side normalises them,
      ``LayerNorm(|A|)``, then ``Linear(|A|, map) -> GELU`` into the conv decoder.
    - relative VAE: as the relative AE, with ``fc_mu``, ``fc_var``: ``Linear(|A|, |A|)`` on the normalised
      vector, on the decoder side.

    Losses (``loss``), as in the official runs: the sigma-VAE calibrated likelihood (``"calibrated"``,
    ``calibrated_reconstruction_loss``, plus the batch *sum* of the KL for a VAE) for the relative models and the
    absolute AE; ``"mse"`` (mean squared error plus ``kl_weight`` = 0.025 times the batch-mean KL) for the
    absolute VAE. A VAE samples its latent in train mode and uses the mean in eval mode (the official code also
    samples at evaluation; the mean makes evaluation and stitching deterministic).

    Parameters
    ----------
    image_shape : (C, H, W)
        Input size, e.g. (1, 28, 28) for MNIST/Fashion-MNIST, (3, 32, 32) for CIFAR.
    latent_dim : int
        Width of the absolute latent (the paper's runs: 256). Unused by relative models (width = |A|).
    channels : sequence of int
        Encoder channels per level.
    width : float
        Multiplier of ``channels`` (e.g. 0.25 for a quick CPU model of the same architecture).
    variational : bool
        VAE instead of AE.
    anchor_inputs : (|A|, C, H, W) tensor, optional
        Anchor images (the paper: 500); None for an absolute latent space.
    anchor_refresh : int
        Re-embed the anchors every this many training forwards (relreps: 1).
    loss : {"calibrated", "mse"}, optional
        Default: "mse" for the absolute VAE, "calibrated" otherwise.
    kl_weight : float, optional
        Default: 0.025 with "mse", 1.0 with "calibrated".
    free_bits : float
        With the "mse" loss, a floor in nats on each latent dimension's batch-mean KL (``free_bits_kl``; 0: the
        official loss). The official loss lets the KL switch off every dimension of the absolute VAE in a short
        training (the decoder then draws the mean image); a floor of a fraction of a nat keeps the latent in use.

    Stitching (``ZeroShotStitched(model_i, model_j)``): ``encode`` of run i (encoder and anchors), ``decode`` of run j
    (its LayerNorm, VAE layers and decoder).
    """

    def __init__(
        self,
        image_shape: Sequence[int] = (1, 28, 28),
        *,
        latent_dim: int = 256,
        channels: Sequence[int] = DEFAULT_CHANNELS,
        width: float = 1.0,
        variational: bool = False,
        anchor_inputs: torch.Tensor | None = None,
        anchor_refresh: int = 1,
        loss: str | None = None,
        kl_weight: float | None = None,
        free_bits: float = 0.0,
    ):
        super().__init__()
        self.image_shape = check_image_shape(image_shape)
        self.channels = scaled_channels(channels, width)
        self.variational = check_bool(variational, "variational")
        self.relative = anchor_inputs is not None
        check_positive_int(anchor_refresh, "anchor_refresh")
        if kl_weight is not None:
            check_nonnegative(kl_weight, "kl_weight")
        self.loss_kind = check_choice(
            loss or ("mse" if variational and not self.relative else "calibrated"), "loss", RECONSTRUCTION_LOSSES
        )
        self.kl_weight = kl_weight if kl_weight is not None else (0.025 if self.loss_kind == "mse" else 1.0)
        self.free_bits = check_nonnegative(free_bits, "free_bits")
        if self.free_bits and self.loss_kind != "mse":
            raise ValueError(
                'free_bits: applies to the "mse" loss (the absolute VAE\'s); the calibrated loss sums the KL'
            )
        self.map_shape = encoder_output_shape(self.image_shape, self.channels)
        map_size = math.prod(self.map_shape)

        self.encoder = conv_encoder(self.image_shape[0], self.channels, last_activation=not self.relative)
        if self.relative:
            self.anchors = AnchorEmbeddings(anchor_inputs, anchor_refresh)
            if tuple(self.anchors.inputs.shape[1:]) != self.image_shape:
                raise ValueError(
                    f"anchor_inputs: expected images of shape {self.image_shape}, "
                    f"got {tuple(self.anchors.inputs.shape[1:])}"
                )
            self.latent_width = len(self.anchors)
            self.projection = RelativeProjection("cosine", num_anchors=self.latent_width)
            self.norm = nn.LayerNorm(self.latent_width)
            code_width = self.latent_width
        else:
            self.latent_width = check_positive_int(latent_dim, "latent_dim")
            if not variational:
                self.encoder_out = nn.Sequential(nn.Linear(map_size, self.latent_width), nn.GELU())
            code_width = self.latent_width
        if variational:
            posterior_in = code_width if self.relative else map_size
            self.fc_mu = nn.Linear(posterior_in, code_width)
            self.fc_var = nn.Linear(posterior_in, code_width)
        self.decoder_in = nn.Sequential(nn.Linear(code_width, map_size), nn.GELU())
        self.decoder = conv_decoder(self.channels, self.image_shape)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The flattened output of the convolutional encoder."""
        x = as_float_tensor(x, "x", ndim=4, finite=False)
        with model_input_errors(x, "x", type(self).__name__):
            return self.encoder(x).flatten(1)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Images -> the stitchable latent: relative vector, absolute code, or (VAE) sampled absolute code."""
        return self._encode(x)[0]

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> reconstructed images in [0, 1]."""
        return self._decode(latents)[0]

    def forward(self, x: torch.Tensor) -> AutoencoderOutput:
        latents, mu, logvar = self._encode(x)
        reconstruction, mu_rel, logvar_rel = self._decode(latents)
        if self.relative:
            mu, logvar = mu_rel, logvar_rel
        return AutoencoderOutput(reconstruction, latents, mu, logvar)

    def loss(self, x: torch.Tensor, output: AutoencoderOutput | None = None) -> dict[str, torch.Tensor]:
        """The training loss of ``x`` (see the class notes) with the plain MSE and, for a VAE, the mean KL."""
        output = self(x) if output is None else output
        mse = F.mse_loss(output.reconstruction, x)
        if self.loss_kind == "calibrated":
            loss = calibrated_reconstruction_loss(output.reconstruction, x)
        else:
            loss = mse
        result = {"mse": mse}
        if self.variational:
            kl = gaussian_kl(output.mu, output.logvar)
            if self.loss_kind == "calibrated":
                loss = loss + self.kl_weight * kl.sum()
            elif self.free_bits:
                loss = loss + self.kl_weight * free_bits_kl(output.mu, output.logvar, self.free_bits)
            else:
                loss = loss + self.kl_weight * kl.mean()
            result["kl"] = kl.mean()
        return {"loss": loss, **result}

    def _encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        h = self.embed(x)
        if self.relative:
            return self.projection(h, self.anchors(self.embed)), None, None
        if not self.variational:
            return self.encoder_out(h), None, None
        mu, logvar = self.fc_mu(h), self.fc_var(h)
        return self._sample(mu, logvar), mu, logvar

    def _decode(self, latents: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        mu = logvar = None
        code = latents
        if self.relative:
            code = self.norm(latents)
            if self.variational:
                mu, logvar = self.fc_mu(code), self.fc_var(code)
                code = self._sample(mu, logvar)
        with model_input_errors(latents, "latents", "the decoder"):
            images = self.decoder(self.decoder_in(code).view(-1, *self.map_shape))
        return images, mu, logvar

    def _sample(self, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return mu
        return mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)


def reconstruction_objective(model: ConvAutoencoder, batch: tuple | torch.Tensor) -> dict[str, torch.Tensor]:
    """``fit``'s loss function for autoencoders: ``model.loss(x)`` of a batch ``x`` or ``(x, ...)``."""
    x = batch[0] if isinstance(batch, (tuple, list)) else batch
    return model.loss(x)
