"""Representational similarity analysis (Kriegeskorte et al. 2008): correlate the two representations'
dissimilarity matrices (RDMs) over all pairs of samples."""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.params import check_choice
from latentstitch.similarity.measures._registry import as_result, prepare_pair

DISSIMILARITIES = ("euclidean", "correlation", "cosine")
CORRELATIONS = ("spearman", "pearson")


def dissimilarity_matrix(x: torch.Tensor, kind: str = "euclidean") -> torch.Tensor:
    """Condensed RDM: the n(n-1)/2 dissimilarities of pairs i < j (row-major, as ``scipy.spatial.distance.pdist``),
    in float64. ``"correlation"``: 1 - Pearson correlation of the two rows; ``"cosine"``: 1 - cosine."""
    x = x.to(torch.float64)
    if kind == "euclidean":
        full = torch.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist")
    else:
        rows = x - x.mean(dim=1, keepdim=True) if kind == "correlation" else x
        norms = torch.linalg.vector_norm(rows, dim=1)
        if not bool((norms > 0).all()):
            row = int((norms == 0).nonzero()[0, 0])
            raise ValueError(
                f"x: row {row} is {'constant' if kind == 'correlation' else 'zero'}, so its {kind} "
                "dissimilarity is undefined; use rdm='euclidean'"
            )
        unit = rows / norms[:, None]
        full = 1.0 - unit @ unit.T
    upper = torch.ones(x.shape[0], x.shape[0], dtype=torch.bool, device=x.device).triu(diagonal=1)
    return full[upper]


def average_ranks(values: torch.Tensor) -> torch.Tensor:
    """1-based ranks, ties sharing their average rank (as ``scipy.stats.rankdata``)."""
    ordered, order = torch.sort(values)
    _, inverse, counts = torch.unique_consecutive(ordered, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).to(torch.float64)
    mean_rank = ends - (counts.to(torch.float64) - 1) / 2
    ranks = torch.empty_like(mean_rank[inverse])
    ranks[order] = mean_rank[inverse]
    return ranks


def pearson(u: torch.Tensor, v: torch.Tensor, names: tuple[str, str]) -> torch.Tensor:
    uc, vc = u - u.mean(), v - v.mean()
    norm_u, norm_v = torch.linalg.vector_norm(uc), torch.linalg.vector_norm(vc)
    for norm, name in ((norm_u, names[0]), (norm_v, names[1])):
        if not norm > 0:
            raise ValueError(f"{name}: all pairwise dissimilarities are equal, so their correlation is undefined")
    return ((uc @ vc) / (norm_u * norm_v)).clamp(-1.0, 1.0)


def rsa(x: ArrayLike, y: ArrayLike, rdm: str = "euclidean", correlation: str = "spearman") -> float | torch.Tensor:
    """Representational similarity analysis: the correlation between the dissimilarity matrices of x and y.

    Parameters
    ----------
    x, y : (n, p), (n, q) (or (n, ...), flattened) arrays or tensors of the same samples.
    rdm : {"euclidean", "correlation", "cosine"}
        Dissimilarity of two samples' rows: Euclidean distance (default), ``1 - Pearson r`` of the two rows (the
        neuroscience convention; centres each row across its features), or ``1 - cosine``.
    correlation : {"spearman", "pearson"}
        How the n(n-1)/2 off-diagonal entries of the two RDMs are compared. Spearman (default, average ranks for
        ties) is not differentiable; Pearson is.

    Notes
    -----
    Centering: none needed for Euclidean RDMs (distances ignore translation); "correlation" centres each row.
    Similarity in [-1, 1], symmetric. With Euclidean RDMs: invariant to orthogonal maps, isotropic scaling and
    translation of either side. Needs O(n^2) memory.
    """
    check_choice(rdm, "rdm", DISSIMILARITIES)
    check_choice(correlation, "correlation", CORRELATIONS)
    xt, yt = prepare_pair(x, y, min_rows=3, measure="RSA", varying=True)
    # Every RDM here scales by a constant (or not at all) with the data, and both correlations ignore that constant:
    # dividing by the largest magnitude first keeps values of 1e-200 or 1e200 from underflowing or overflowing.
    dx, dy = dissimilarity_matrix(_unit_peak(xt), rdm), dissimilarity_matrix(_unit_peak(yt), rdm)
    if correlation == "spearman":
        dx, dy = average_ranks(dx.detach()), average_ranks(dy.detach())
    return as_result(pearson(dx, dy, ("x", "y")), x, xt)


def _unit_peak(x: torch.Tensor) -> torch.Tensor:
    x = x.to(torch.float64)
    peak = x.detach().abs().max()
    return x / peak if peak > 0 else x
