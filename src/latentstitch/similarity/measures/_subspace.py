"""Measures of shared subspaces and shared dimensions, from second moments (so they also stream):

- the eigenspace overlap score (May et al., NeurIPS 2019; ReSi's ``EigenspaceOverlapScore``): how much the column
  spaces of the two (uncentred) data matrices overlap;
- the effective number of shared dimensions, ENSD (Giaffar et al. 2023, camillerb/ENSD): how many dimensions the
  two representations' variance has in common.
"""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.moments import CrossMoments
from latentstitch.similarity.measures._cca import whitener
from latentstitch.similarity.measures._registry import ZeroVarianceError, as_result, moments_of, prepare_pair
from latentstitch.similarity.measures._sample_size import warn_if_trivial


def eigenspace_overlap_from_moments(m: CrossMoments, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``||U_x^T U_y||_F^2 / max(p, q)`` from raw (uncentred) moments: with W whitening ``X^T X``,
    ``U_x = X W_x`` is an orthonormal basis of x's column space, so ``U_x^T U_y = W_x^T X^T Y W_y``."""
    measure = "the eigenspace overlap"
    wx = whitener(m.raw_aa(), "x", measure, None, dtype)
    wy = whitener(m.raw_bb(), "y", measure, None, dtype)
    overlap = wx.T @ m.raw_ab() @ wy
    return (overlap * overlap).sum() / max(m.shift_a.shape[0], m.shift_b.shape[0])


def eigenspace_overlap(x: ArrayLike, y: ArrayLike) -> float | torch.Tensor:
    """Eigenspace overlap score (May et al. 2019), as ReSi's ``EigenspaceOverlapScore``:
    ``||U_x^T U_y||_F^2 / max(p, q)``, U the left singular vectors of x and y over their ranks (orthonormal bases
    of the n-dimensional column spaces).

    Centering: none (the column spaces of the raw data, so the index is not translation invariant). Similarity in
    [0, 1] (1: same column space and full rank ``max(p, q)``), symmetric. Invariant to any invertible linear map of
    either side (hence orthogonal maps, permutations, scalings). Once N <= d the column spaces fill the sample
    space and the value is ``min(rank_x, rank_y) / max(p, q)`` whatever the data. Computed in float64 from moments;
    differentiable for torch inputs. Rank deficiency is handled as in CCA (``RankDeficiencyWarning``).
    """
    xt, yt = prepare_pair(x, y, min_rows=1, measure="the eigenspace overlap")
    warn_if_trivial("eigenspace_overlap", xt.shape[0], xt.shape[1], yt.shape[1])
    return as_result(eigenspace_overlap_from_moments(moments_of(xt, yt), xt.dtype), x, xt)


def participation_ratio(scatter: torch.Tensor, name: str) -> torch.Tensor:
    """``tr(C)^2 / tr(C^2)``: the effective number of dimensions of a covariance (scale free)."""
    total = torch.trace(scatter)
    if not total > 0:
        raise ZeroVarianceError(name, "ENSD")
    return total**2 / (scatter * scatter).sum()


def ensd_terms(cxx: torch.Tensor, cyy: torch.Tensor, cross_frobenius: torch.Tensor) -> torch.Tensor:
    """ENSD from the two scatter matrices and ``||Xc^T Yc||_F^2`` (a number or a batch)."""
    alignment = cross_frobenius / (torch.trace(cxx) * torch.trace(cyy))
    return participation_ratio(cxx, "x") * participation_ratio(cyy, "y") * alignment


def ensd_from_moments(m: CrossMoments) -> torch.Tensor:
    cxy = m.centered_ab()
    return ensd_terms(m.centered_aa(), m.centered_bb(), (cxy * cxy).sum())


def ensd(x: ArrayLike, y: ArrayLike) -> float | torch.Tensor:
    """Effective number of shared dimensions (Giaffar, Rodriguez Buno, Anderson 2023; camillerb/ENSD ``ENSD``).

    With ``K = Xc Xc^T``, ``L = Yc Yc^T`` (columns centred) and the participation ratio ``PR(K) = tr(K)^2 / tr(K^2)``:
    ``ENSD = PR(K) PR(L) tr(K L) / (tr(K) tr(L))``. For identical representations it is their participation
    ratio; for orthogonal ones 0. Its companion distance ``(2/pi) arccos(ENSD / sqrt(PR(K) PR(L)))`` equals
    ``(2/pi) arccos(linear CKA)``.

    Centering: columns centred. A similarity in [0, min(PR_x, PR_y)] (no fixed upper end: it counts dimensions),
    symmetric. Invariant to orthogonal maps, isotropic scaling and translation of either side. Computed in feature
    space from moments (O(p^2 + q^2) memory); differentiable for torch inputs.
    """
    xt, yt = prepare_pair(x, y, min_rows=2, measure="ENSD", varying=True)
    warn_if_trivial("ensd", xt.shape[0], xt.shape[1], yt.shape[1])
    return as_result(ensd_from_moments(moments_of(xt, yt)), x, xt)
