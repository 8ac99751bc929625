"""Stitching layers and their algebra: ``LowRankStitch``, the affine map of any stitching layer, layers built from a
map, the linear path between two layers, and sparsification."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.params import check_nonnegative, check_number, check_positive_int
from latentstitch.stitching._lasso import SPARSITY_THRESHOLD


class LowRankStitch(nn.Module):
    """An affine stitching layer of rank at most ``rank``: ``x -> x W1 W2 + b`` (a bottleneck).

    ``w1`` (p, r), ``w2`` (r, q), ``bias`` (q,). Applied per feature with the convention of every stitching layer:
    on the channel dimension of (N, C, H, W) feature maps (a 1x1 convolution), on the last dimension of (N, D) and
    (N, T, D). Default initialisation as the reference code: orthogonal ``w1`` and ``w2``, zero bias.
    """

    def __init__(self, in_features: int, out_features: int, rank: int):
        super().__init__()
        p, q = check_positive_int(in_features, "in_features"), check_positive_int(out_features, "out_features")
        rank = check_positive_int(rank, "rank")
        if rank > min(p, q):
            raise ValueError(f"rank: expected at most min(in_features, out_features) = {min(p, q)}, got {rank}")
        self.w1 = nn.Parameter(torch.empty(p, rank))
        self.w2 = nn.Parameter(torch.empty(rank, q))
        self.bias = nn.Parameter(torch.zeros(q))
        self.reset_parameters()

    @property
    def rank(self) -> int:
        return self.w1.shape[1]

    def reset_parameters(self) -> None:
        nn.init.orthogonal_(self.w1)
        nn.init.orthogonal_(self.w2)
        nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = as_float_tensor(x, "x", finite=False)  # NaN propagates, as through any torch layer
        weight = (self.w1 @ self.w2).T
        if x.ndim == 4:
            return F.conv2d(x, weight[:, :, None, None], self.bias)
        return F.linear(x, weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.w1.shape[0]}, out_features={self.w2.shape[1]}, rank={self.rank}"


def affine_map(layer: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """``(coef (p, q), intercept (q,))`` of a stitching layer, so that it computes ``x @ coef + intercept`` per
    feature: a 1x1 ``nn.Conv2d``, an ``nn.Linear`` or a ``LowRankStitch``. Differentiable (shares the parameters)."""
    if isinstance(layer, LowRankStitch):
        return layer.w1 @ layer.w2, layer.bias
    if isinstance(layer, nn.Conv2d):
        if layer.kernel_size != (1, 1) or layer.groups != 1 or layer.stride != (1, 1) or layer.padding != (0, 0):
            raise ValueError(f"layer: a stitching convolution must be a plain 1x1 convolution, got {layer}")
        coef = layer.weight[:, :, 0, 0].T
    elif isinstance(layer, nn.Linear):
        coef = layer.weight.T
    else:
        raise TypeError(f"layer: expected a 1x1 Conv2d, a Linear or a LowRankStitch, got {type(layer).__name__}")
    intercept = layer.bias if layer.bias is not None else torch.zeros_like(coef[0])
    return coef, intercept


def layer_from_map(coef: torch.Tensor, intercept: torch.Tensor, feature_maps: bool) -> nn.Module:
    """A trainable layer computing ``x @ coef + intercept`` per feature: a 1x1 ``nn.Conv2d`` for (N, C, H, W)
    feature maps, an ``nn.Linear`` otherwise (token-wise on (N, T, D)). Same device and dtype as ``coef``."""
    p, q = coef.shape
    factory = {"device": coef.device, "dtype": coef.dtype}
    layer = nn.Conv2d(p, q, kernel_size=1, **factory) if feature_maps else nn.Linear(p, q, **factory)
    with torch.no_grad():
        layer.weight.copy_(coef.T.reshape(layer.weight.shape))
        layer.bias.copy_(intercept)
    return layer


def low_rank_from_map(coef: torch.Tensor, intercept: torch.Tensor, rank: int) -> LowRankStitch:
    """A ``LowRankStitch`` from a map, factored by its SVD ``coef = U S V^T``: ``w1 = U_r S_r^(1/2)``,
    ``w2 = S_r^(1/2) V_r^T``. Exact for a map of rank <= ``rank`` (a ``ReducedRank`` fit); any other map is
    truncated to its best rank-``rank`` approximation in Frobenius norm (not the least-squares optimum of that
    rank: fit ``ReducedRank(rank)`` for that)."""
    p, q = coef.shape
    layer = LowRankStitch(p, q, rank).to(device=coef.device, dtype=coef.dtype)
    u, s, vh = torch.linalg.svd(coef.detach(), full_matrices=False)
    root = s[:rank].sqrt()
    with torch.no_grad():
        layer.w1.copy_(u[:, :rank] * root)
        layer.w2.copy_(root[:, None] * vh[:rank])
        layer.bias.copy_(intercept)
    return layer


def interpolate_layers(first: nn.Module, second: nn.Module, weight: float) -> nn.Module:
    """The stitching layer with map ``weight * M1 + (1 - weight) * M2`` (and bias likewise): the linear path between
    two stitching layers of the same shape (the paper's mode-connectivity experiment). The result is a full layer
    (1x1 ``Conv2d`` if either is one, else ``Linear``); low-rank layers enter through their full matrix."""
    weight = check_number(weight, "weight")
    coef_1, intercept_1 = affine_map(first)
    coef_2, intercept_2 = affine_map(second)
    if coef_1.shape != coef_2.shape:
        raise ValueError(f"first, second: maps of shapes {tuple(coef_1.shape)} and {tuple(coef_2.shape)} differ")
    feature_maps = isinstance(first, nn.Conv2d) or isinstance(second, nn.Conv2d)
    with torch.no_grad():
        return layer_from_map(
            weight * coef_1 + (1 - weight) * coef_2, weight * intercept_1 + (1 - weight) * intercept_2, feature_maps
        )


def sparsify_layer(layer: nn.Module, threshold: float = SPARSITY_THRESHOLD) -> tuple[nn.Module, float]:
    """A copy of a full stitching layer with every matrix entry of absolute value below ``threshold`` set to zero,
    and its sparsity (the share of zero entries): the paper's sparsity measurement (Fig. 8, threshold 1e-4)."""
    threshold = check_nonnegative(threshold, "threshold")
    coef, intercept = affine_map(layer)
    with torch.no_grad():
        kept = coef.abs() >= threshold
        out = layer_from_map(coef * kept, intercept, isinstance(layer, nn.Conv2d))
    return out, float(1 - kept.double().mean())


def in_features(layer: nn.Module) -> int | None:
    if isinstance(layer, LowRankStitch):
        return layer.w1.shape[0]
    if isinstance(layer, nn.Conv2d):
        return layer.in_channels
    if isinstance(layer, nn.Linear):
        return layer.in_features
    return None
