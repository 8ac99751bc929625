"""Measures built on each sample's k nearest neighbours within each representation (cosine similarity, the sample
itself excluded): mutual k-NN, CKNNA and cycle-kNN (Huh et al. 2024, platonic-rep), and the neighbourhood Jaccard,
rank similarity and second-order cosine similarity of the ReSi benchmark (Klabunde et al. 2025, mklabunde/resi).

They work on neighbour lists (``_knn``): memory O(n k) beyond the chunked neighbour search, no n x n matrix. None is
differentiable (they count top-k memberships). A permutation of y's rows only relabels y's lists, which is what makes
their permutation nulls cheap (``latentstitch.similarity.permutation_test``).
"""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.knn import shared_neighbours, top_k
from latentstitch._core.numerics import unit_rows
from latentstitch._core.params import check_bool, check_positive_int, check_probability
from latentstitch.similarity.measures._knn import (
    NeighbourLists,
    clamp_outliers,
    neighbour_lists,
    neighbour_matches,
    prepare_knn,
    row_dots,
)
from latentstitch.similarity.measures._registry import as_result, prepare_pair

# --- mutual k-NN -----------------------------------------------------------------------------------------------


def mutual_knn(x: ArrayLike, y: ArrayLike, k: int = 10, *, clamp_quantile: float | None = None) -> float | torch.Tensor:
    """Mutual k-nearest-neighbour alignment (Huh et al. 2024): ``(1/n) sum_i |N_x(i) & N_y(i)| / k``.

    N_x(i) is the set of the k rows of x most cosine-similar to row i (i itself excluded), likewise in y.

    Parameters
    ----------
    x, y : (n, p), (n, q) arrays or tensors of the same samples (widths may differ).
    k : int
        Neighbours per sample (platonic-rep default 10); needs n > k.
    clamp_quantile : float, optional
        platonic-rep clamps activations before measuring (``prepare_features``, q=0.95): every value is clamped to
        the ``clamp_quantile`` of |values| per row, averaged over rows. Off by default (the metric itself does not
        clamp); the clamp is per coordinate, so with it the index is no longer rotation invariant.

    Notes
    -----
    Centering: none (cosine neighbourhoods; rows are L2-normalised). Similarity in [0, 1], symmetric. Invariant to
    orthogonal maps and isotropic scaling of either side; not to translation. Not differentiable. Ties in similarity
    are broken by ``torch.topk``.
    """
    k = check_positive_int(k, "k")
    xt, yt = prepare_pair(x, y, min_rows=k + 1, measure=f"mutual k-NN with k={k}", varying=True)
    if clamp_quantile is not None:
        check_probability(clamp_quantile, "clamp_quantile", low_open=True)
        xt, yt = clamp_outliers(xt, clamp_quantile), clamp_outliers(yt, clamp_quantile)
    ux, uy = unit_rows(xt.detach(), "x"), unit_rows(yt.detach(), "y")
    shared = shared_neighbours(top_k(ux, ux, k, exclude_self=True), top_k(uy, uy, k, exclude_self=True))
    return as_result(shared.to(torch.float64).mean() / k, x, xt)


# --- CKNNA ---------------------------------------------------------------------------------------------------------


def masked_unbiased_hsic(lists_k: NeighbourLists, lists_l: NeighbourLists, n: int) -> torch.Tensor:
    """platonic-rep's ``hsic_unbiased(M * K, M * L)`` with M the rows' shared neighbours (``M_ij = 1`` when j is
    among i's k neighbours in both), from the neighbour lists alone.

    With ``Kt = M * K``, ``Lt = M * L`` (zero diagonals; K, L symmetric): ``sum(Kt * Lt^T)`` keeps the pairs shared in
    both directions, ``1^T Kt Lt 1 = sum_j colsum(Kt)_j rowsum(Lt)_j``, and
    ``HSIC_1 = [sum(Kt * Lt^T) + sum(Kt) sum(Lt) / ((n-1)(n-2)) - 2 / (n-2) 1^T Kt Lt 1] / (n (n-3))``.
    """
    matches = neighbour_matches(lists_k.index, lists_l.index)
    shared = matches.any(dim=2)  # over k's list
    rows = torch.arange(n, device=shared.device)[:, None].expand_as(shared)[shared]
    cols = lists_k.index[shared]
    k_values = lists_k.similarity[shared]
    l_values = (matches * lists_l.similarity[:, None, :]).sum(dim=2)[shared]
    keys = rows * n + cols
    both_ways = torch.isin(cols * n + rows, keys)
    symmetric = (k_values * l_values)[both_ways].sum()
    col_sums = torch.zeros(n, dtype=torch.float64, device=shared.device).index_add_(0, cols, k_values)
    row_sums = torch.zeros(n, dtype=torch.float64, device=shared.device).index_add_(0, rows, l_values)
    total = symmetric + k_values.sum() * l_values.sum() / ((n - 1) * (n - 2)) - 2 * (col_sums @ row_sums) / (n - 2)
    return total / (n * (n - 3))


def cknna_from_lists(lists_x: NeighbourLists, lists_y: NeighbourLists, self_terms=None) -> torch.Tensor:
    n = lists_x.n
    xx, yy = self_terms if self_terms is not None else cknna_self_terms(lists_x, lists_y)
    return masked_unbiased_hsic(lists_x, lists_y, n) / torch.sqrt(xx * yy)


def cknna_self_terms(lists_x: NeighbourLists, lists_y: NeighbourLists) -> tuple[torch.Tensor, torch.Tensor]:
    n = lists_x.n
    xx, yy = masked_unbiased_hsic(lists_x, lists_x, n), masked_unbiased_hsic(lists_y, lists_y, n)
    for value, name in ((xx, "x"), (yy, "y")):
        if not value > 0:
            raise ValueError(
                f"{name}: the unbiased HSIC of its k-nearest-neighbour kernel is not positive ({float(value):.3g}), "
                "so CKNNA is undefined; use more samples or a larger k"
            )
    return xx, yy


def cknna(x: ArrayLike, y: ArrayLike, k: int = 10, *, normalize: bool = True) -> float | torch.Tensor:
    """Centered kernel nearest-neighbour alignment (Huh et al. 2024, platonic-rep ``cknna``): CKA restricted to the
    pairs of samples that are among each other's k nearest neighbours in both representations.

    ``K = X X^T``, ``L = Y Y^T`` on L2-normalised rows (cosine kernels, as platonic-rep's ``measure_alignment``
    prepares features); ``M_ij = 1`` when j is among i's k nearest neighbours (i excluded) in both x and y;
    ``CKNNA = HSIC_1(M K, M L) / sqrt(HSIC_1(M_x K, M_x K) HSIC_1(M_y L, M_y L))`` with the unbiased HSIC of Song
    et al. (2012). k = n - 1 recovers unbiased (debiased) CKA of the cosine kernels.

    Parameters
    ----------
    x, y : (n, p), (n, q) arrays or tensors of the same samples.
    k : int
        Neighbours per sample (platonic-rep uses 10); needs n > k.
    normalize : bool
        L2-normalise rows first (default). False uses the raw inner-product kernels, as ``cknna`` of metrics.py on
        unnormalised features.

    Notes
    -----
    Centering: none (unbiased HSIC handles it). Similarity in [-1, 1]. Slightly asymmetric, like platonic-rep's: the
    k-NN masks are not symmetric matrices, so the term ``1^T (M K)(M L) 1`` changes when x and y swap. Invariant to
    orthogonal maps and isotropic scaling of either side; not to translation. Not differentiable. Memory O(n k)
    beyond the chunked neighbour search (platonic-rep forms n x n masks); platonic-rep adds 1e-6 to the denominator,
    omitted here.
    """
    normalize = check_bool(normalize, "normalize")
    xt, yt, k = prepare_knn(x, y, k, "CKNNA")
    if xt.shape[0] < 4:
        raise ValueError(f"x, y: CKNNA needs at least 4 samples (rows), got {xt.shape[0]}")
    lists_x = neighbour_lists(xt, k, "x", normalize=normalize)
    lists_y = neighbour_lists(yt, k, "y", normalize=normalize)
    return as_result(cknna_from_lists(lists_x, lists_y), x, xt)


# --- cycle-kNN and the ReSi neighbourhood measures -----------------------------------------------------------------


def cycle_knn_from_lists(lists_x: NeighbourLists, lists_y: NeighbourLists) -> torch.Tensor:
    n = lists_x.n
    back = lists_x.index[lists_y.index]  # (n, k, k): x-neighbours of each y-neighbour
    hit = (back == torch.arange(n, device=back.device)[:, None, None]).flatten(1).any(dim=1)
    return hit.to(torch.float64).mean()


def cycle_knn(x: ArrayLike, y: ArrayLike, k: int = 10) -> float | torch.Tensor:
    """Cycle k-NN (Huh et al. 2024, platonic-rep ``cycle_knn``): the share of samples i that come back to
    themselves through a neighbour: i is among the k nearest neighbours in x of one of its k nearest neighbours in y.

    Neighbours by cosine similarity, i excluded. Similarity in [0, 1], asymmetric (the first hop is in y, the
    second in x, as ``cycle_knn(feats_A=x, feats_B=y)``). Invariant to orthogonal maps and isotropic scaling of
    either side; not to translation. Not differentiable.
    """
    xt, yt, k = prepare_knn(x, y, k, "cycle k-NN")
    lists_x, lists_y = neighbour_lists(xt, k, "x"), neighbour_lists(yt, k, "y")
    return as_result(cycle_knn_from_lists(lists_x, lists_y), x, xt)


def knn_jaccard_from_lists(lists_x: NeighbourLists, lists_y: NeighbourLists) -> torch.Tensor:
    k = lists_x.index.shape[1]
    shared = shared_neighbours(lists_x.index, lists_y.index).to(torch.float64)
    return (shared / (2 * k - shared)).mean()


def knn_jaccard(x: ArrayLike, y: ArrayLike, k: int = 10) -> float | torch.Tensor:
    """Mean Jaccard index of each sample's k-nearest-neighbour sets in x and in y (ReSi's ``JaccardSimilarity``):
    ``(1/n) sum_i |N_x(i) & N_y(i)| / |N_x(i) | N_y(i)|``.

    Neighbours by cosine similarity, i excluded (``mutual_knn`` divides the same overlap by k instead). Similarity in
    [0, 1], symmetric. Invariant to orthogonal maps and isotropic scaling of either side; not to translation. Not
    differentiable.
    """
    xt, yt, k = prepare_knn(x, y, k, "k-NN Jaccard")
    return as_result(knn_jaccard_from_lists(neighbour_lists(xt, k, "x"), neighbour_lists(yt, k, "y")), x, xt)


def rank_similarity(x: ArrayLike, y: ArrayLike, k: int = 10) -> float | torch.Tensor:
    """Rank similarity of k-nearest-neighbour lists (Wang et al. 2020; ReSi's ``RankSimilarity``).

    For sample i and each shared neighbour j with ranks ``r_x``, ``r_y`` (1 = nearest) in the two lists:
    ``2 / ((1 + |r_x - r_y|) (r_x + r_y))``; summed over the shared neighbours and divided by the largest value
    that many shared neighbours can reach, ``sum_{t=1}^{m} 1/t``; 0 when none is shared. Averaged over samples.

    Similarity in [0, 1], symmetric. Invariant to orthogonal maps and isotropic scaling of either side; not to
    translation. Not differentiable.
    """
    xt, yt, k = prepare_knn(x, y, k, "rank similarity")
    lists_x, lists_y = neighbour_lists(xt, k, "x"), neighbour_lists(yt, k, "y")
    matches = neighbour_matches(lists_x.index, lists_y.index)
    ranks = torch.arange(1, k + 1, dtype=torch.float64, device=matches.device)
    rx, ry = ranks[None, :, None], ranks[None, None, :]
    terms = torch.where(matches, 2.0 / ((1 + (rx - ry).abs()) * (rx + ry)), 0.0).sum(dim=(1, 2))
    shared = matches.sum(dim=(1, 2))
    harmonic = torch.cat([torch.zeros(1, dtype=torch.float64, device=ranks.device), torch.cumsum(1 / ranks, 0)])
    scores = torch.where(shared > 0, terms / harmonic[shared].clamp_min(1e-300), 0.0)
    return as_result(scores.mean(), x, xt)


def second_order_cosine(x: ArrayLike, y: ArrayLike, k: int = 10) -> float | torch.Tensor:
    """Second-order cosine similarity (Hamilton et al. 2016; ReSi's ``SecondOrderCosineSimilarity``).

    For sample i, U(i) = the union of its k nearest neighbours in x and in y; the cosine distances from i to the
    members of U(i) form one vector per representation; the score is the cosine similarity of the two vectors,
    averaged over samples.

    Similarity in [-1, 1] (in practice [0, 1]), symmetric. Invariant to orthogonal maps and isotropic scaling of
    either side; not to translation. Not differentiable.
    """
    xt, yt, k = prepare_knn(x, y, k, "second-order cosine similarity")
    with torch.no_grad():
        ux, uy = unit_rows(xt.detach(), "x"), unit_rows(yt.detach(), "y")
        lists_x, lists_y = neighbour_lists(xt, k, "x"), neighbour_lists(yt, k, "y")
        # distances to x's neighbours, then to y's neighbours that x's list does not already hold
        extra = ~neighbour_matches(lists_y.index, lists_x.index).any(dim=2)
        dx = torch.cat([1 - lists_x.similarity, 1 - row_dots(ux, ux, lists_y.index)], dim=1)
        dy = torch.cat([1 - row_dots(uy, uy, lists_x.index), 1 - lists_y.similarity], dim=1)
        keep = torch.cat([torch.ones_like(extra), extra], dim=1)
        dx, dy = dx * keep, dy * keep
        norms = torch.linalg.vector_norm(dx, dim=1) * torch.linalg.vector_norm(dy, dim=1)
        if not bool((norms > 0).all()):
            row = int((norms == 0).nonzero()[0, 0])
            raise ValueError(f"x, y: row {row} has all its neighbours at cosine distance 0 (duplicated rows)")
        scores = (dx * dy).sum(dim=1) / norms
    return as_result(scores.mean(), x, xt)
