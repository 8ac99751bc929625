"""Clusters for the alignment methods: principal axes, projections and cluster means around ``_core.kmeans`` (k-means
in torch, shared with the cascade's inverted lists).
"""

from __future__ import annotations

import torch

from latentstitch._core.numerics import matmul

#: Principal axes ``principal_axes`` keeps (the unpaired alignment runs its k-means there).
PRINCIPAL_DIMS = 64


def principal_axes(x: torch.Tensor, dims: int = PRINCIPAL_DIMS) -> torch.Tensor | None:
    """The rows' ``dims`` leading principal axes (d, dims), or None when the rows are no wider: k-means on the
    rows' coordinates there (``project``) costs the same at any width."""
    if x.shape[1] <= dims:
        return None
    centred = x - x.mean(dim=0)
    _, vectors = torch.linalg.eigh(matmul(centred.T, centred).double())
    return vectors[:, -dims:].to(x.dtype).contiguous()


def project(x: torch.Tensor, axes: torch.Tensor | None) -> torch.Tensor:
    """Coordinates of the rows of x (..., d) on ``axes`` (x itself when None)."""
    if axes is None:
        return x
    return matmul(x, axes) if x.dim() == 2 else torch.stack([matmul(block, axes) for block in x])


def cluster_means(x: torch.Tensor, reduced: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    """Means of the rows of x over the clusters of their reduced rows' nearest centroids (an empty cluster keeps
    the centroid's nearest row)."""
    if reduced is x:
        return centres
    distances = (centres * centres).sum(dim=1)[None] - 2 * matmul(reduced, centres.T)
    labels = distances.argmin(dim=1)
    sums = torch.zeros(centres.shape[0], x.shape[1], dtype=x.dtype, device=x.device).index_add_(0, labels, x)
    counts = torch.bincount(labels, minlength=centres.shape[0])[:, None]
    nearest = x[distances.argmin(dim=0)]
    return torch.where(counts > 0, sums / counts.clamp_min(1), nearest)
