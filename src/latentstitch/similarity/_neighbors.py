"""Neighbourhood measures: how far two representations agree on who is close to whom.

Neighbours are found by inner product of L2-normalised rows (cosine similarity), chunk by chunk so that memory is
O(chunk x n), never n x n. None of these is differentiable (they count top-k memberships), except
``matched_cosine``.

- ``mutual_knn`` (Huh et al. 2024, platonic-rep): overlap of each sample's k nearest neighbours within x and
  within y (x and y may have different widths).
- ``jaccard_at_k``, ``mrr``, ``matched_cosine``: the word-embedding retrieval metrics of Moschella et al. (ICLR
  2023, Table 1), for x and y in one space (e.g. relative representations with shared anchors): sample w's vector
  in x is a query against the index of all y vectors.
"""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.numerics import (
    matmul,
    unit_rows,  # exact at any magnitude; zero rows: ZeroNormError
)
from latentstitch._core.params import check_positive_int, check_probability
from latentstitch.similarity._registry import as_result, check_same_space, prepare_pair

# Query rows per chunk: the (chunk, n) similarity block stays near 64 MiB in float32 for n = 20k.
_CHUNK_ELEMENTS = 1 << 24


def _chunks(n_queries: int, n_index: int):
    rows = max(1, _CHUNK_ELEMENTS // max(n_index, 1))
    for start in range(0, n_queries, rows):
        yield start, min(start + rows, n_queries)


def top_k(queries: torch.Tensor, index: torch.Tensor, k: int, exclude_self: bool = False) -> torch.Tensor:
    """Indices (n_queries, k) of each query's k most similar index rows by inner product, most similar first.
    With ``exclude_self``, query i never retrieves index row i (queries and index are the same samples)."""
    out = torch.empty(queries.shape[0], k, dtype=torch.long, device=queries.device)
    with torch.no_grad():
        for start, stop in _chunks(queries.shape[0], index.shape[0]):
            scores = matmul(queries[start:stop], index.T)
            if exclude_self:
                own = torch.arange(start, stop, device=scores.device)
                scores[own - start, own] = -torch.inf
            out[start:stop] = torch.topk(scores, k, dim=1).indices
    return out


def _overlap(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per row, the number of indices that two (n, k) neighbour lists share."""
    return (a[:, :, None] == b[:, None, :]).any(dim=2).sum(dim=1)


def clamp_outliers(t: torch.Tensor, quantile: float) -> torch.Tensor:
    """platonic-rep's ``remove_outliers``: clamp every value to +-(the ``quantile`` of |values| per row, averaged
    over rows)."""
    per_row = torch.cat(
        [torch.quantile(t[start:stop].abs(), quantile, dim=1) for start, stop in _chunks(t.shape[0], t.shape[1] * 16)]
    )
    limit = per_row.mean()
    return t.clamp(-limit, limit)


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
    xt, yt = prepare_pair(x, y, min_rows=k + 1, measure=f"mutual k-NN with k={k}")
    if clamp_quantile is not None:
        check_probability(clamp_quantile, "clamp_quantile", low_open=True)
        xt, yt = clamp_outliers(xt, clamp_quantile), clamp_outliers(yt, clamp_quantile)
    ux, uy = unit_rows(xt.detach(), "x"), unit_rows(yt.detach(), "y")
    shared = _overlap(top_k(ux, ux, k, exclude_self=True), top_k(uy, uy, k, exclude_self=True))
    return as_result(shared.to(torch.float64).mean() / k, x, xt)


def jaccard_at_k(x: ArrayLike, y: ArrayLike, k: int = 5) -> float | torch.Tensor:
    """Mean Jaccard index of retrieved neighbourhoods (Moschella et al. 2023, word-embedding table).

    For each sample w: ``T(w)`` = the k rows of y most cosine-similar to ``y_w`` (itself included), ``A(w)`` = the
    k rows of y most cosine-similar to ``x_w``; the score is ``mean_w |T(w) & A(w)| / |T(w) | A(w)|``.

    x and y must live in one space (same width: e.g. relative representations with shared anchors); the index is
    always y. Centering: none (cosine). Similarity in [0, 1], asymmetric. Invariant to orthogonal maps, isotropic
    scaling and permutation applied to x and y together. Not differentiable.
    """
    k = check_positive_int(k, "k")
    xt, yt = prepare_pair(x, y, min_rows=k, measure=f"Jaccard@{k}")
    check_same_space(xt, yt, "jaccard_at_k")
    ux, uy = unit_rows(xt.detach(), "x"), unit_rows(yt.detach(), "y")
    shared = _overlap(top_k(uy, uy, k), top_k(ux, uy, k)).to(torch.float64)
    return as_result((shared / (2 * k - shared)).mean(), x, xt)


def mrr(x: ArrayLike, y: ArrayLike, k: int | None = None) -> float | torch.Tensor:
    """Mean reciprocal rank of each sample's own y row when its x row queries the index of all y rows.

    ``rank(w) = 1 + #{v : cos(x_w, y_v) > cos(x_w, y_w)}``; ``MRR = mean_w 1 / rank(w)``. With ``k``, a rank
    beyond k counts 0, as in Moschella et al.'s word-embedding table (which retrieves the top k=5).

    x and y must live in one space (same width). Centering: none (cosine). Similarity in [0, 1] (1: every sample
    retrieves itself first), asymmetric. Invariant to orthogonal maps, isotropic scaling and permutation applied to
    x and y together. Not differentiable. Ties count in the sample's favour.
    """
    if k is not None:
        k = check_positive_int(k, "k")
    xt, yt = prepare_pair(x, y, min_rows=1, measure="MRR")
    check_same_space(xt, yt, "mrr")
    ux, uy = unit_rows(xt.detach(), "x"), unit_rows(yt.detach(), "y")
    reciprocal = torch.empty(ux.shape[0], dtype=torch.float64, device=ux.device)
    with torch.no_grad():
        for start, stop in _chunks(ux.shape[0], uy.shape[0]):
            scores = matmul(ux[start:stop], uy.T)
            own = torch.arange(start, stop, device=scores.device)
            rank = 1 + (scores > scores[own - start, own][:, None]).sum(dim=1)
            value = 1.0 / rank.to(torch.float64)
            reciprocal[start:stop] = value if k is None else torch.where(rank <= k, value, 0.0)
    return as_result(reciprocal.mean(), x, xt)


def matched_cosine(x: ArrayLike, y: ArrayLike) -> float | torch.Tensor:
    """Mean cosine similarity of matched rows, ``mean_i cos(x_i, y_i)`` (Moschella et al.'s "Cosine" column).

    x and y must live in one space (same width). Centering: none. Similarity in [-1, 1], symmetric. Invariant to
    orthogonal maps, isotropic scaling and permutation applied to x and y together. Differentiable for torch
    inputs. A zero row raises ``ZeroNormError``.
    """
    xt, yt = prepare_pair(x, y, min_rows=1, measure="matched cosine")
    check_same_space(xt, yt, "matched_cosine")
    cosines = (unit_rows(xt, "x") * unit_rows(yt, "y")).sum(dim=1, dtype=torch.float64)
    return as_result(cosines.mean(), x, xt)
