"""Retrieval metrics between two representations in one space: the word-embedding metrics of Moschella et al.
(ICLR 2023, Table 1), for x and y of the same width (e.g. relative representations with shared anchors): sample w's
vector in x is a query against the index of all y vectors.

- ``jaccard_at_k``: overlap of the k rows of y retrieved by ``x_w`` and by ``y_w``;
- ``mrr``: mean reciprocal rank of each sample's own y row;
- ``matched_cosine``: mean cosine of matched rows (the only differentiable one).

Neighbours are found by inner product of L2-normalised rows, chunk by chunk (``latentstitch._core.knn``).
"""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.knn import row_blocks, shared_neighbours, top_k
from latentstitch._core.numerics import matmul, unit_rows
from latentstitch._core.params import check_positive_int
from latentstitch.similarity.measures._registry import as_result, check_same_space, prepare_pair


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
    shared = shared_neighbours(top_k(uy, uy, k), top_k(ux, uy, k)).to(torch.float64)
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
        for start, stop in row_blocks(ux.shape[0], uy.shape[0]):
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
