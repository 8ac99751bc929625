"""Topological densification (Hofer et al., ICML 2020): pull the 0-dimensional persistence death times of
class-pure mini-batches towards a target scale ``beta``.

The 0-dimensional Vietoris-Rips persistence of a point cloud has one finite bar per merge of two connected
components, born at 0 and dying at the length of the edge that merges them: the death times are exactly the edge
lengths of a Euclidean minimum spanning tree. So the tree is found on detached distances (Prim's algorithm,
batched over sub-batches, in torch on the points' device: no host round trip, no custom CUDA build), and the
lengths of its edges are recomputed in torch from the points, which makes them differentiable: the gradient of a
death time moves the two endpoints of its edge along the line joining them. This is the (sub)gradient that
persistent-homology libraries give (torchph's ``vr_persistence``, used by the official code).
"""

from __future__ import annotations

import torch
from torch import nn

from latentstitch._validation import (
    ArrayLike,
    as_float_tensor,
    check_nonnegative,
    check_positive,
    check_same_rows,
    wrap_like,
)


def death_times(points: ArrayLike) -> ArrayLike:
    """Death times of the 0-dimensional Vietoris-Rips persistence of a point cloud, Euclidean metric.

    Equal to the ``n - 1`` edge lengths of a Euclidean minimum spanning tree of the points, sorted ascending (the
    essential bar, which never dies, is left out). Duplicate points give death times of exactly 0. Invariant to
    rotations, reflections and translations of the cloud; scales with it.

    Parameters
    ----------
    points : (n, d) array or tensor, n >= 1

    Returns
    -------
    (n - 1,) array or tensor of ``points``' type, differentiable with respect to ``points``.
    """
    x = as_float_tensor(points, "points", ndim=2, min_rows=1)
    lengths = _tree_edge_lengths(x, [torch.arange(x.shape[0], device=x.device)])[0]
    return wrap_like(lengths.sort().values, points)


class TopologicalDensificationLoss(nn.Module):
    """``mean over sub-batches of sum_i |d_i - beta|^p``, d_i the death times of a sub-batch (Hofer et al. 2020).

    Each sub-batch should hold samples of one class: pulling its death times to ``beta`` makes the class a dense
    cluster at scale ``beta`` in the latent space. The official code (Hofer et al.; García-Castellanos et al.,
    arXiv 2409.10967) uses ``p = 1`` on class-pure batches of 16 samples; ``p = 2`` is its squared ("L_2") variant.
    Distances are Euclidean, so the loss is invariant to rotations and translations of the latent space but not
    to its scale (``beta`` is an absolute length).

    Parameters
    ----------
    beta : float
        Target death time (0.7 for Hofer's CIFAR-10 CNN latents, 3 for the RoBERTa CLS and relative vectors of the
        robust relative transform paper).
    p : float
        Exponent of the deviations (1 or 2 in the official code).

    Call
    ----
    ``loss(latents, labels=None, *, group_size=None)`` where the sub-batches are:

    - ``latents`` of shape (b, n, d): the b clouds ``latents[k]``;
    - ``group_size=n``: consecutive runs of n rows (the layout of ``ClassBalancedBatchSampler``'s batches);
    - ``labels``: the rows of each label (class-pure sub-batches of a mixed batch);
    - none of these: the whole (n, d) batch is one cloud (a class-pure batch).

    Sub-batches with fewer than 2 samples have no death time and are not counted in the mean; with none left the
    loss is 0 (still attached to the graph).
    """

    def __init__(self, beta: float, p: float = 1.0):
        super().__init__()
        self.beta = check_nonnegative(beta, "beta")
        self.p = check_positive(p, "p")

    def forward(
        self, latents: torch.Tensor, labels: torch.Tensor | None = None, *, group_size: int | None = None
    ) -> torch.Tensor:
        check_nonnegative(self.beta, "beta")  # (attributes may have been changed since construction)
        check_positive(self.p, "p")
        points, groups = _groups(latents, labels, group_size)
        groups = [g for g in groups if len(g) >= 2]
        if not groups:
            return points.sum() * 0.0
        lengths = torch.cat(_tree_edge_lengths(points, groups))
        deviation = (lengths - self.beta).abs()
        return (deviation if self.p == 1 else deviation.pow(self.p)).sum() / len(groups)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, p={self.p}"


def _groups(
    latents: torch.Tensor, labels: torch.Tensor | None, group_size: int | None
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The latents as (N, d) rows and the row indices of each sub-batch."""
    x = as_float_tensor(latents, "latents", ndim=(2, 3), min_rows=1)
    if x.ndim == 3:
        if labels is not None or group_size is not None:
            raise ValueError("latents: a (b, n, d) batch already defines its sub-batches; give no labels/group_size")
        b, n = x.shape[:2]
        rows = torch.arange(b * n, device=x.device).reshape(b, n)
        return x.reshape(b * n, -1), list(rows)
    if labels is not None and group_size is not None:
        raise ValueError("labels and group_size: give one way of forming sub-batches, not both")
    if group_size is not None:
        if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
            raise ValueError(f"group_size: expected a positive integer, got {group_size!r}")
        if x.shape[0] % group_size:
            raise ValueError(f"group_size: {x.shape[0]} rows do not split into groups of {group_size}")
        return x, list(torch.arange(x.shape[0], device=x.device).reshape(-1, group_size))
    if labels is None:
        return x, [torch.arange(x.shape[0], device=x.device)]
    if not isinstance(labels, torch.Tensor) or labels.ndim != 1 or labels.dtype.is_floating_point:
        raise ValueError("labels: expected a 1-D integer tensor of class indices")
    check_same_rows(x, labels, "latents", "labels")
    labels = labels.to(x.device)
    return x, [(labels == value).nonzero().flatten() for value in labels.unique()]


def _tree_edge_lengths(points: torch.Tensor, groups: list[torch.Tensor]) -> list[torch.Tensor]:
    """For each group of rows of ``points``, the differentiable lengths of a Euclidean minimum spanning tree."""
    ends_a, ends_b = [None] * len(groups), [None] * len(groups)
    with torch.no_grad():
        by_size: dict[int, list[int]] = {}
        for k, rows in enumerate(groups):
            by_size.setdefault(len(rows), []).append(k)
        for members in by_size.values():  # one batched tree search per group size
            rows = torch.stack([groups[k] for k in members])
            clouds = points[rows]
            # Exact differences, not |x|^2 + |y|^2 - 2<x, y>: close points keep their tiny distances.
            i, j = _prim(torch.cdist(clouds, clouds, compute_mode="donot_use_mm_for_euclid_dist"))
            for position, k in enumerate(members):
                ends_a[k], ends_b[k] = rows[position, i[position]], rows[position, j[position]]
    a, b = torch.cat(ends_a), torch.cat(ends_b)
    squared = (points[a] - points[b]).square().sum(dim=1)
    # sqrt has an infinite derivative at 0 (duplicate points): give those edges length 0 and gradient 0.
    positive = squared > 0
    lengths = torch.where(positive, torch.where(positive, squared, 1.0).sqrt(), 0.0)
    return list(lengths.split([len(rows) - 1 for rows in groups]))


def _prim(distances: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Prim's algorithm on a batch of dense (b, n, n) distance matrices, on their device.

    Returns the endpoints (i, j), each (b, n - 1), of the edges of a minimum spanning tree of every matrix: n - 1
    rounds of "attach the nearest outside point", vectorised over the batch (no host round trip).
    """
    b, n, _ = distances.shape
    batch = torch.arange(b, device=distances.device)
    inside = torch.zeros(b, n, dtype=torch.bool, device=distances.device)
    inside[:, 0] = True
    nearest = distances[:, 0].clone()  # distance from the tree to every point
    attach = torch.zeros(b, n, dtype=torch.long, device=distances.device)  # its closest tree point
    nearest[inside] = torch.inf
    ends_i, ends_j = [], []
    for _ in range(n - 1):
        j = nearest.argmin(dim=1)
        ends_i.append(attach[batch, j])
        ends_j.append(j)
        inside[batch, j] = True
        from_j = distances[batch, j]
        closer = from_j < nearest
        nearest = torch.where(closer, from_j, nearest).masked_fill(inside, torch.inf)
        attach = torch.where(closer, j[:, None], attach)
    if not ends_i:
        empty = torch.zeros(b, 0, dtype=torch.long, device=distances.device)
        return empty, empty
    return torch.stack(ends_i, dim=1), torch.stack(ends_j, dim=1)
