"""Classification heads on frozen encoder embeddings: the relreps stitching-head recipe, relative and absolute
(``experiments/sec:model-reusability-*`` notebooks of ``lucmos/relreps``)."""

from __future__ import annotations

import torch
from torch import nn

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.params import check_bool, check_choice, check_positive, check_positive_int
from latentstitch.relative import RelativeProjection

#: Head recipes: "text" (two SiLU blocks and a final ReLU, monolingual/multilingual text stitching) and "vision"
#: (one Tanh block, timm image encoders).
HEAD_RECIPES = ("text", "vision")


class BatchInstanceNorm(nn.Module):
    """Standardise every feature across the *batch* axis: ``(x - mean_batch) / sqrt(var_batch + eps)``.

    The relreps heads' ``InstanceNorm1d`` applied to the transposed (features, batch) matrix: no affine
    parameters and no running statistics, so the output depends on the batch in eval mode too (score test sets
    in batches, as the official notebooks do). Biased variance; needs at least 2 samples.
    """

    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = check_positive(eps, "eps")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = as_float_tensor(x, "x", finite=False)  # NaN propagates, as through any torch layer
        if x.ndim != 2 or x.shape[0] < 2:
            raise ValueError(f"x: expected a (batch >= 2, features) tensor, got shape {tuple(x.shape)}")
        mean = x.mean(dim=0)
        var = x.var(dim=0, unbiased=False)
        return (x - mean) * torch.rsqrt(var + self.eps)


def stitching_head(width: int, num_classes: int, recipe: str = "text") -> nn.Sequential:
    """The relreps head on (relative) latents of ``width`` features.

    ``"text"``: ``LayerNorm -> Linear(w, w) -> SiLU -> BatchInstanceNorm -> Linear(w, w) -> SiLU ->
    BatchInstanceNorm -> Linear(w, C) -> ReLU`` (the official text head ends with a ReLU on the logits).
    ``"vision"``: ``LayerNorm -> Linear(w, w) -> Tanh -> BatchInstanceNorm -> Linear(w, C)``.
    Official training: Adam, batch 32; lr 1e-3 (text; 1e-4 TREC/DBpedia) for 3-5 epochs, 1e-4 for 10-20 (vision).
    """
    width = check_positive_int(width, "width")
    num_classes = check_positive_int(num_classes, "num_classes")
    check_choice(recipe, "recipe", HEAD_RECIPES)
    if recipe == "vision":
        return nn.Sequential(
            nn.LayerNorm(width), nn.Linear(width, width), nn.Tanh(), BatchInstanceNorm(), nn.Linear(width, num_classes)
        )
    return nn.Sequential(
        nn.LayerNorm(width),
        nn.Linear(width, width),
        nn.SiLU(),
        BatchInstanceNorm(),
        nn.Linear(width, width),
        nn.SiLU(),
        BatchInstanceNorm(),
        nn.Linear(width, num_classes),
        nn.ReLU(),
    )


class RelativeHead(nn.Module):
    """A classifier on frozen embeddings through their relative representation (the relreps stitching setup).

    ``embeddings -> cosine similarities to the anchor embeddings -> L2-normalised (|A|,) vector ->
    stitching_head``. The anchor embeddings are fixed (the encoder is frozen), held as a buffer.

    Zero-shot stitching across encoders: a head trained on encoder A's embeddings and anchors reads encoder B
    through B's own embeddings of the *parallel* anchors, ``head_a(embeddings_b, anchors=anchors_b)``; the
    latent dimensions of A and B may differ.

    Parameters
    ----------
    anchors : (|A|, d) tensor
        The anchor samples embedded by the frozen encoder (relreps: 768 for transformers).
    num_classes : int
    recipe : {"text", "vision"}
        See ``stitching_head``.
    center : bool
        Subtract the mean of the anchors in use before the cosine (the held anchors', or those passed to
        ``forward`` when reading another encoder: each space is centred on its own anchors). Adds invariance to
        translations of the embedding space. Off by default, as in the official code.
    """

    relative = True

    def __init__(self, anchors: torch.Tensor, num_classes: int, *, recipe: str = "text", center: bool = False):
        super().__init__()
        anchors = as_float_tensor(anchors, "anchors", ndim=2, min_rows=1)
        self.center = check_bool(center, "center")
        self.projection = RelativeProjection("cosine", anchors=anchors, output_norm="l2", center=center)
        self.latent_width = anchors.shape[0]
        self.head = stitching_head(self.latent_width, num_classes, recipe)

    def encode(self, embeddings: torch.Tensor, anchors: torch.Tensor | None = None) -> torch.Tensor:
        """The L2-normalised relative vectors of ``embeddings`` (to ``anchors`` if given, else the held ones)."""
        return self.projection(embeddings, anchors)

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        return self.head(latents)

    def forward(self, embeddings: torch.Tensor, anchors: torch.Tensor | None = None) -> torch.Tensor:
        return self.decode(self.encode(embeddings, anchors))


class AbsoluteHead(nn.Module):
    """The same head on the absolute embeddings (the baseline: it cannot read another encoder's space)."""

    relative = False

    def __init__(self, in_features: int, num_classes: int, *, recipe: str = "text"):
        super().__init__()
        self.latent_width = check_positive_int(in_features, "in_features")
        self.head = stitching_head(self.latent_width, num_classes, recipe)

    def encode(self, embeddings: torch.Tensor) -> torch.Tensor:
        return embeddings

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        return self.head(latents)

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        return self.head(as_float_tensor(embeddings, "embeddings", ndim=2, finite=False))
