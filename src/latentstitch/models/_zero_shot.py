"""Zero-shot stitching: the encoding side of one model feeding the decoding side of another, with no training."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class ZeroShotStitched(nn.Module):
    """``decoder_side.decode(encoder_side.encode(x))``: the relreps ``StitchingModule``.

    Zero-shot: nothing is fitted or trained between the two sides, which meet in a shared (relative) latent space.
    Not to be confused with ``latentstitch.stitching.StitchedModel`` (Dr. Frankenstein), which joins two networks
    at named inner layers through a fitted or trained stitching layer.

    Works for every model of ``latentstitch.models`` (classifiers, autoencoders, GCNs): the encoder side brings
    its encoder *and its anchors* (embedded by itself), the decoder side its head or decoder (with its own
    normalisation statistics). Extra arguments of ``forward`` go to ``encode`` (e.g. a graph's adjacency).
    Both sides must agree on the latent space: both relative with the same number of anchors, or both absolute
    with the same width.
    """

    def __init__(self, encoder_side: nn.Module, decoder_side: nn.Module):
        super().__init__()
        for name, side in (("encoder_side", encoder_side), ("decoder_side", decoder_side)):
            if not (hasattr(side, "encode") and hasattr(side, "decode")):
                raise TypeError(f"{name}: expected a model with encode() and decode(), got {type(side).__name__}")
        a, b = _latent_space(encoder_side), _latent_space(decoder_side)
        if None not in (a, b) and a != b:
            raise ValueError(
                f"decoder_side: cannot read encoder_side's latents: {a[0]} width {a[1]} vs {b[0]} width {b[1]}"
            )
        self.encoder_side = encoder_side
        self.decoder_side = decoder_side

    def encode(self, x: torch.Tensor, *args: Any) -> torch.Tensor:
        return self.encoder_side.encode(x, *args)

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        return self.decoder_side.decode(latents)

    def forward(self, x: torch.Tensor, *args: Any) -> torch.Tensor:
        return self.decode(self.encode(x, *args))


def _latent_space(model: nn.Module) -> tuple[str, int] | None:
    if not hasattr(model, "relative") or not hasattr(model, "latent_width"):
        return None
    return ("relative" if model.relative else "absolute", int(model.latent_width))
