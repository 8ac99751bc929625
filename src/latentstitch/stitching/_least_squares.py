"""Least-squares matching, the direct-matching stitching layer of Dr. Frankenstein (Csiszárik et al., 2021)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from latentstitch._core.least_squares import solve_least_squares
from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import Rule, check_bool, check_choice, check_nonnegative, rule
from latentstitch.stitching._base import _MomentStitcher

#: Units of ``LeastSquares``' ``ridge``: "gram" (the unnormalised Gram matrix A^T A) or "relative" (a fraction of
#: the mean eigenvalue of A^T A, trace(A^T A) / p: the same value means the same strength at any scale of the
#: data, any number of samples and with or without standardisation).
RIDGE_UNITS = ("gram", "relative")


def gram_ridge(ridge: float, units: str, gram_trace: float, features: int) -> float:
    """``ridge`` in units of the Gram matrix: as given for "gram", times ``trace / p`` for "relative"."""
    return ridge if units == "gram" else ridge * max(gram_trace, 0.0) / max(features, 1)


class LeastSquares(_MomentStitcher):
    """The least-squares stitching map ``M = pinv([A, 1]) B`` (the paper's ``ps_inv``), optionally ridge-regularised.

    Minimises ``||A M + 1 c^T - B||_F^2 + ridge ||M||_F^2`` over ``M`` (p, q) and the intercept ``c`` (q,). Solved
    in float64 from accumulated sufficient statistics (``A^T A``, ``A^T B``, sums, count), so ``fit`` needs no
    more memory than one chunk of samples whatever N, and ``partial_fit`` over a stream equals a one-shot fit.

    Rank deficiency (fewer samples than features, duplicated or constant features) is never truncated silently:
    directions with eigenvalue below ``p * eps64 * max eigenvalue`` of the Gram matrix get the minimum-norm
    solution and a ``RankDeficiencyWarning`` names the numerical rank. Use ``ridge > 0`` for a unique solution.

    Parameters
    ----------
    bias : bool
        Fit an intercept (default; the normal equations then use centred moments). ``bias=False`` gives
        ``pinv(A) B``, a map through the origin.
    ridge : float
        L2 penalty on ``M`` (not on the intercept), in ``ridge_units``.
    ridge_units : {"gram", "relative"}
        "gram" (default): ``ridge`` is added to the eigenvalues of the unnormalised Gram matrix ``A^T A`` (centred
        with ``bias``), so its strength depends on the scale of ``a`` and grows weaker as samples are added.
        "relative": ``ridge`` is a fraction of the mean eigenvalue ``trace(A^T A) / p``; ``ridge=0.1`` then means
        the same at any scale, any number of samples, standardised or not (scale-free).

    Attributes
    ----------
    coef_ : (p, q), intercept_ : (q,)
        ``transform(a) = a @ coef_ + intercept_``; float64, of the fit input's type.
    rank_ : int
        Numerical rank of the (centred, if ``bias``) Gram matrix of ``a``.
    moments_ : CrossMoments
        The accumulated statistics (``A^T A``, ``A^T B``; not ``B^T B``).

    Invariances: the fitted *predictions* are unchanged by any invertible linear map of ``a`` (and, with ``bias``,
    by translations of ``a``); ``coef_`` transforms accordingly. Conventions of inputs and layouts: see
    ``latentstitch.stitching``.

    Examples
    --------
    >>> stitch = LeastSquares().fit(acts_model1, acts_model2)   # doctest: +SKIP
    >>> layer = stitch.to_torch()                                # 1x1 conv for (N, C, H, W) activations
    """

    _products = ("aa", "ab")

    def __init__(self, bias: bool = True, ridge: float = 0.0, ridge_units: str = "gram"):
        self.bias = bias
        self.ridge = ridge
        self.ridge_units = ridge_units

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "bias": rule(check_bool),
        "ridge": rule(check_nonnegative),
        "ridge_units": rule(check_choice, choices=RIDGE_UNITS),
    }

    def _solve(self, moments: CrossMoments, *, input_dtype: torch.dtype) -> dict[str, Any]:
        ridge = float(self.ridge)
        if self.ridge_units == "relative" and ridge > 0:
            diagonal = moments.centered_aa_diag() if self.bias else moments.raw_aa_diag()
            ridge = gram_ridge(ridge, "relative", float(diagonal.sum()), diagonal.shape[0])
        coef, intercept, rank = solve_least_squares(moments, bias=self.bias, ridge=ridge)
        return {"coef_": coef, "intercept_": intercept, "rank_": rank}
