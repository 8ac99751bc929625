"""Permutation nulls computed in batches, for the measures whose structure allows it.

Permuting the rows of y by ``pi`` leaves everything computed from x alone or from y alone unchanged (column means,
``Cxx``, ``Cyy``, y's neighbour lists up to relabelling, y's distance matrix up to ``P D P^T``); only the coupling
between x and y changes. Each kernel below computes the fixed parts once and then, for a batch of permutations, only
the coupling:

- feature-space measures (linear and debiased CKA, R^2, the CCA family, SVCCA, the Procrustes metrics, ENSD, GULP,
  eigenspace overlap, correlation match, the permutation metric): the cross moments ``Xc^T P_b Yc`` of a batch of B
  permutations are one GEMM ``Xc^T [P_1 Yc | ... | P_B Yc]`` per block of rows, on the tensors' device, in the
  data's precision (float32 stays float32) accumulated in float64, as ``cka`` does;
- matrix measures (RSA, RBF CKA, distance correlation): a Mantel statistic ``sum_ij A_ij B_pi(i) pi(j)`` on the
  precomputed matrices;
- neighbourhood measures (mutual k-NN, cycle k-NN, CKNNA, k-NN Jaccard): the neighbour lists are computed once and
  relabelled, O(n k^2) per permutation instead of a new O(n^2 d) search.

``null_kernel(spec, x, y, options)`` returns ``f(perms) -> (B,) float64`` or None (no batched form: the caller
loops over the measure itself). Every kernel equals that loop up to rounding (tests/test_similarity_inference.py).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import torch

from latentstitch._core.knn import shared_neighbours, top_k
from latentstitch._core.moments import CrossMoments
from latentstitch._core.numerics import matmul, unit_rows
from latentstitch.similarity.measures._cca import principal_directions, whitener
from latentstitch.similarity.measures._cka import center_gram, gram_rbf
from latentstitch.similarity.measures._cka_statistics import debiased_hsic
from latentstitch.similarity.measures._distance_correlation import double_centred_distances
from latentstitch.similarity.measures._gulp import gulp_terms, ridge_inverse
from latentstitch.similarity.measures._knn import clamp_outliers, neighbour_lists
from latentstitch.similarity.measures._matching import correlation_match_terms, neuron_scales, permutation_terms
from latentstitch.similarity.measures._neighborhood_measures import (
    cknna_self_terms,
    cycle_knn_from_lists,
    knn_jaccard_from_lists,
    masked_unbiased_hsic,
)
from latentstitch.similarity.measures._registry import MeasureSpec
from latentstitch.similarity.measures._rsa import average_ranks, dissimilarity_matrix
from latentstitch.similarity.measures._subspace import ensd_terms

NullKernel = Callable[[torch.Tensor], torch.Tensor]
NULL_KERNELS: dict[str, Callable[..., NullKernel | None]] = {}

# Elements of one block's gathered rows (B permutations x rows x q): 32 Mi values, 128 MiB in float32.
_GATHER_ELEMENTS = 1 << 25
# Rows per block at least this many, so that adding each block's product into the float64 totals stays a small
# fraction of the GEMM's work.
_MIN_BLOCK_ROWS = 2048


def kernel(*names: str):
    def register(factory):
        for name in names:
            NULL_KERNELS[name] = factory
        return factory

    return register


def null_kernel(spec: MeasureSpec, x: torch.Tensor, y: torch.Tensor, options: dict[str, Any]) -> NullKernel | None:
    """The batched null of ``spec`` for validated tensors x, y (same dtype and device), or None."""
    factory = NULL_KERNELS.get(spec.name)
    if factory is None:
        return None
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the observed value's computation has already warned about the data
        return factory(x.detach(), y.detach(), **{**spec.options, **options})


def batch_size_for(p: int, q: int) -> int:
    """Permutations per batch: the GEMM's (p, B q) float32 product stays near 32 MiB (a larger one makes the GEMM
    memory-bound: measured 1.3-1.5x slower per permutation with B = 56 at d = 768 on a busy machine)."""
    return int(max(1, min(64, (1 << 23) // max(p * q, 1))))


# --- feature space ---------------------------------------------------------------------------------------------


class CrossBatch:
    """x and y centred (or raw, ``centre=False``) in the product precision, and their fixed moments; ``cross(perms)``
    the (B, p, q) float64 cross moments of x with y's rows permuted by each permutation."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, *, centre: bool = True):
        self.moments = CrossMoments(precision="input").update(x, y, finite_checked=True)
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        self.centre = centre
        if centre:
            x = x.to(dtype) - x.mean(dim=0, dtype=torch.float64).to(dtype)
            y = y.to(dtype) - y.mean(dim=0, dtype=torch.float64).to(dtype)
        self.x, self.y = x.to(dtype).contiguous(), y.to(dtype).contiguous()
        self.n, self.p, self.q = x.shape[0], x.shape[1], y.shape[1]

    def fixed(self) -> tuple[torch.Tensor, torch.Tensor]:
        m = self.moments
        return (m.centered_aa(), m.centered_bb()) if self.centre else (m.raw_aa(), m.raw_bb())

    def cross(self, perms: torch.Tensor) -> torch.Tensor:
        b = perms.shape[0]
        out = torch.zeros(self.p, b, self.q, dtype=torch.float64, device=self.x.device)  # (p, B, q): added in place
        scale = 16 if self.x.device.type != "cpu" else 1
        rows = max(_MIN_BLOCK_ROWS, scale * _GATHER_ELEMENTS // max(b * self.q, 1))
        for start in range(0, self.n, rows):
            stop = min(start + rows, self.n)
            # row i of every permuted y, side by side: (rows, B * q), so one GEMM serves the whole batch
            gathered = torch.index_select(self.y, 0, perms[:, start:stop].T.reshape(-1))
            product = matmul(self.x[start:stop].T, gathered.view(stop - start, b * self.q))
            out += product.view(self.p, b, self.q)
        return out.permute(1, 0, 2)


@kernel("linear_cka", "debiased_cka", "rbf_cka")
def _cka(x, y, kernel="linear", debiased=False, bandwidth=1.0, method="auto"):
    if kernel == "rbf":
        kx = center_gram(gram_rbf(x, bandwidth), debiased)
        ky = center_gram(gram_rbf(y, bandwidth), debiased)
        denominator = torch.sqrt((kx * kx).sum() * (ky * ky).sum())
        return _mantel(kx, ky, lambda stat: stat / denominator)
    batch = CrossBatch(x, y)
    cxx, cyy = batch.fixed()
    n = batch.n
    xx, yy = (cxx * cxx).sum(), (cyy * cyy).sum()
    if not debiased:
        denominator = torch.sqrt(xx * yy)
        return lambda perms: (batch.cross(perms) ** 2).sum(dim=(1, 2)) / denominator
    norms_x = (batch.x.to(torch.float64) ** 2).sum(dim=1)  # squared norms of the centred rows
    norms_y = (batch.y.to(torch.float64) ** 2).sum(dim=1)
    total_x, total_y = torch.trace(cxx), torch.trace(cyy)
    xx = debiased_hsic(xx, norms_x @ norms_x, total_x, total_x, n)
    yy = debiased_hsic(yy, norms_y @ norms_y, total_y, total_y, n)
    denominator = torch.sqrt(xx) * torch.sqrt(yy)

    def null(perms: torch.Tensor) -> torch.Tensor:
        frobenius = (batch.cross(perms) ** 2).sum(dim=(1, 2))
        return debiased_hsic(frobenius, norms_y[perms] @ norms_x, total_x, total_y, n) / denominator

    return null


@kernel("r2_linear")
def _r2(x, y):
    batch = CrossBatch(x, y)
    cxx, cyy = batch.fixed()
    # the minimum-norm least-squares fit of solve_least_squares: directions below p eps max(eigenvalue) dropped
    eigenvalues, eigenvectors = torch.linalg.eigh(cxx)
    keep = eigenvalues > cxx.shape[0] * torch.finfo(torch.float64).eps * max(float(eigenvalues.max()), 0.0)
    basis = eigenvectors[:, keep] / torch.sqrt(eigenvalues[keep])
    total = torch.trace(cyy)
    return lambda perms: (torch.matmul(basis.T, batch.cross(perms)) ** 2).sum(dim=(1, 2)) / total


@kernel("mean_cca", "r2_cca")
def _cca(x, y, reduce="mean", rtol=None):
    return _canonical(CrossBatch(x, y), reduce, rtol, x.dtype)


def _canonical(batch: CrossBatch, reduce: str, rtol, dtype) -> NullKernel:
    cxx, cyy = batch.fixed()
    wx = whitener(cxx, "x", "CCA", rtol, dtype)
    wy = whitener(cyy, "y", "CCA", rtol, dtype)

    def null(perms: torch.Tensor) -> torch.Tensor:
        product = torch.matmul(torch.matmul(wx.T, batch.cross(perms)), wy)
        if reduce == "r2":
            return (product**2).sum(dim=(1, 2)) / min(wx.shape[1], wy.shape[1])
        return torch.linalg.svdvals(product).clamp(0.0, 1.0).mean(dim=1)

    return null


@kernel("svcca")
def _svcca(x, y, keep=0.99, rtol=None):
    moments = CrossMoments(precision="input").update(x, y, finite_checked=True)
    vx = principal_directions(moments.centered_aa(), keep, "x")
    vy = principal_directions(moments.centered_bb(), keep, "y")
    xc = (x.to(torch.float64) - x.mean(dim=0, dtype=torch.float64)) @ vx
    yc = (y.to(torch.float64) - y.mean(dim=0, dtype=torch.float64)) @ vy
    return _canonical(CrossBatch(xc, yc), "mean", rtol, x.dtype)


def _aligned_cosines(x: torch.Tensor, y: torch.Tensor) -> NullKernel:
    batch = CrossBatch(x, y)
    cxx, cyy = batch.fixed()
    scale = torch.sqrt(torch.trace(cxx) * torch.trace(cyy))
    return lambda perms: (torch.linalg.svdvals(batch.cross(perms)).sum(dim=1) / scale).clamp(0.0, 1.0)


@kernel("procrustes_distance")
def _procrustes(x, y):
    cosines = _aligned_cosines(x, y)
    return lambda perms: 2.0 - 2.0 * cosines(perms)


@kernel("shape_metric_angular")
def _angular(x, y):
    cosines = _aligned_cosines(x, y)
    return lambda perms: torch.arccos(cosines(perms).clamp(max=1.0 - torch.finfo(torch.float64).eps))


@kernel("ensd")
def _ensd(x, y):
    batch = CrossBatch(x, y)
    cxx, cyy = batch.fixed()
    return lambda perms: ensd_terms(cxx, cyy, (batch.cross(perms) ** 2).sum(dim=(1, 2)))


@kernel("gulp")
def _gulp(x, y, ridge=0.0):
    batch = CrossBatch(x, y)
    cxx, cyy = batch.fixed()
    sx, ax = ridge_inverse(cxx, ridge, "x", x.dtype)
    sy, ay = ridge_inverse(cyy, ridge, "y", x.dtype)
    scale = torch.sqrt(torch.trace(cxx) * torch.trace(cyy))
    return lambda perms: gulp_terms(sx, ax, sy, ay, batch.cross(perms) / scale)


@kernel("eigenspace_overlap")
def _eigenspace(x, y):
    batch = CrossBatch(x, y, centre=False)
    raw_xx, raw_yy = batch.fixed()
    wx = whitener(raw_xx, "x", "the eigenspace overlap", None, x.dtype)
    wy = whitener(raw_yy, "y", "the eigenspace overlap", None, x.dtype)
    width = max(batch.p, batch.q)
    return lambda perms: (torch.matmul(torch.matmul(wx.T, batch.cross(perms)), wy) ** 2).sum(dim=(1, 2)) / width


@kernel("correlation_match", "soft_correlation_match")
def _correlation_match(x, y, soft=False):
    batch = CrossBatch(x, y)
    scales = neuron_scales(batch.moments, "correlation match")
    return lambda perms: torch.stack([correlation_match_terms(c * scales, soft) for c in batch.cross(perms)])


@kernel("permutation")
def _permutation(x, y, score="angular"):
    batch = CrossBatch(x, y)
    cxx, cyy = batch.fixed()
    norm_x, norm_y = torch.trace(cxx), torch.trace(cyy)
    return lambda perms: torch.stack([permutation_terms(c, norm_x, norm_y, score) for c in batch.cross(perms)])


# --- Mantel statistics on n x n matrices -------------------------------------------------------------------------


def _mantel(a: torch.Tensor, b: torch.Tensor, finish: Callable[[torch.Tensor], torch.Tensor]) -> NullKernel:
    """``finish(sum_ij A_ij B[pi(i), pi(j)])`` for each permutation (B's rows and columns follow y's rows)."""

    def null(perms: torch.Tensor) -> torch.Tensor:
        stats = torch.stack([(a * b[p][:, p]).sum() for p in perms])
        return finish(stats)

    return null


def _condensed_to_square(values: torch.Tensor, n: int) -> torch.Tensor:
    square = torch.zeros(n, n, dtype=values.dtype, device=values.device)
    upper = torch.ones(n, n, dtype=torch.bool, device=values.device).triu(diagonal=1)
    square[upper] = values
    return square + square.T


@kernel("rsa")
def _rsa(x, y, rdm="euclidean", correlation="spearman"):
    n = x.shape[0]
    dx, dy = dissimilarity_matrix(x, rdm), dissimilarity_matrix(y, rdm)
    if correlation == "spearman":
        dx, dy = average_ranks(dx), average_ranks(dy)
    # a permutation of samples permutes the n(n-1)/2 entries of y's RDM: their mean and norm do not change
    dx, dy = dx - dx.mean(), dy - dy.mean()
    denominator = 2 * torch.linalg.vector_norm(dx) * torch.linalg.vector_norm(dy)
    return _mantel(_condensed_to_square(dx, n), _condensed_to_square(dy, n), lambda s: (s / denominator).clamp(-1, 1))


@kernel("distance_correlation")
def _distance_correlation(x, y):
    a, b = double_centred_distances(x), double_centred_distances(y)
    n2 = x.shape[0] ** 2
    scale = torch.sqrt((a * a).mean() * (b * b).mean())
    return _mantel(a, b, lambda s: torch.sqrt((s / n2 / scale).clamp_min(0.0)))


# --- neighbour lists ---------------------------------------------------------------------------------------------


def _inverse(perm: torch.Tensor) -> torch.Tensor:
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(perm.shape[0], device=perm.device)
    return inverse


@kernel("mutual_knn")
def _mutual_knn(x, y, k=10, clamp_quantile=None):
    if clamp_quantile is not None:
        x, y = clamp_outliers(x, clamp_quantile), clamp_outliers(y, clamp_quantile)
    ux, uy = unit_rows(x, "x"), unit_rows(y, "y")
    nx, ny = top_k(ux, ux, k, exclude_self=True), top_k(uy, uy, k, exclude_self=True)

    def null(perms: torch.Tensor) -> torch.Tensor:
        return torch.stack([shared_neighbours(nx, _inverse(p)[ny[p]]).to(torch.float64).mean() / k for p in perms])

    return null


def _lists_kernel(score: Callable[[Any, Any], torch.Tensor]):
    def factory(x, y, k=10):
        lists_x, lists_y = neighbour_lists(x, k, "x"), neighbour_lists(y, k, "y")
        return lambda perms: torch.stack([score(lists_x, lists_y.permuted(p, _inverse(p))) for p in perms])

    return factory


NULL_KERNELS["cycle_knn"] = _lists_kernel(cycle_knn_from_lists)
NULL_KERNELS["knn_jaccard"] = _lists_kernel(knn_jaccard_from_lists)


@kernel("cknna")
def _cknna(x, y, k=10, normalize=True):
    lists_x = neighbour_lists(x, k, "x", normalize=normalize)
    lists_y = neighbour_lists(y, k, "y", normalize=normalize)
    xx, yy = cknna_self_terms(lists_x, lists_y)  # a permutation relabels y's kernel: its own HSIC is unchanged
    denominator = torch.sqrt(xx * yy)
    n = lists_x.n
    return lambda perms: torch.stack(
        [masked_unbiased_hsic(lists_x, lists_y.permuted(p, _inverse(p)), n) / denominator for p in perms]
    )


def finite_ideal(spec: MeasureSpec) -> float:
    """The value of identical representations: the top of a similarity's range, the bottom of a distance's (nan when
    that end is not finite, e.g. ENSD)."""
    end = spec.value_range[1] if spec.kind == "similarity" else spec.value_range[0]
    return end if math.isfinite(end) else math.nan
