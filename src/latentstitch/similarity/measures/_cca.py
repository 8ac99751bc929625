"""Canonical correlation analysis and its descendants: mean CCA, R^2_CCA, SVCCA (Raghu et al. 2017) and PWCCA
(Morcos et al. 2018), all computed from centred second moments (``CrossMoments``), so each also streams.

Canonical correlations are the singular values of ``Wx^T Cxy Wy``, where ``Wx`` whitens x (``Wx^T Cxx Wx = I``).
Columns are first scaled to unit variance (which leaves CCA unchanged) so that the rank decision below does not
depend on the units of each neuron; constant columns are dropped. Directions of the correlation matrix whose
eigenvalue is below ``rtol * largest`` are treated as null (default ``rtol = p * max(eps_float64, eps_input^2)``,
the accuracy of the float64 moments and of the input's rounding), with a ``RankDeficiencyWarning`` naming the
numerical rank. There are ``min(rank_x, rank_y)`` canonical correlations.
"""

from __future__ import annotations

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.callsite import warn_at_caller
from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import check_choice, check_int, check_number
from latentstitch.similarity.measures._registry import ZeroVarianceError, as_result, moments_of, prepare_pair
from latentstitch.similarity.measures._sample_size import warn_if_trivial

REDUCTIONS = ("mean", "r2")


def default_rtol(width: int, dtype: torch.dtype) -> float:
    return width * max(torch.finfo(torch.float64).eps, torch.finfo(dtype).eps ** 2)


def check_rtol(rtol: object, name: str = "rtol") -> float | None:
    """None (the default threshold) or a relative eigenvalue threshold in [0, 1)."""
    return None if rtol is None else check_number(rtol, name, low=0.0, high=1.0, high_open=True)


def check_keep(keep: object, name: str = "keep") -> float | int:
    """SVCCA's ``keep``: a fraction of variance in (0, 1] (float) or a number of directions >= 1 (int)."""
    if isinstance(keep, (bool, np.bool_)) or not isinstance(keep, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a float fraction in (0, 1] or an int count, got {keep!r}")
    if isinstance(keep, (int, np.integer)):
        return check_int(keep, name, minimum=1)
    return check_number(keep, name, low=0.0, high=1.0, low_open=True)


def whitener(scatter: torch.Tensor, name: str, measure: str, rtol: float | None, dtype: torch.dtype) -> torch.Tensor:
    """A (p, r) matrix W with ``W^T scatter W = I_r``, r the numerical rank (see the module docstring)."""
    p = scatter.shape[0]
    variances = torch.diagonal(scatter)
    top = variances.max()
    if not top > 0:
        raise ZeroVarianceError(name, measure)
    varying = variances > top * torch.finfo(torch.float64).eps ** 2
    scale = torch.rsqrt(variances[varying])
    correlation = scatter[varying][:, varying] * scale[:, None] * scale[None, :]
    eigenvalues, eigenvectors = torch.linalg.eigh(correlation.detach())
    tol = (default_rtol(p, dtype) if rtol is None else rtol) * eigenvalues.max()
    rank = int((eigenvalues > tol).sum())
    if rank < p:
        warn_at_caller(
            f"{name}: numerical rank {rank} < {p} features ({p - int(varying.sum())} constant); {measure} uses the "
            f"{rank} independent directions",
            RankDeficiencyWarning,
        )
    # Whiten by a Cholesky factor (its gradient stays finite even for repeated eigenvalues), on the kept eigenvectors
    # when rank deficient (the kept subspace is then held fixed for the gradient).
    basis = eigenvectors[:, eigenvalues > tol] if rank < correlation.shape[0] else None
    reduced = correlation if basis is None else basis.T @ correlation @ basis
    factor = torch.linalg.cholesky(reduced)
    eye = torch.eye(rank, dtype=factor.dtype, device=factor.device)
    local = torch.linalg.solve_triangular(factor, eye, upper=False).T
    if basis is not None:
        local = basis @ local
    whitening = scatter.new_zeros(p, rank)
    whitening[varying] = scale[:, None] * local
    return whitening


def canonical_pairs(
    cxx: torch.Tensor, cxy: torch.Tensor, cyy: torch.Tensor, n: int, measure: str, rtol: float | None, dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(rho, wx, u)``: canonical correlations (descending, in [0, 1]), x's whitener and the left singular vectors,
    so that x's canonical weights are ``wx @ u``."""
    wx = whitener(cxx, "x", measure, rtol, dtype)
    wy = whitener(cyy, "y", measure, rtol, dtype)
    rank_x, rank_y = wx.shape[1], wy.shape[1]
    if rank_x + rank_y > n - 1:
        warn_at_caller(
            f"x, y: ranks {rank_x} + {rank_y} exceed n - 1 = {n - 1}, so at least {rank_x + rank_y - n + 1} canonical "
            f"correlations are 1 whatever the data; {measure} is then not informative. Use more samples than "
            "features, or svcca to reduce the dimension first.",
            RankDeficiencyWarning,
        )
    u, rho, _ = torch.linalg.svd(wx.T @ cxy @ wy, full_matrices=False)
    return rho.clamp(0.0, 1.0), wx, u


def cca_from_moments(m: CrossMoments, reduce: str = "mean", rtol: float | None = None, dtype=torch.float64):
    """Mean canonical correlation, or R^2_CCA (mean squared canonical correlation), from centred moments."""
    measure = "CCA" if reduce == "mean" else "R^2_CCA"
    cxx, cxy, cyy = m.centered_aa(), m.centered_ab(), m.centered_bb()
    if reduce == "r2":
        # ||Wx^T Cxy Wy||_F^2 = sum rho_i^2, without an SVD (smoother gradient).
        wx = whitener(cxx, "x", measure, rtol, dtype)
        wy = whitener(cyy, "y", measure, rtol, dtype)
        product = wx.T @ cxy @ wy
        return (product * product).sum() / min(wx.shape[1], wy.shape[1])
    rho, _, _ = canonical_pairs(cxx, cxy, cyy, m.count, measure, rtol, dtype)
    return rho.mean()


def svcca_from_moments(m: CrossMoments, keep: float | int = 0.99, rtol: float | None = None, dtype=torch.float64):
    """SVCCA: mean CCA between the top principal directions of each side (from the same moments)."""
    cxx, cxy, cyy = m.centered_aa(), m.centered_ab(), m.centered_bb()
    vx = principal_directions(cxx, keep, "x")
    vy = principal_directions(cyy, keep, "y")
    rho, _, _ = canonical_pairs(vx.T @ cxx @ vx, vx.T @ cxy @ vy, vy.T @ cyy @ vy, m.count, "SVCCA", rtol, dtype)
    return rho.mean()


def principal_directions(scatter: torch.Tensor, keep: float | int, name: str) -> torch.Tensor:
    eigenvalues, eigenvectors = torch.linalg.eigh(scatter)
    eigenvalues, eigenvectors = eigenvalues.flip(0).clamp_min(0.0), eigenvectors.flip(1)
    total = eigenvalues.sum()
    if not total > 0:
        raise ZeroVarianceError(name, "SVCCA")
    if isinstance(keep, (int, np.integer)):
        count = min(int(keep), scatter.shape[0])
    else:
        # The fewest leading directions whose variance reaches the fraction `keep` of the total.
        fraction = torch.cumsum(eigenvalues, 0) / total
        count = int((fraction < keep - 1e-12).sum()) + 1
    return eigenvectors[:, : min(count, scatter.shape[0])]


def pwcca_from_moments(m: CrossMoments, rtol: float | None = None, dtype=torch.float64):
    """Projection-weighted CCA: canonical correlations weighted by how much of x's neurons each canonical variate
    accounts for, ``alpha_i ~ sum_j |<h_i, x_j>|`` (h_i unit-norm canonical variate of x, x_j centred neuron j)."""
    cxx, cxy, cyy = m.centered_aa(), m.centered_ab(), m.centered_bb()
    rho, wx, u = canonical_pairs(cxx, cxy, cyy, m.count, "PWCCA", rtol, dtype)
    weights_x = wx @ u  # canonical weights a_i: h_i = Xc a_i, |h_i| = 1
    projections = (weights_x.T @ cxx).abs().sum(dim=1)  # <h_i, x_j> = a_i^T Cxx e_j
    alpha = projections / projections.sum()
    return (alpha * rho).sum()


# --- public functions ------------------------------------------------------------------------------------------


def cca(x: ArrayLike, y: ArrayLike, reduce: str = "mean", *, rtol: float | None = None) -> float | torch.Tensor:
    """Canonical correlation analysis similarity: the mean canonical correlation, or R^2_CCA.

    ``rho_i`` = canonical correlations of the column-centred x and y (singular values of
    ``Cxx^{-1/2} Cxy Cyy^{-1/2}``); ``reduce="mean"``: ``(1/r) sum_i rho_i``; ``reduce="r2"``:
    ``(1/r) sum_i rho_i^2`` = ``||Q_y^T Q_x||_F^2 / r`` (Kornblith et al.'s R^2_CCA), ``r = min(rank_x, rank_y)``
    (= ``min(p, q)`` at full rank).

    Parameters
    ----------
    x, y : (n, p), (n, q) (or (n, ...), flattened) arrays or tensors of the same samples.
    reduce : {"mean", "r2"}
    rtol : float, optional
        Relative eigenvalue threshold for the rank decision (see the module docstring).

    Notes
    -----
    Centering: columns centred. Similarity in [0, 1], symmetric, invariant to every invertible linear map (hence to
    rotations, scalings per axis, permutations) and to translation of either side. Needs n well above p + q:
    when ``rank_x + rank_y > n - 1`` some correlations are 1 by construction (warned). Rank deficiency (constant or
    collinear columns) is handled by dropping null directions, with a ``RankDeficiencyWarning``; never NaN.
    Computed in float64; differentiable for torch inputs.
    """
    check_choice(reduce, "reduce", REDUCTIONS)
    check_rtol(rtol)
    xt, yt = prepare_pair(x, y, min_rows=2, measure="CCA", varying=True)
    warn_if_trivial("mean_cca" if reduce == "mean" else "r2_cca", xt.shape[0], xt.shape[1], yt.shape[1])
    return as_result(cca_from_moments(moments_of(xt, yt), reduce, rtol, xt.dtype), x, xt)


def svcca(x: ArrayLike, y: ArrayLike, keep: float | int = 0.99, *, rtol: float | None = None) -> float | torch.Tensor:
    """SVCCA (Raghu et al. 2017): mean CCA between the leading principal subspaces of x and y.

    Each side is centred and reduced to its top principal directions: the fewest explaining at least ``keep`` of its
    variance (float in (0, 1]; 0.99 as in the paper) or exactly ``keep`` directions (int; Google's tutorial uses
    20). Then ``cca(x V_x, y V_y, reduce="mean")``.

    Centering: columns centred. Similarity in [0, 1], symmetric. Invariant to orthogonal maps, isotropic scaling,
    translation (the truncation depends on the variance spectrum, so not to per-axis scaling or general linear
    maps). Computed from moments in float64; differentiable for torch inputs (through the eigendecomposition, which
    needs distinct leading eigenvalues).
    """
    check_keep(keep)
    check_rtol(rtol)
    xt, yt = prepare_pair(x, y, min_rows=2, measure="SVCCA", varying=True)
    warn_if_trivial("svcca", xt.shape[0], xt.shape[1], yt.shape[1])
    return as_result(svcca_from_moments(moments_of(xt, yt), keep, rtol, xt.dtype), x, xt)


def pwcca(x: ArrayLike, y: ArrayLike, *, rtol: float | None = None) -> float | torch.Tensor:
    """Projection-weighted CCA (Morcos et al. 2018), as a similarity ``sum_i alpha_i rho_i`` (distance: 1 - it).

    ``alpha_i`` is proportional to ``sum_j |<h_i, x_j>|``: h_i the i-th unit-norm canonical variate of x, x_j the
    centred activations of neuron j of x. Asymmetric: the weights come from x. Follows Ding et al.'s
    ``sim_metric`` (``pwcca_dist``); where x has more independent directions than y, only the ``rank_y`` canonical
    variates that have a correlation are weighted (Ding's code also normalises over x's remaining, arbitrary
    directions; Google's ``pwcca.py`` swaps to y's side there, with a known bug).

    Centering: columns centred. Similarity in [0, 1]. Invariant to any invertible linear map of y; for x only to
    translation, isotropic scaling, permutation and sign flips of neurons (the weights depend on x's neuron basis).
    Computed from moments in float64; differentiable for torch inputs.
    """
    check_rtol(rtol)
    xt, yt = prepare_pair(x, y, min_rows=2, measure="PWCCA", varying=True)
    warn_if_trivial("pwcca", xt.shape[0], xt.shape[1], yt.shape[1])
    return as_result(pwcca_from_moments(moments_of(xt, yt), rtol, xt.dtype), x, xt)
