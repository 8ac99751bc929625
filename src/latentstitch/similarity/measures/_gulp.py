"""GULP (Boix-Adsera et al., NeurIPS 2022): how differently the best (ridge) linear predictors built on two
representations can behave, over all bounded linear tasks; from centred second moments, so it also streams.

Each side is centred and scaled to unit total variance (ReSi's and the GULP authors' normalisation: columns centred,
``||X||_F^2 = n``), ``S_x = X^T X / n`` (trace 1), ``S_xy = X^T Y / n``, ``A_x = (S_x + lambda I)^+``:

    GULP^2 = tr(S_x A_x S_x A_x) + tr(S_y A_y S_y A_y) - 2 tr(A_x S_xy A_y S_yx)

(``predictor_dist`` of the GULP repository, as ReSi calls it). With ``lambda = 0`` the first two terms are the
ranks and the last is twice the sum of squared canonical correlations: ``rank_x + rank_y - 2 sum_i rho_i^2``.
"""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.callsite import warn_at_caller
from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import check_nonnegative
from latentstitch.similarity.measures._cca import default_rtol
from latentstitch.similarity.measures._registry import ZeroVarianceError, as_result, moments_of, prepare_pair
from latentstitch.similarity.measures._sample_size import warn_if_trivial


def ridge_inverse(
    scatter: torch.Tensor, ridge: float, name: str, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(S, A)``: the unit-trace covariance ``S = scatter / tr(scatter)`` and ``A = (S + ridge I)^-1`` (the
    pseudo-inverse over the numerical rank when ``ridge == 0``, with a ``RankDeficiencyWarning``)."""
    total = torch.trace(scatter)
    if not total > 0:
        raise ZeroVarianceError(name, "GULP")
    covariance = scatter / total
    eigenvalues, eigenvectors = torch.linalg.eigh(covariance)
    eigenvalues = eigenvalues.clamp_min(0.0)
    if ridge > 0:
        inverse = 1.0 / (eigenvalues + ridge)
    else:
        p = scatter.shape[0]
        keep = eigenvalues > default_rtol(p, dtype) * eigenvalues.max()
        rank = int(keep.sum())
        if rank < p:
            warn_at_caller(
                f"{name}: numerical rank {rank} < {p} features; GULP with ridge=0 uses the {rank} independent "
                "directions (pass ridge > 0 to regularise)",
                RankDeficiencyWarning,
            )
        inverse = torch.where(keep, 1.0 / torch.where(keep, eigenvalues, 1.0), 0.0)
    return covariance, (eigenvectors * inverse) @ eigenvectors.T


def gulp_from_moments(m: CrossMoments, ridge: float = 0.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    sx, ax = ridge_inverse(m.centered_aa(), ridge, "x", dtype)
    sy, ay = ridge_inverse(m.centered_bb(), ridge, "y", dtype)
    sxy = m.centered_ab() / torch.sqrt(torch.trace(m.centered_aa()) * torch.trace(m.centered_bb()))
    return gulp_terms(sx, ax, sy, ay, sxy)


def gulp_terms(sx, ax, sy, ay, sxy: torch.Tensor) -> torch.Tensor:
    """``tr(SxAx SxAx) + tr(SyAy SyAy) - 2 tr(Ax Sxy Ay Syx)``; ``sxy`` may hold a batch ``(B, p, q)``."""
    px, py = sx @ ax, sy @ ay
    own = (px * px.T).sum() + (py * py.T).sum()
    cross = ((ax @ sxy @ ay) * sxy).sum(dim=(-2, -1))  # tr(A_x S_xy A_y S_yx), A symmetric
    return (own - 2 * cross).clamp_min(0.0)


def gulp(x: ArrayLike, y: ArrayLike, ridge: float = 0.0) -> float | torch.Tensor:
    """GULP distance between representations (Boix-Adsera et al. 2022), as ReSi's ``Gulp`` computes it.

    ``ridge`` is the GULP paper's lambda, on the normalised scale (each side's covariance has trace 1): 0 (default,
    ReSi's) compares unregularised least-squares predictors; values around 1e-3 to 1 regularise them.

    Notes
    -----
    The squared distance of the paper (what ReSi and the GULP code return), in [0, p + q]: 0 when the predictors
    agree on every task. Centering: columns centred, each side scaled to ``||X||_F^2 = n``. Symmetric. With
    ``ridge = 0``: invariant to any invertible linear map and translation of either side, and, like CCA, trivial
    once N <= d + 1 (the value then depends on the widths only; warned); with ``ridge > 0``: to orthogonal maps,
    isotropic scaling and translation. Computed in float64 from moments; differentiable for torch inputs.
    """
    ridge = check_nonnegative(ridge, "ridge")
    xt, yt = prepare_pair(x, y, min_rows=2, measure="GULP", varying=True)
    if ridge == 0:
        warn_if_trivial("gulp", xt.shape[0], xt.shape[1], yt.shape[1])
    return as_result(gulp_from_moments(moments_of(xt, yt), ridge, xt.dtype), x, xt)
