"""Streaming direct matching: fit a stitcher on paired activations of two models, chunk by chunk."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from latentstitch.stitching._activations import iter_activations
from latentstitch.stitching._hooks import resolve_layer


def fit_direct(
    stitcher: Any,
    model_a: nn.Module,
    model_b: nn.Module,
    layer_a: str,
    layer_b: str,
    data: Any,
    *,
    batch_size: int = 256,
    downsample: int | Sequence[int] | None = None,
    chunk_elements: int = 1 << 23,
    progress: Any = False,
) -> Any:
    """Fit a direct-matching stitcher from ``model_a``'s ``layer_a`` to ``model_b``'s ``layer_b`` over ``data``.

    Both models see every batch once (in eval mode, without gradient); paired activations are gathered into chunks
    of about ``chunk_elements`` values and handed to ``stitcher.partial_fit``, so memory stays bounded whatever the
    dataset size. The estimator is reset first (a fresh fit); it is returned fitted. Any estimator of
    ``latentstitch.stitching`` with ``partial_fit`` works (``LeastSquares``, ``Procrustes``, ``ReducedRank``,
    ``SparseLasso``); the closed-form ones give exactly the one-shot fit on all activations.
    """
    if not hasattr(stitcher, "partial_fit"):
        raise TypeError(f"stitcher: expected an estimator with partial_fit, got {type(stitcher).__name__}")
    resolve_layer(model_a, layer_a, "layer_a")
    resolve_layer(model_b, layer_b, "layer_b")
    for name in [k for k in vars(stitcher) if k.endswith("_") and not k.startswith("_")]:
        delattr(stitcher, name)
    pending: list[tuple[torch.Tensor, torch.Tensor]] = []
    elements = 0
    for (acts_a, acts_b), _ in iter_activations(
        [model_a, model_b],
        [[layer_a], [layer_b]],
        data,
        batch_size=batch_size,
        downsample=downsample,
        progress=progress,
        description=f"direct matching {layer_a} -> {layer_b}",
    ):
        pending.append((acts_a[layer_a], acts_b[layer_b]))
        elements += acts_a[layer_a].numel() + acts_b[layer_b].numel()
        if elements >= chunk_elements:
            stitcher.partial_fit(torch.cat([a for a, _ in pending]), torch.cat([b for _, b in pending]))
            pending, elements = [], 0
    if pending:
        stitcher.partial_fit(torch.cat([a for a, _ in pending]), torch.cat([b for _, b in pending]))
    if not hasattr(stitcher, "coef_"):
        raise ValueError("data: holds no samples")
    return stitcher
