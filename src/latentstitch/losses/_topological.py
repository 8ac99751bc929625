"""Topological densification (Hofer et al., ICML 2020): pull the 0-dimensional persistence death times of
class-pure mini-batches towards a target scale ``beta``.

The 0-dimensional Vietoris-Rips persistence of a point cloud has one finite bar per merge of two connected
components, born at 0 and dying at the length of the edge that merges them: the death times are exactly the edge
lengths of a Euclidean minimum spanning tree. So the tree is found on detached distances (Boruvka's algorithm,
batched over sub-batches, in torch on the points' device: ceil(log2 n) rounds of whole-batch tensor operations, no
Python step per point, no host round trip, no custom CUDA build), and the lengths of its edges are recomputed in
torch from the points, which makes them differentiable: the gradient of a death time moves the two endpoints of its
edge along the line joining them. This is the (sub)gradient that persistent-homology libraries give (torchph's
``vr_persistence``, used by the official code).

Magnitudes: each cloud is scaled by a power of two before its distances are taken, and each edge's difference
vector before it is squared, so clouds of 1e20-sized or 1e-30-sized float32 points get their true death times.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows, wrap_like
from latentstitch._core.device import reading_is_free
from latentstitch._core.numerics import power_of_two_scale
from latentstitch._core.params import check_nonnegative, check_positive


def death_times(points: ArrayLike) -> ArrayLike:
    """Death times of the 0-dimensional Vietoris-Rips persistence of a point cloud, Euclidean metric.

    Equal to the ``n - 1`` edge lengths of a Euclidean minimum spanning tree of the points, sorted ascending (the
    essential bar, which never dies, is left out). Duplicate points give death times of exactly 0. Invariant to
    rotations, reflections and translations of the cloud; scales with it, at any magnitude (clouds of 1e20- or
    1e-30-sized float32 points included: distances are taken after a power-of-two rescaling).

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
            clouds = _in_range(points.index_select(0, rows.flatten()).reshape(*rows.shape, -1), dims=(1, 2))
            # Exact differences, not |x|^2 + |y|^2 - 2<x, y>: close points keep their tiny distances. The minimum
            # makes the matrix exactly symmetric, so both ends of an edge see the same weight.
            distances = torch.cdist(clouds, clouds, compute_mode="donot_use_mm_for_euclid_dist")
            i, j = minimum_spanning_trees(torch.minimum(distances, distances.mT))
            rows_i, rows_j = rows.gather(1, i), rows.gather(1, j)
            for position, k in enumerate(members):  # views: no work per group
                ends_a[k], ends_b[k] = rows_i[position], rows_j[position]
    a, b = torch.cat(ends_a), torch.cat(ends_b)
    # index_select: its backward adds rows (index_add), cheaper than advanced indexing's accumulate on the CPU.
    difference = points.index_select(0, a) - points.index_select(0, b)
    scale = _range_scale(difference, dims=(1,))  # no square overflows or underflows
    squared = (difference if scale is None else difference * scale[:, None]).square().sum(dim=1)
    # sqrt has an infinite derivative at 0 (duplicate points): give those edges length 0 and gradient 0.
    positive = squared > 0
    lengths = torch.where(positive, torch.where(positive, squared, 1.0).sqrt(), 0.0)
    return list((lengths if scale is None else lengths / scale).split([len(rows) - 1 for rows in groups]))


def _range_scale(t: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor | None:
    """Powers of two (over ``dims``) that bring ``t``'s largest magnitudes into [0.5, 1), so that its squares
    neither overflow nor underflow; ``None`` on the CPU when every magnitude is already safe (reading that costs
    nothing there, while a GPU would wait: there the factors are always applied)."""
    if t.numel() == 0:
        return None
    magnitude = t.detach().abs().amax(dim=dims)
    if reading_is_free(t.device):
        low, high = torch.aminmax(magnitude)
        if float(low) > 2.0**-40 and float(high) < 2.0**40:
            return None
    return power_of_two_scale(magnitude)


def _in_range(clouds: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    scale = _range_scale(clouds, dims)
    return clouds if scale is None else clouds * scale.reshape(-1, *[1] * len(dims))


def minimum_spanning_trees(distances: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Boruvka's algorithm on a batch of dense, symmetric (b, n, n) distance matrices, on their device.

    Returns the endpoints (i, j), each (b, n - 1), of the edges of a minimum spanning tree of every matrix. Each
    round, every component takes its lightest edge to another component, so the number of components at least
    halves: ``ceil(log2 n)`` rounds of whole-batch tensor operations (no step per point, no host synchronisation).
    Ties are broken by the edge's index, a strict total order, so the chosen edges never close a cycle.
    """
    b, n, _ = distances.shape
    device = distances.device
    if n < 2:
        empty = torch.zeros(b, 0, dtype=torch.long, device=device)
        return empty, empty
    points = torch.arange(n, device=device)
    labels = points.expand(b, n)
    # Edge (i, j)'s index min(i, j) n + max(i, j) grows with j for a fixed i, so argmin's first-index rule among
    # equal weights picks the edge of smallest index: every point and component use the same total order.
    edge_index = torch.minimum(points[:, None], points) * n + torch.maximum(points[:, None], points)
    none = n * n  # larger than every edge index
    component = labels.clone()  # the component of each point, named by one of its points
    ends_i = torch.zeros(b, n, dtype=torch.long, device=device)  # slot n - 1 takes discarded writes
    ends_j = torch.zeros_like(ends_i)
    found = torch.zeros(b, 1, dtype=torch.long, device=device)
    rounds = math.ceil(math.log2(n))
    # On the CPU reading a tensor costs nothing, so the loops stop as soon as they are done; on a GPU they run their
    # worst-case count rather than wait for the device.
    stop_early = reading_is_free(device)
    for _ in range(rounds):
        outside = distances.masked_fill(component[:, :, None] == component[:, None, :], torch.inf)
        weight, partner = outside.min(dim=2)  # each point's lightest edge leaving its component
        edge = torch.where(torch.isfinite(weight), edge_index[points, partner], none)
        # Each component's lightest edge: least weight, then least index; one point per component holds it.
        lightest = torch.full((b, n), torch.inf, dtype=weight.dtype, device=device)
        lightest = lightest.scatter_reduce(1, component, weight, "amin")
        candidate = torch.where(weight == lightest.gather(1, component), edge, none)
        chosen_edge = torch.full((b, n), none, device=device).scatter_reduce(1, component, candidate, "amin")
        chosen = (candidate == chosen_edge.gather(1, component)) & (candidate < none)
        # Per component (indexed by its name): the chosen point and the component its edge leads to, packed in one
        # number (target n + source) so that one reduction finds both.
        packed = torch.where(chosen, component.gather(1, partner) * n + labels, none * n)
        packed = torch.full((b, n), none * n, device=device).scatter_reduce(1, component, packed, "amin")
        source = packed % n
        parent = torch.where(packed < none * n, packed // n, labels)
        # Two components that chose each other chose the same edge: the smaller name stays a root, and the edge is
        # recorded once, by the other.
        mutual = (parent.gather(1, parent) == labels) & (labels < parent)
        parent = torch.where(mutual, labels, parent)
        merging = parent != labels
        slot = torch.where(merging, found + merging.cumsum(dim=1) - 1, n - 1)
        ends_i.scatter_(1, slot, source)
        ends_j.scatter_(1, slot, partner.gather(1, source))
        found = found + merging.sum(dim=1, keepdim=True)
        for _ in range(rounds):  # pointer jumping: every name to the root of its tree (depth < n)
            jumped = parent.gather(1, parent)
            if stop_early and torch.equal(jumped, parent):
                break
            parent = jumped
        component = parent.gather(1, component)
        if stop_early and bool((found == n - 1).all()):
            break
    return ends_i[:, : n - 1], ends_j[:, : n - 1]
