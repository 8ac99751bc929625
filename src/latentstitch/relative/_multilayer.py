"""Relative representations built from several layers of one encoder.

Each layer l gives its own relative space ``sim(h_l(x), h_l(a_j))`` against the *same* anchor inputs a_j embedded
at that layer; the spaces are standardised over the anchors and combined (``latentstitch.relative._aggregation``:
concatenation or sum here, learned aggregations in ``MultiLayerRelativeProjection``). Two encoders with different
depths and widths can be compared or stitched through such a representation as long as they use parallel anchors
and the same number of layers (pick, e.g., the same relative depths).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_width, match_reference, wrap_like
from latentstitch._core.params import check_positive_int
from latentstitch.relative._aggregation import SpaceAggregation, aggregate_spaces
from latentstitch.relative._projection import relative_projection
from latentstitch.relative._similarities import get_similarity


def _layer_spaces(
    layers: Sequence[Any], anchors: Sequence[Any], similarity: str, center: bool, options: dict[str, Any]
) -> tuple[list[torch.Tensor], torch.Tensor]:
    if isinstance(layers, (torch.Tensor,)) or len(layers) == 0:
        raise ValueError("layers: expected a non-empty list of (n, d_l) arrays, one per layer")
    if len(anchors) != len(layers):
        raise ValueError(f"anchors: expected one (m, d_l) array per layer ({len(layers)}), got {len(anchors)}")
    spaces = []
    first = None
    for index, (x, a) in enumerate(zip(layers, anchors, strict=True)):
        xt = as_float_tensor(x, f"layers[{index}]", ndim=2, finite=False)
        at = as_float_tensor(a, f"anchors[{index}]", ndim=2, min_rows=1)
        check_same_width(xt, at, f"layers[{index}]", f"anchors[{index}]")
        if first is None:
            first = xt
        elif xt.shape[0] != first.shape[0] or at.shape[0] != spaces[0].shape[1]:
            raise ValueError(
                f"layers[{index}], anchors[{index}]: every layer needs the same samples ({first.shape[0]}) and the "
                f"same anchors ({spaces[0].shape[1]}), got {xt.shape[0]} and {at.shape[0]}"
            )
        at = match_reference(at, xt, f"anchors[{index}]", f"layers[{index}]")
        spaces.append(relative_projection(xt, at, similarity, center=center, **options))
    return spaces, first


def multilayer_relative_projection(
    layers: Sequence[ArrayLike],
    anchors: Sequence[ArrayLike],
    similarity: str = "cosine",
    aggregation: str = "concat",
    *,
    center: bool = False,
    **similarity_kwargs: Any,
) -> ArrayLike:
    """The relative representation of one encoder built from several of its layers.

    Parameters
    ----------
    layers : list of (n, d_l) arrays or tensors
        The samples' embeddings at each layer (e.g. ``encoder.encode(texts, layers=True)``, a subset of it, or
        ``stitching.get_activations`` pooled to vectors).
    anchors : list of (m, d_l)
        The same anchor inputs embedded at each layer.
    similarity, center, **similarity_kwargs
        As in ``relative_projection``, for every layer.
    aggregation : {"concat", "sum"}
        Standardised spaces concatenated ((n, L m)) or summed ((n, m)).

    Returns
    -------
    Of the first layer's type. Invariant to what the similarity is invariant to applied *independently* at each
    layer (a different rotation per layer, say), and, through the per-sample standardisation, to an isotropic
    rescaling per layer for the homogeneous similarities.
    """
    spaces, _ = _layer_spaces(layers, anchors, get_similarity(similarity).name, center, similarity_kwargs)
    return wrap_like(aggregate_spaces(spaces, aggregation), layers[0])


class MultiLayerRelativeProjection(nn.Module):
    """Multi-layer relative representation as a layer: ``forward(layers, anchors)`` with lists of per-layer
    tensors (anchors held as buffers when given at construction), then a learned ``SpaceAggregation``.

    Parameters
    ----------
    num_layers, num_anchors : int
    similarity : str
    aggregation : {"concat", "sum", "weighted", "mlp", "attention"}
    anchors : list of (m, d_l) tensors, optional
    center : bool
    """

    def __init__(
        self,
        num_layers: int,
        num_anchors: int,
        similarity: str = "cosine",
        aggregation: str = "concat",
        *,
        anchors: Sequence[torch.Tensor] | None = None,
        center: bool = False,
        **similarity_kwargs: Any,
    ):
        super().__init__()
        num_layers = check_positive_int(num_layers, "num_layers")
        self.similarity = get_similarity(similarity).name
        self.center = center
        self.similarity_kwargs = similarity_kwargs
        self.aggregate = SpaceAggregation(num_anchors, num_layers, aggregation)
        self.held = None
        if anchors is not None:
            if len(anchors) != num_layers:
                raise ValueError(
                    f"anchors: expected {num_layers} arrays, one per layer (num_layers={num_layers}), "
                    f"got {len(anchors)}"
                )
            self.held = nn.ParameterList(
                nn.Parameter(as_float_tensor(a, f"anchors[{i}]", ndim=2).detach().clone(), requires_grad=False)
                for i, a in enumerate(anchors)
            )

    @property
    def out_features(self) -> int:
        return self.aggregate.out_features

    def forward(self, layers: Sequence[torch.Tensor], anchors: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        if anchors is None:
            if self.held is None:
                raise ValueError("anchors: none given to forward() and none held")
            anchors = list(self.held)
        spaces, _ = _layer_spaces(layers, anchors, self.similarity, self.center, self.similarity_kwargs)
        return self.aggregate(spaces)
