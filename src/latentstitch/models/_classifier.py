"""Classifiers whose latent space is absolute or relative, with anchors re-embedded by the current encoder."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.errors import model_input_errors
from latentstitch._core.params import check_bool, check_choice, check_positive_int
from latentstitch.relative import RelativeProjection, RobustRelativeProjection

#: Relative projections a model can use: cosine (Moschella et al.) or the robust, batch-normalised cosine
#: (García-Castellanos et al.).
PROJECTIONS = ("cosine", "robust")


class AnchorEmbeddings(nn.Module):
    """Raw anchor inputs, and their embeddings by an encoder: re-computed under ``torch.no_grad()`` every
    ``refresh`` training forwards and cached in between, always fresh in eval mode.

    The official relreps models re-embed every forward (``refresh=1``); the robust relative transform code
    every 60 batches. Embedding happens in the encoder's current mode, as in both official codes (in train mode,
    batch-norm layers see the anchors as a batch and update their running statistics with them). The cache is
    dropped whenever ``train()``/``eval()`` is called or the state dict is loaded, so it never outlives weights.
    """

    def __init__(self, anchor_inputs: torch.Tensor, refresh: int = 1):
        super().__init__()
        anchor_inputs = as_float_tensor(anchor_inputs, "anchor_inputs", min_rows=1)
        self.register_buffer("inputs", anchor_inputs.detach().clone())
        self.refresh = check_positive_int(refresh, "anchor_refresh")
        self._cache: torch.Tensor | None = None
        self._uses = 0

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def forward(self, encoder: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if not self.training:
            with torch.no_grad():
                return encoder(self.inputs)
        if self._cache is None or self._uses >= self.refresh or self._cache.device != self.inputs.device:
            with torch.no_grad(), model_input_errors(self.inputs, "anchor_inputs", "the encoder"):
                self._cache = encoder(self.inputs)
            self._uses = 0
        self._uses += 1
        return self._cache

    def clear(self) -> None:
        self._cache = None

    def train(self, mode: bool = True) -> AnchorEmbeddings:
        self.clear()
        return super().train(mode)

    def _load_from_state_dict(self, *args, **kwargs):
        self.clear()
        super()._load_from_state_dict(*args, **kwargs)


class LatentClassifier(nn.Module):
    """``encoder -> latent -> head``, where the latent is the encoder output (absolute) or its relative
    representation with respect to anchors embedded by the *same* encoder (relative).

    The anchors are raw inputs held as a buffer and re-embedded with the current encoder under
    ``torch.no_grad()`` (see ``AnchorEmbeddings`` for the refresh period), as the official relreps code does,
    so they track the encoder during training. The head is ``LayerNorm(width) -> Linear(width, num_classes)``
    unless given, width = latent_dim (absolute) or the number of anchors (relative).

    Parameters
    ----------
    encoder : nn.Module
        Maps inputs to (n, latent_dim) embeddings (``mlp_encoder``, ``cnn_encoder``, a frozen backbone...).
    latent_dim : int
        Width of the encoder output.
    num_classes : int
    anchor_inputs : tensor, optional
        Raw anchor inputs (same layout as ``x``); None for an absolute latent space.
    projection : {"cosine", "robust"}
        ``RelativeProjection`` (cosine) or ``RobustRelativeProjection`` (per-feature batch standardisation shared
        by samples and anchors, then cosine; adds invariance to per-feature rescaling and permutation).
    center : bool
        Cosine projection only: subtract the anchors' mean first.
    anchor_refresh : int
        Re-embed the anchors every this many training forwards (1: every step).
    head : nn.Module, optional
        Replaces the default head; reads (n, width) latents.

    Stitching protocol: ``encode(x)`` (encoder *and its anchors*) of one model, ``decode`` of another
    (``ZeroShotStitched``).
    """

    def __init__(
        self,
        encoder: nn.Module,
        latent_dim: int,
        num_classes: int,
        *,
        anchor_inputs: torch.Tensor | None = None,
        projection: str = "cosine",
        center: bool = False,
        anchor_refresh: int = 1,
        head: nn.Module | None = None,
    ):
        super().__init__()
        self.encoder = encoder
        self.latent_dim = check_positive_int(latent_dim, "latent_dim")
        self.relative = anchor_inputs is not None
        self.projection_kind = check_choice(projection, "projection", PROJECTIONS)
        check_bool(center, "center")
        if self.relative:
            self.anchors = AnchorEmbeddings(anchor_inputs, anchor_refresh)
            if projection == "robust":
                if center:
                    raise ValueError("center: the robust projection already centres with batch statistics")
                self.projection = RobustRelativeProjection(latent_dim, num_anchors=len(self.anchors))
            else:
                self.projection = RelativeProjection("cosine", num_anchors=len(self.anchors), center=center)
        self.latent_width = len(self.anchors) if self.relative else self.latent_dim
        if head is None:
            num_classes = check_positive_int(num_classes, "num_classes")
            head = nn.Sequential(nn.LayerNorm(self.latent_width), nn.Linear(self.latent_width, num_classes))
        self.head = head

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The encoder output (absolute embeddings), with gradient."""
        with model_input_errors(x, "x", "the encoder"):
            return self.encoder(x)

    def anchor_embeddings(self) -> torch.Tensor:
        """The anchors embedded by the current encoder (no gradient)."""
        if not self.relative:
            raise ValueError("anchor_embeddings: this model has an absolute latent space (no anchor_inputs)")
        return self.anchors(self.encoder)

    def project(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Embeddings -> the latents the head reads: unchanged (absolute) or relative to the anchors."""
        if not self.relative:
            return embeddings
        return self.projection(embeddings, self.anchor_embeddings())

    def latents(self, x: torch.Tensor) -> torch.Tensor:
        """The representation handed to the head: absolute encoder output or relative vector."""
        return self.project(self.embed(x))

    encode = latents

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> logits (the head)."""
        return self.head(latents)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.latents(x))
