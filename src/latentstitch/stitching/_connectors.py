"""Connectors of multi-layer stitching (``stitch_layers``): the relative route (``RelativeConnector``: parallel
anchors only, a decoder fitted on the target network alone) and direct-matched affine layers."""

from __future__ import annotations

from typing import Any

import torch
from sklearn.base import clone
from torch import nn

from latentstitch._core.arrays import channels_as_rows
from latentstitch.relative import relative_projection
from latentstitch.stitching._least_squares import LeastSquares
from latentstitch.stitching._paired import as_layout
from latentstitch.stitching._procrustes import Procrustes

CONNECTORS = ("least_squares", "procrustes", "relative")


def rows_of(t: torch.Tensor) -> torch.Tensor:
    """Activations as (samples x positions, features) rows (``channels_as_rows``)."""
    return channels_as_rows(t, "activation")


class RelativeConnector(nn.Module):
    """``a -> rel(a, source_anchors) @ coef + intercept``, per position: the relative route between two layers.

    ``source_anchors`` (m, p): rows of the source network's activations of the anchor inputs; ``coef`` (m, q),
    ``intercept`` (q,): the target-side decoder from relative vectors to the target's activations. Feature maps are
    read per position and written back in the target's layout. Build with ``RelativeConnector.fit``.
    """

    def __init__(
        self,
        source_anchors: torch.Tensor,
        coef: torch.Tensor,
        intercept: torch.Tensor,
        *,
        similarity: str = "cosine",
        center: bool = True,
        **similarity_kwargs: Any,
    ):
        super().__init__()
        self.register_buffer("source_anchors", source_anchors.detach().clone())
        self.weight = nn.Parameter(coef.detach().clone())
        self.bias = nn.Parameter(intercept.detach().clone())
        self.similarity = similarity
        self.center = center
        self.similarity_kwargs = similarity_kwargs

    @classmethod
    def fit(
        cls,
        source_anchors: torch.Tensor,
        target_anchors: torch.Tensor,
        target: torch.Tensor,
        *,
        similarity: str = "cosine",
        center: bool = True,
        ridge: float = 1e-3,
        **similarity_kwargs: Any,
    ) -> RelativeConnector:
        """Fit the decoder on the target side only: ridge least squares from ``rel(target, target_anchors)`` to
        ``target`` (rows (n, q)); ``ridge`` is relative to the mean eigenvalue of the relative vectors' Gram
        matrix. The source enters only through its parallel anchors ``source_anchors`` (m, p)."""
        relative = relative_projection(target, target_anchors, similarity, center=center, **similarity_kwargs)
        scale = float(relative.double().pow(2).sum()) / relative.shape[1]
        decoder = LeastSquares(ridge=ridge * scale).fit(relative.double(), target.double())
        coef, intercept = (torch.as_tensor(v).to(target.dtype) for v in (decoder.coef_, decoder.intercept_))
        return cls(source_anchors, coef, intercept, similarity=similarity, center=center, **similarity_kwargs)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        rows = rows_of(a)
        if rows.shape[1] != self.source_anchors.shape[1]:
            raise ValueError(
                f"a: has {rows.shape[1]} features per position but the connector's anchors have "
                f"{self.source_anchors.shape[1]}"
            )
        r = relative_projection(
            rows, self.source_anchors.to(rows.dtype), self.similarity, center=self.center, **self.similarity_kwargs
        )
        return as_layout(r @ self.weight + self.bias, a)

    def extra_repr(self) -> str:
        m, q = self.weight.shape
        return f"anchors={m}, out_features={q}, similarity={self.similarity!r}, center={self.center}"


def direct_connector(spec: Any, source_rows: torch.Tensor, target_rows: torch.Tensor) -> nn.Module:
    """An affine layer (``nn.Linear``) from a name or an estimator, fitted on paired (rows, features) unless the
    estimator is already fitted."""
    if isinstance(spec, str):
        estimator = LeastSquares() if spec == "least_squares" else Procrustes()
    elif hasattr(spec, "coef_"):
        return spec.to_torch()
    else:
        estimator = clone(spec)
    return estimator.fit(source_rows.double(), target_rows.double()).to_torch()


def as_per_position(layer: nn.Module, ndim: int) -> nn.Module:
    """A Linear fitted on (rows, C) applied to (N, C, H, W) feature maps as a 1x1 convolution (a Linear already
    applies per token to (N, T, D) and per sample to (N, D))."""
    if ndim != 4 or not isinstance(layer, nn.Linear):
        return layer
    conv = nn.Conv2d(layer.in_features, layer.out_features, kernel_size=1).to(layer.weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(layer.weight[:, :, None, None])
        conv.bias.copy_(layer.bias)
    return conv
