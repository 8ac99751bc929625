"""L1-regularised least-squares matching (Lasso), the paper's sparse direct matching (Section 8)."""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import torch
from sklearn.exceptions import ConvergenceWarning

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.least_squares import solve_least_squares
from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import Rule, check_bool, check_nonnegative, check_positive_int, rule
from latentstitch.stitching._base import _MomentStitcher, intercept_for

# The paper's sparsity figure: entries with |m_ij| below this count as zero (Csiszárik et al. 2021, Fig. 8)
SPARSITY_THRESHOLD = 1e-4

# Coordinates updated between refreshes of the gradient by one matrix product (speed only; same iterates)
_BLOCK = 64


class SparseLasso(_MomentStitcher):
    """Sparse stitching map: each target feature is its own Lasso regression on all source features.

    For every output column j: minimise ``1/(2n) ||b_j - A m_j - c_j||^2 + alpha ||m_j||_1`` (scikit-learn's
    ``Lasso`` objective, loss scaled by 1/(2n); the paper's eq. 3 with an elementwise L1 penalty). The intercept is
    not penalised.

    Solved by cyclic coordinate descent on the Gram matrix ``A^T A`` and ``A^T B``, all outputs at once, until every
    column's duality gap is below ``tol * ||b_j - mean(b_j)||^2`` (scikit-learn's criterion). Since only these
    sufficient statistics are used, ``partial_fit`` works on streams of chunks (each call warm-starts from the
    previous solution); being iterative, a streamed fit equals the one-shot fit up to the solver tolerance, not
    to rounding.

    Parameters
    ----------
    alpha : float
        L1 strength, in scikit-learn's units (per sample). ``alpha=0`` is least squares, solved exactly as
        ``LeastSquares`` does.
    bias : bool
        Fit an unpenalised intercept (default), i.e. solve on centred statistics.
    max_iter : int
        Maximum number of sweeps over the source features; a ``ConvergenceWarning`` reports the gap if reached.
    tol : float
        Duality-gap tolerance, relative to each target feature's sum of squares.

    Attributes
    ----------
    coef_ : (p, q), intercept_ : (q,)
        ``transform(a) = a @ coef_ + intercept_``. Exact zeros where the L1 penalty removes an entry.
    sparsity_ : float
        Share of entries of ``coef_`` with ``|m_ij| < 1e-4``, the paper's sparsity figure. (The threshold is
        absolute, so it depends on the scale of the activations, as in the paper.)
    n_iter_ : int
        Sweeps run by the last fit; ``dual_gap_`` the largest final duality gap over outputs (scikit-learn's
        scaling: divided by n).
    """

    _products = ("aa", "ab", "bb_diag")

    def __init__(self, alpha: float = 1.0, bias: bool = True, max_iter: int = 1000, tol: float = 1e-4):
        self.alpha = alpha
        self.bias = bias
        self.max_iter = max_iter
        self.tol = tol

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "alpha": rule(check_nonnegative),
        "bias": rule(check_bool),
        "max_iter": rule(check_positive_int),
        "tol": rule(check_nonnegative),
    }

    def _solve(self, moments: CrossMoments, *, input_dtype: torch.dtype) -> dict[str, Any]:
        n = moments.count
        if self.alpha == 0:  # plain least squares: solved exactly (the duality gap has no L1 term to close)
            coef, intercept, _ = solve_least_squares(moments, bias=self.bias)
            return {
                "coef_": coef,
                "intercept_": intercept,
                "sparsity_": _sparsity(coef),
                "n_iter_": 0,
                "dual_gap_": 0.0,
            }
        if self.bias:
            gram, cross, target_ss = moments.centered_aa(), moments.centered_ab(), moments.centered_bb_diag()
        else:
            gram, cross, target_ss = moments.raw_aa(), moments.raw_ab(), moments.raw_bb_diag()
        previous = getattr(self, "coef_", None)  # partial_fit warm start (fit starts from zero)
        if previous is None:
            start = torch.zeros_like(cross)
        else:
            start = as_float_tensor(previous, "coef_").to(device=cross.device, dtype=torch.float64, copy=True)
        coef, n_iter, gaps = lasso_coordinate_descent(
            gram, cross, target_ss, float(self.alpha) * n, start, max_iter=self.max_iter, tol=float(self.tol)
        )
        converged = bool((gaps <= self.tol * target_ss).all())
        if not converged:
            warnings.warn(
                f"SparseLasso did not converge in max_iter={self.max_iter} sweeps: largest duality gap "
                f"{float((gaps / target_ss.clamp(min=1e-300)).max()):.2e} of the target's sum of squares, "
                f"tol={self.tol}. Increase max_iter or tol, or standardise the activations.",
                ConvergenceWarning,
                stacklevel=4,
            )
        intercept = intercept_for(moments, coef, self.bias)
        return {
            "coef_": coef,
            "intercept_": intercept,
            "sparsity_": _sparsity(coef),
            "n_iter_": n_iter,
            "dual_gap_": float(gaps.max()) / n,
        }


def _sparsity(coef: torch.Tensor) -> float:
    return float((coef.abs() < SPARSITY_THRESHOLD).double().mean())


def lasso_coordinate_descent(
    gram: torch.Tensor,
    cross: torch.Tensor,
    target_ss: torch.Tensor,
    penalty: float,
    coef: torch.Tensor,
    *,
    max_iter: int,
    tol: float,
) -> tuple[torch.Tensor, int, torch.Tensor]:
    """Minimise ``1/2 ||B - A M||_F^2 + penalty ||M||_1`` given ``gram = A^T A``, ``cross = A^T B`` and the
    per-column ``target_ss = ||b_j||^2``, by cyclic coordinate descent over the rows of ``M`` (every column is an
    independent Lasso; they are updated together). ``coef`` (p, q) is the start, updated in place.

    Stops when each column's duality gap is at most ``tol * target_ss_j``. Returns ``(coef, sweeps, gaps)``.
    """
    p = gram.shape[0]
    diag = gram.diagonal()
    gaps = _duality_gaps(gram, cross, target_ss, penalty, coef)
    for sweep in range(1, max_iter + 1):
        for start in range(0, p, _BLOCK):
            stop = min(start + _BLOCK, p)
            # Correlation of each feature in the block with the residual at the block's start, then kept current
            # within the block through the block's own Gram entries: exactly cyclic coordinate descent.
            residual = cross[start:stop] - gram[start:stop] @ coef
            change = torch.zeros_like(residual)
            for j in range(start, stop):
                i = j - start
                if diag[j] <= 0:
                    continue
                rho = residual[i] - gram[j, start:stop] @ change + diag[j] * coef[j]
                new = torch.sign(rho) * (rho.abs() - penalty).clamp(min=0) / diag[j]
                change[i] = new - coef[j]
                coef[j] = new
        gaps = _duality_gaps(gram, cross, target_ss, penalty, coef)
        if bool((gaps <= tol * target_ss).all()):
            return coef, sweep, gaps
    return coef, max_iter, gaps


def _duality_gaps(
    gram: torch.Tensor, cross: torch.Tensor, target_ss: torch.Tensor, penalty: float, coef: torch.Tensor
) -> torch.Tensor:
    """Per-column duality gap of the Lasso (scikit-learn's ``enet_coordinate_descent_gram`` formula)."""
    correlation = cross - gram @ coef  # A^T r
    residual_ss = target_ss - 2 * (coef * cross).sum(0) + (coef * (cross - correlation)).sum(0)
    dual_norm = correlation.abs().amax(0)
    const = torch.where(dual_norm > penalty, penalty / dual_norm.clamp(min=1e-300), torch.ones_like(dual_norm))
    gap = torch.where(dual_norm > penalty, 0.5 * residual_ss * (1 + const**2), residual_ss)
    return gap + penalty * coef.abs().sum(0) - const * (target_ss - (coef * cross).sum(0))
