"""Combining several relative spaces of the same anchors into one representation.

Two uses share this: the *product of invariances* (Cannistraci et al., "From Bricks to Bridges: Product of
Invariances to Enhance Latent Space Communication", ICLR 2024), where the spaces come from different similarity
functions of one latent space, and *multi-layer* relative representations, where they come from several layers of
one encoder. Each space is an (n, m) matrix (n samples, m anchors); every one is first standardised over its
anchors (a LayerNorm over the m similarities of each sample), so spaces with different units (cosines in [-1, 1],
Euclidean distances in the space's units) enter on an equal footing. Then (the latentis reference,
``latentis/methods/bricks_to_bridges.py``):

- ``concat``: concatenation, (n, S m);
- ``sum``: the sum, (n, m);
- ``weighted``: a learned softmax-weighted sum, (n, m);
- ``mlp``: each space through its own ``Linear(m, m) -> Tanh``, then summed (latentis' non-linear sum), (n, m);
- ``attention``: one-head self-attention across the S spaces of each sample, then summed, (n, m).

``concat`` and ``sum`` have no parameters (the frozen-embedding functions use them); in the module every
LayerNorm also has learned affine parameters, initialised to the identity.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from latentstitch._core.errors import model_input_errors
from latentstitch._core.params import check_choice, check_positive_int

AGGREGATIONS = ("concat", "sum", "weighted", "mlp", "attention")
FROZEN_AGGREGATIONS = ("concat", "sum")


def standardize_rows(r: torch.Tensor) -> torch.Tensor:
    """Each row minus its mean, divided by its (population) standard deviation: a LayerNorm without parameters and
    without epsilon, so it is exactly invariant to a positive rescaling of the row. A constant row becomes zeros."""
    centred = r - r.mean(dim=1, keepdim=True)
    variance = centred.pow(2).mean(dim=1, keepdim=True)
    return centred * torch.rsqrt(variance.clamp_min(torch.finfo(r.dtype).tiny))


def check_spaces(spaces: Sequence[torch.Tensor], name: str = "spaces") -> None:
    if len(spaces) == 0:
        raise ValueError(f"{name}: expected at least one relative space")
    shapes = {tuple(s.shape) for s in spaces}
    if len(shapes) != 1:
        raise ValueError(f"{name}: every relative space must have the same (samples, anchors) shape, got {shapes}")


def aggregate_spaces(spaces: Sequence[torch.Tensor], aggregation: str = "concat") -> torch.Tensor:
    """The parameter-free aggregations: each space standardised over its anchors, then concatenated or summed."""
    check_choice(aggregation, "aggregation", FROZEN_AGGREGATIONS)
    check_spaces(spaces)
    normalised = [standardize_rows(s) for s in spaces]
    return torch.cat(normalised, dim=1) if aggregation == "concat" else torch.stack(normalised).sum(dim=0)


class SpaceAggregation(nn.Module):
    """Learned aggregation of ``num_spaces`` relative spaces of ``num_anchors`` anchors (see the module docstring).

    ``forward(spaces)`` takes a sequence of (n, num_anchors) tensors and returns (n, out_features).
    """

    def __init__(self, num_anchors: int, num_spaces: int, aggregation: str = "concat"):
        super().__init__()
        self.num_anchors = check_positive_int(num_anchors, "num_anchors")
        self.num_spaces = check_positive_int(num_spaces, "num_spaces")
        self.aggregation = check_choice(aggregation, "aggregation", AGGREGATIONS)
        m = self.num_anchors
        # eps far below any variance of a relative vector, so that at initialisation the LayerNorms equal
        # ``standardize_rows`` (the frozen aggregation) to rounding
        self.norms = nn.ModuleList(nn.LayerNorm(m, eps=1e-12) for _ in range(self.num_spaces))
        self.weights = nn.Parameter(torch.zeros(self.num_spaces)) if aggregation == "weighted" else None
        self.maps = (
            nn.ModuleList(nn.Sequential(nn.Linear(m, m), nn.Tanh()) for _ in range(self.num_spaces))
            if aggregation == "mlp"
            else None
        )
        self.attention = nn.MultiheadAttention(m, num_heads=1, batch_first=True) if aggregation == "attention" else None

    @property
    def out_features(self) -> int:
        return self.num_anchors * (self.num_spaces if self.aggregation == "concat" else 1)

    def forward(self, spaces: Sequence[torch.Tensor]) -> torch.Tensor:
        check_spaces(spaces)
        if len(spaces) != self.num_spaces or spaces[0].shape[1] != self.num_anchors:
            raise ValueError(
                f"spaces: expected {self.num_spaces} spaces of {self.num_anchors} anchors, got {len(spaces)} of "
                f"{spaces[0].shape[1]}"
            )
        with model_input_errors(spaces[0], "spaces", "SpaceAggregation"):
            return self._aggregate(spaces)

    def _aggregate(self, spaces: Sequence[torch.Tensor]) -> torch.Tensor:
        normalised = [norm(space) for norm, space in zip(self.norms, spaces, strict=True)]
        if self.aggregation == "concat":
            return torch.cat(normalised, dim=1)
        if self.aggregation == "sum":
            return torch.stack(normalised).sum(dim=0)
        if self.aggregation == "weighted":
            return torch.einsum("snm,s->nm", torch.stack(normalised), torch.softmax(self.weights, dim=0))
        if self.aggregation == "mlp":
            return torch.stack([f(s) for f, s in zip(self.maps, normalised, strict=True)]).sum(dim=0)
        stacked = torch.stack(normalised, dim=1)  # (n, S, m): attention across the spaces of each sample
        attended, _ = self.attention(stacked, stacked, stacked, need_weights=False)
        return attended.sum(dim=1)

    def extra_repr(self) -> str:
        return f"num_anchors={self.num_anchors}, num_spaces={self.num_spaces}, aggregation={self.aggregation!r}"
