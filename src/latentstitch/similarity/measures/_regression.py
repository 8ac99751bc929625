"""R^2 of the least-squares fit of one representation from the other, from accumulated moments.

The fit and its score are ``_moments.solve_least_squares`` and ``_moments.residual_r2``: the same functions
that score a least-squares stitching layer, so the index and the stitching fit agree by construction.
"""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.least_squares import residual_r2_tensor, solve_least_squares
from latentstitch._core.moments import CrossMoments
from latentstitch.similarity.measures._registry import ZeroVarianceError, as_result, moments_of, prepare_pair
from latentstitch.similarity.measures._sample_size import warn_if_trivial


def r2_from_moments(m: CrossMoments) -> torch.Tensor:
    if not torch.trace(m.centered_bb()) > 0:
        raise ZeroVarianceError("y", "R^2")  # (checked here, where the predicted side is called y)
    coef, intercept, _ = solve_least_squares(m, bias=True)
    return residual_r2_tensor(m, coef, intercept)


def r2_linear(x: ArrayLike, y: ArrayLike) -> float | torch.Tensor:
    """R^2 of the least-squares prediction of ``y`` from ``x`` (with intercept): the variance of y explained by x.

    ``R^2 = 1 - sum_i |y_i - (x_i W + b)|^2 / sum_i |y_i - mean(y)|^2`` with ``(W, b)`` the least-squares fit
    (minimum-norm when x is rank deficient, with a ``RankDeficiencyWarning``); one number over all of y's features
    (scikit-learn's ``r2_score(..., multioutput="variance_weighted")``).

    Direction: x predicts y. This equals Kornblith et al.'s ``R^2_LR(y, x) = ||Q_x^T y_c||_F^2 / ||y_c||_F^2`` on
    centred data (their first argument is the one predicted) and Dr. Frankenstein's ``R^2_LR(A, B)`` with A = x,
    B = y, except that their definition has no intercept and does not centre.

    Centering: the intercept makes it equivalent to centring both. Similarity in [0, 1], asymmetric. Invariant to
    any invertible linear map and translation of x; to orthogonal maps, isotropic scaling and translation of y.
    Computed in float64; differentiable for torch inputs. A constant y raises an error (R^2 undefined). With
    ``p >= n - 1`` features in x the fit reproduces any y (R^2 = 1): a ``SmallSampleWarning`` says so.
    """
    xt, yt = prepare_pair(x, y, min_rows=2, measure="R^2", varying=True)
    warn_if_trivial("r2_linear", xt.shape[0], xt.shape[1], yt.shape[1])
    return as_result(r2_from_moments(moments_of(xt, yt)), x, xt)
