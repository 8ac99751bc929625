"""The least-squares solution read from accumulated moments (``CrossMoments``): ridge-regularised normal equations
solved in float64 with a rank check, and the R^2 of a fitted map computed from the same statistics, without the
data. A rank-deficient system warns (``RankDeficiencyWarning``) and is solved by the minimum-norm solution."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from latentstitch._core.moments import CrossMoments


def solve_least_squares(
    moments: CrossMoments, *, bias: bool = True, ridge: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The (ridge) least-squares map ``b ~ a @ coef + intercept`` from accumulated moments, in float64.

    With ``bias`` the normal equations use centred moments (equivalent to ``pinv([A, 1]) B``); without, raw
    moments (``pinv(A) B``). ``ridge`` adds ``ridge * I`` to the Gram matrix (the intercept is not penalised).

    Solved by an eigendecomposition of the p x p Gram matrix: directions whose eigenvalue is below
    ``p * eps64 * max eigenvalue`` are dropped (the minimum-norm solution) and a warning names the numerical rank.
    Nothing is dropped silently.

    Returns ``(coef (p, q), intercept (q,), numerical_rank)``.
    """
    if not moments.paired:
        raise ValueError("moments: least squares needs paired statistics (update(a, b))")
    minimum = 2 if bias else 1
    if moments.count < minimum:
        raise ValueError(f"a: least squares needs at least {minimum} samples, got {moments.count}")
    gram = moments.centered_aa() if bias else moments.raw_aa()
    cross = moments.centered_ab() if bias else moments.raw_ab()
    p = gram.shape[0]
    if ridge < 0:
        raise ValueError(f"ridge: expected >= 0, got {ridge}")
    eigenvalues, eigenvectors = torch.linalg.eigh(gram)
    eigenvalues = eigenvalues + ridge
    top = float(eigenvalues.detach().max())
    keep = eigenvalues > p * torch.finfo(torch.float64).eps * max(top, 0.0)
    rank = int(keep.sum())
    if rank < p:
        warnings.warn(
            f"a: numerical rank {rank} < {p} features over {moments.count} samples"
            f"{' (after centring)' if bias else ''}; the least-squares map is not unique and the minimum-norm "
            "solution is returned. Use more samples, fewer features, or ridge > 0.",
            RankDeficiencyWarning,
            stacklevel=3,
        )
    v = eigenvectors[:, keep]
    coef = v @ ((v.T @ cross) / eigenvalues[keep, None])
    if bias:
        intercept = moments.mean_b - moments.mean_a @ coef
    else:
        intercept = torch.zeros(cross.shape[1], dtype=torch.float64, device=cross.device)
    return coef, intercept, rank


def residual_r2(moments: CrossMoments, coef: torch.Tensor, intercept: torch.Tensor) -> float:
    """Variance-weighted R^2 of the prediction ``a @ coef + intercept`` of ``b``, from moments alone.

    ``R^2 = 1 - sum ||b_i - pred_i||^2 / sum ||b_i - mean_b||^2`` (one number over all output features; equals
    scikit-learn's ``r2_score(..., multioutput="variance_weighted")``).
    """
    return float(residual_r2_tensor(moments, coef, intercept))


def residual_r2_tensor(moments: CrossMoments, coef: torch.Tensor, intercept: torch.Tensor) -> torch.Tensor:
    """``residual_r2`` as a 0-d float64 tensor, differentiable when the moments track gradients."""
    if not moments.paired:
        raise ValueError("moments: R^2 needs paired statistics (update(a, b))")
    n = moments.count
    if n < 2:
        raise ValueError(f"R^2 needs at least 2 samples, got {n}")
    coef = coef.to(torch.float64)
    intercept = intercept.to(torch.float64)
    # Residual r = b - a W - c, expanded in raw moments: sum |r|^2 = tr(BB) - 2 tr(W^T AB) + tr(W^T AA W)
    #   - 2 c.(sum b) + 2 c.(W^T sum a) + n |c|^2
    sum_a = moments.sum_a + n * moments.shift_a
    sum_b = moments.sum_b + n * moments.shift_b
    aa, ab, bb = moments.raw_aa(), moments.raw_ab(), moments.raw_bb()
    residual = (
        torch.trace(bb)
        - 2 * torch.sum(coef * ab)
        + torch.sum(coef * (aa @ coef))
        - 2 * intercept @ sum_b
        + 2 * intercept @ (coef.T @ sum_a)
        + n * intercept @ intercept
    )
    total = torch.trace(moments.centered_bb())
    if total <= 0:
        raise ValueError("b: has zero variance, so R^2 is undefined")
    return 1.0 - residual / total


def _weighted_centred(a: torch.Tensor, b: torch.Tensor, weights: torch.Tensor | None):
    """``(sqrt(w) (a - mean_a), sqrt(w) (b - mean_b), mean_a, mean_b, root)`` with weighted means (``root``:
    ``sqrt(w)``; every weight 1 when ``weights`` is None), in float64."""
    a, b = a.to(torch.float64), b.to(torch.float64)
    w = torch.ones(a.shape[0], dtype=torch.float64, device=a.device) if weights is None else weights.double()
    mean_a, mean_b = (w @ a) / w.sum(), (w @ b) / w.sum()
    root = w.sqrt()[:, None]
    return root * (a - mean_a), root * (b - mean_b), mean_a, mean_b, root


@dataclass(frozen=True)
class RidgeSvd:
    """The thin SVD ``u diag(s) vh`` of weighted centred rows ``sqrt(w) (a - mean_a)`` with the weighted centred
    targets, their projection ``u^T targets``, the means and ``root`` (``sqrt(w)`` as a column; ``weighted``:
    whether weights were given): what
    ``ridge_loo_errors`` and ``weighted_ridge`` both read, so a caller that wants both decomposes once
    (``ridge_svd``)."""

    u: torch.Tensor
    s: torch.Tensor
    vh: torch.Tensor
    targets: torch.Tensor
    projected: torch.Tensor
    mean_a: torch.Tensor
    mean_b: torch.Tensor
    root: torch.Tensor
    weighted: bool


def ridge_svd(a: torch.Tensor, b: torch.Tensor, weights: torch.Tensor | None = None) -> RidgeSvd:
    """The decomposition every ridge of ``b ~ a @ coef + intercept`` (unpenalised intercept, row weights ``w``) is
    read from, in float64."""
    rows, targets, mean_a, mean_b, root = _weighted_centred(a, b, weights)
    u, s, vh = torch.linalg.svd(rows, full_matrices=False)
    return RidgeSvd(u, s, vh, targets, u.T @ targets, mean_a, mean_b, root, weights is not None)


def ridge_loo_errors(
    a: torch.Tensor,
    b: torch.Tensor,
    alphas: np.ndarray,
    *,
    weights: torch.Tensor | None = None,
    scored: torch.Tensor | None = None,
    column_scale: torch.Tensor | None = None,
) -> np.ndarray:
    """The leave-one-out mean squared error of ridge least squares with an unpenalised intercept, for every alpha,
    from one thin SVD of the centred rows (the efficient leave-one-out of Golub, Heath and Wahba 1979, which
    scikit-learn's ``RidgeCV`` computes): with ``A_c = U diag(s) V^T`` the hat matrix is
    ``H = 1 1^T / n + U diag(s^2 / (s^2 + alpha)) U^T`` and row i's held-out residual ``(b_i - (H b)_i) / (1 - H_ii)``.
    The mean runs over rows and target columns, as ``RidgeCV``'s default score.

    ``weights`` (n,) > 0: weighted ridge (row i's squared error counts ``w_i`` times, the means weighted): the same
    on the rows times ``sqrt(w)``, whose hat matrix has ``sqrt(w) sqrt(w)^T / sum w`` for the intercept; row i's
    held-out residual is then ``r_i / (1 - H_ii)`` in its own units. ``scored`` (n,) bool: average over these rows
    only (the others still fit); ``column_scale`` (q,) > 0: each target column's residual divided by it first."""
    return loo_errors_from_svd(ridge_svd(a, b, weights), alphas, scored=scored, column_scale=column_scale)


def loo_errors_from_svd(
    svd: RidgeSvd, alphas: np.ndarray, *, scored: torch.Tensor | None = None, column_scale: torch.Tensor | None = None
) -> np.ndarray:
    """``ridge_loo_errors`` from the rows' decomposition (``ridge_svd``). Only the scored rows' residuals and
    leverages are computed: each is its own row of the hat matrix, which the other rows do not change."""
    u, s, targets, projected, root = svd.u, svd.s, svd.targets, svd.projected, svd.root
    n = u.shape[0]
    base = root[:, 0] ** 2 / (root[:, 0] ** 2).sum() if svd.weighted else torch.full_like(root[:, 0], 1.0 / n)
    if scored is not None:
        u, targets, root, base = u[scored], targets[scored], root[scored], base[scored]
    squares = u**2
    out = np.empty(alphas.size)
    for j, alpha in enumerate(alphas):
        shrink = s**2 / (s**2 + float(alpha))
        residual = targets - u @ (shrink[:, None] * projected)
        if svd.weighted:
            residual = residual / root
        leverage = base + squares @ shrink
        held = residual / (1.0 - leverage)[:, None]
        if column_scale is not None:
            held = held / column_scale
        out[j] = float((held**2).mean())
    return out


def weighted_ridge(
    a: torch.Tensor, b: torch.Tensor, alpha: float, weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(coef, intercept)`` of weighted ridge least squares ``b ~ a @ coef + intercept`` (the intercept not
    penalised; ``alpha`` added to the singular values squared of the weighted centred rows, as ``ridge_loo_errors``),
    in float64."""
    return ridge_from_svd(ridge_svd(a, b, weights), alpha)


def ridge_from_svd(svd: RidgeSvd, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``weighted_ridge`` from the rows' decomposition (``ridge_svd``)."""
    s, vh = svd.s, svd.vh
    coef = vh.T @ ((s / (s**2 + float(alpha)))[:, None] * svd.projected)
    return coef, svd.mean_b - svd.mean_a @ coef


class RankDeficiencyWarning(UserWarning):
    """A linear system had fewer independent directions than unknowns; the minimum-norm solution was used."""
