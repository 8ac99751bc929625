"""Ridge least squares with the ridge chosen by cross-validation: a whole path of ridges from one
eigendecomposition per fold (``ridge_path``), and the stitcher that uses it (``LeastSquaresCV``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows
from latentstitch._core.folds import kfold
from latentstitch._core.least_squares import ridge_loo_errors
from latentstitch._core.moments import CrossMoments
from latentstitch._core.numerics import matmul
from latentstitch._core.params import (
    Rule,
    check_bool,
    check_choice,
    check_positive_int,
    check_ridges,
    check_seed,
    optional,
    rule,
)
from latentstitch.relative import SPREAD_FLOOR, check_spread_floor, floored_spread
from latentstitch.stitching._base import AffineMap
from latentstitch.stitching._least_squares import RIDGE_UNITS, LeastSquares, gram_ridge
from latentstitch.stitching._paired import moments_of_rows

#: Default ridges, in "relative" units (fractions of the mean eigenvalue of the Gram matrix): 1e-4 to 1e2,
#: half a decade apart.
DEFAULT_RIDGES = tuple(float(10.0**k) for k in np.arange(-4.0, 2.01, 0.5))


@dataclass(frozen=True)
class RidgePath:
    """Held-out R^2 of ridge least squares for every ridge and fold (``ridge_path``'s result).

    ``scores[k, j]``: the variance-weighted R^2 of predicting fold k's target rows from its source rows, with the
    map fitted on the other folds at ``ridges[j]`` (in ``units``).
    """

    ridges: np.ndarray
    scores: np.ndarray
    units: str

    @property
    def mean(self) -> np.ndarray:
        return self.scores.mean(axis=0)

    @property
    def std(self) -> np.ndarray:
        return self.scores.std(axis=0)

    @property
    def best_index(self) -> int:
        """The ridge with the highest mean held-out R^2 (the largest of equal ones: the more stable fit)."""
        mean = self.mean
        return int(np.flatnonzero(mean == mean.max()).max())

    @property
    def best(self) -> float:
        return float(self.ridges[self.best_index])


def ridge_path(
    source: ArrayLike,
    target: ArrayLike,
    ridges: Any = DEFAULT_RIDGES,
    *,
    folds: int = 5,
    seed: int = 0,
    bias: bool = True,
    standardize: bool = False,
    ridge_units: str = "relative",
    spread_floor: float = SPREAD_FLOOR,
) -> RidgePath:
    """Cross-validated held-out R^2 of ridge least squares ``target ~ source @ M + c`` for many ridges at once.

    The rows are split into ``folds`` seeded folds (``numpy.random.default_rng(seed).permutation``, cut into equal
    parts). For each fold the Gram matrix of the other folds is eigendecomposed once, ``G = V diag(l) V^T``, and
    every ridge r costs O(p^2) more: ``M(r) = V diag(1 / (l + r)) V^T A^T B``, with the held-out residual expanded
    in the eigenbasis. Directions with ``l + r`` below ``p * eps64 * max(l + r)`` are dropped (the minimum-norm
    solution), the rule of ``LeastSquares``.

    Parameters
    ----------
    source, target : (N, p), (N, q) arrays or tensors of the same N samples (numpy or torch, any device).
    ridges : sequence of numbers >= 0, in ``ridge_units`` (default ``DEFAULT_RIDGES``: 1e-4 to 1e2, relative).
    folds, seed : the split.
    bias : fit an intercept (centred moments), as ``LeastSquares(bias=...)``.
    standardize : standard-scale both sides with each training part's statistics first (``StandardScaling``,
        floored at ``spread_floor``), as ``LatentTranslator(LeastSquares(...))`` does; R^2 is still measured in
        the target's own units. Then the path equals fitting ``LatentTranslator(LeastSquares(ridge, bias,
        ridge_units))`` on every training part and scoring it on the held-out part.
    ridge_units : "relative" (default; fractions of the mean eigenvalue of the training Gram matrix, scale-free)
        or "gram" (added to the eigenvalues as they are), as in ``LeastSquares``.

    Returns
    -------
    RidgePath: ``scores`` (folds, len(ridges)), ``mean``, ``std``, ``best`` (the ridge with the best mean R^2).
    Computed in float64.
    """
    check_bool(bias, "bias")
    check_bool(standardize, "standardize")
    check_choice(ridge_units, "ridge_units", RIDGE_UNITS)
    floor = check_spread_floor(spread_floor)
    values = check_ridges(ridges)
    a = as_float_tensor(source, "source", ndim=2, min_rows=1)
    b = as_float_tensor(target, "target", ndim=2, min_rows=1)
    check_same_rows(a, b, "source", "target")
    if a.device != b.device:
        raise ValueError(f"source is on device {a.device} but target is on {b.device}; move them to the same device")
    parts = kfold(a.shape[0], check_positive_int(folds, "folds", minimum=2), seed, name="folds")
    # Each part's float64 moments once; a training set's are the merge of the other parts' (d x d additions), so the
    # Gram matrices cost one pass over the rows in all, not one per fold.
    index = [torch.as_tensor(part, device=a.device) for part in parts]
    moments = [moments_of_rows(a[rows], b[rows], ("aa", "ab")) for rows in index]
    scores = np.empty((len(parts), values.size))
    for k, rows in enumerate(index):
        train = functools.reduce(lambda left, right: left.merge(right), [m for j, m in enumerate(moments) if j != k])
        scores[k] = _fold_path(train, a[rows], b[rows], values, bias or standardize, standardize, ridge_units, floor)
    return RidgePath(values, scores, ridge_units)


def _fold_path(
    train: CrossMoments,
    a_test: torch.Tensor,
    b_test: torch.Tensor,
    ridges: np.ndarray,
    center: bool,
    standardize: bool,
    units: str,
    floor: float,
) -> np.ndarray:
    a_test, b_test = a_test.to(torch.float64), b_test.to(torch.float64)
    if center:
        mean_a, mean_b = train.mean_a, train.mean_b
        gram, cross = train.centered_aa(), train.centered_ab()
    else:
        mean_a, mean_b = torch.zeros_like(train.shift_a), torch.zeros_like(train.shift_b)
        gram, cross = train.raw_aa(), train.raw_ab()
    scale = torch.ones_like(mean_a)
    if standardize:  # StandardScaling of the training rows (population std, floored), as a diagonal change of basis
        scale = floored_spread(torch.sqrt(gram.diagonal().clamp_min(0) / train.count), floor)
        gram = gram / torch.outer(scale, scale)
        cross = cross / scale[:, None]
    eigenvalues, eigenvectors = torch.linalg.eigh(gram)
    # M(r) = V diag(1 / (l + r)) P with P = V^T A^T B, in scaled source units. Standardising the target changes
    # nothing: ridge least squares treats every target column on its own, so a column's scale factors out.
    projected = matmul(eigenvectors.T.contiguous(), cross)
    z = matmul(((a_test - mean_a) / scale).contiguous(), eigenvectors)  # held-out rows in the eigenbasis
    residual = b_test - mean_b
    along = (matmul(z.T.contiguous(), residual) * projected).sum(dim=1)  # u_i = sum_j (Z^T E)_ij P_ij
    crossed = matmul(z.T.contiguous(), z) * matmul(projected, projected.T.contiguous())  # (Z^T Z) o (P P^T)
    total = float(((b_test - b_test.mean(dim=0)) ** 2).sum())
    if total <= 0:
        raise ValueError("target: a held-out fold has zero variance, so R^2 is undefined")
    base = float((residual**2).sum())
    p = gram.shape[0]
    trace = float(eigenvalues.sum())
    out = np.empty(ridges.size)
    for j, ridge in enumerate(ridges):
        shifted = eigenvalues + gram_ridge(float(ridge), units, trace, p)
        keep = shifted > p * torch.finfo(torch.float64).eps * max(float(shifted.max()), 0.0)
        weights = torch.where(keep, 1.0 / torch.where(keep, shifted, torch.ones_like(shifted)), 0.0)
        sse = base - 2 * float(weights @ along) + float(weights @ (crossed @ weights))
        out[j] = 1.0 - sse / total
    return out


class LeastSquaresCV(AffineMap):
    """Ridge least squares whose ridge is chosen by cross-validation on the fit data (``ridge_path``).

    ``fit(a, b)`` computes the held-out R^2 of every ridge in ``ridges`` (relative units: fractions of the mean
    eigenvalue of the Gram matrix, so the same grid suits any data) over ``folds`` seeded folds, keeps the ridge
    with the best mean R^2, and fits ``LeastSquares(bias, ridge, ridge_units="relative")`` on all the rows.
    A stitcher like the others (``transform``, ``score``, ``to_torch``, ``save``/``load``), for (N, p) rows;
    ``LatentTranslator(LeastSquaresCV())`` is the cross-validated ridge translation. No ``partial_fit``: the
    folds need the rows.

    Parameters
    ----------
    ridges : sequence of numbers >= 0, optional
        Candidates in relative units (default ``DEFAULT_RIDGES``, 1e-4 to 1e2).
    folds, seed : int
        The cross-validation split.
    bias : bool
        Fit an intercept.

    Attributes
    ----------
    coef_, intercept_ : the fitted map. ridge_ : float, the chosen ridge (relative units). rank_ : int.
    path_ : dict with "ridges", "mean_r2" and "std_r2" (over folds), lists.
    """

    def __init__(self, ridges: Any = None, folds: int = 5, seed: int = 0, bias: bool = True):
        self.ridges = ridges
        self.folds = folds
        self.seed = seed
        self.bias = bias

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "ridges": optional(check_ridges),  # None: DEFAULT_RIDGES
        "folds": rule(check_positive_int, minimum=2),
        "seed": rule(check_seed),
        "bias": rule(check_bool),
    }

    def fit(self, a: ArrayLike, b: ArrayLike) -> LeastSquaresCV:
        """Choose the ridge on ``a`` (N, p) -> ``b`` (N, q) by cross-validation, then fit on all rows."""
        self._check_params()
        # the rows, checked under this method's names (ridge_path names them source and target)
        check_same_rows(
            as_float_tensor(a, "a", ndim=2, min_rows=1), as_float_tensor(b, "b", ndim=2, min_rows=1), "a", "b"
        )
        path = ridge_path(
            a,
            b,
            DEFAULT_RIDGES if self.ridges is None else self.ridges,
            folds=self.folds,
            seed=self.seed,
            bias=self.bias,
        )
        final = LeastSquares(bias=self.bias, ridge=path.best, ridge_units="relative").fit(a, b)
        coef, intercept = final._map64()
        self._set_map(coef, intercept, a, 2)
        self.ridge_ = path.best
        self.rank_ = final.rank_
        self.path_ = {"ridges": path.ridges.tolist(), "mean_r2": path.mean.tolist(), "std_r2": path.std.tolist()}
        return self


#: ``LeastSquaresLOO``'s default alphas, in Gram units (added to the eigenvalues of the centred Gram matrix, as
#: scikit-learn's ``RidgeCV`` adds ``alpha``): 1e-3 to 1e3, half a decade apart.
LOO_ALPHAS = tuple(float(10.0**k) for k in np.arange(-3.0, 3.01, 0.5))


class LeastSquaresLOO(AffineMap):
    """Ridge least squares on the rows as they are, with an intercept, its alpha chosen by leave-one-out error
    (``ridge_loo_errors``): scikit-learn's ``RidgeCV()`` with ``alphas``, the map a user would fit first.

    ``fit(a, b)`` keeps the alpha with the lowest leave-one-out mean squared error (the first of equal ones, as
    ``RidgeCV``) and fits ``LeastSquares(bias=True, ridge=alpha, ridge_units="gram")`` on all the rows; no
    scaling of either side. A stitcher like the others, for (N, p) rows.

    Parameters
    ----------
    alphas : sequence of numbers > 0, optional
        Candidates in Gram units (default ``LOO_ALPHAS``, 1e-3 to 1e3).

    Attributes
    ----------
    coef_, intercept_ : the fitted map. alpha_ : float, the chosen alpha. rank_ : int.
    loo_mse_ : list, the leave-one-out mean squared error of each alpha.
    """

    def __init__(self, alphas: Any = None):
        self.alphas = alphas

    _parameter_constraints: ClassVar[dict[str, Rule]] = {"alphas": optional(check_ridges)}

    def fit(self, a: ArrayLike, b: ArrayLike) -> LeastSquaresLOO:
        """Choose alpha on ``a`` (N, p) -> ``b`` (N, q) by leave-one-out error, then fit on all rows."""
        self._check_params()
        alphas = check_ridges(LOO_ALPHAS if self.alphas is None else self.alphas, "alphas")
        if np.any(alphas <= 0):
            raise ValueError(f"alphas: expected numbers > 0 (leave-one-out needs a ridge), got {self.alphas!r}")
        source = as_float_tensor(a, "a", ndim=2, min_rows=3)
        target = as_float_tensor(b, "b", ndim=2, min_rows=3)
        check_same_rows(source, target, "a", "b")
        # in float64 whatever the input: at float32's extremes (1e-30) the Gram's entries underflow, every alpha's error
        # ties and the choice would differ from the same rows in float64
        errors = ridge_loo_errors(source.double(), target.to(source.device).double(), alphas)
        alpha = float(alphas[int(np.argmin(errors))])
        final = LeastSquares(bias=True, ridge=alpha, ridge_units="gram").fit(a, b)
        coef, intercept = final._map64()
        self._set_map(coef, intercept, a, 2)
        self.alpha_ = alpha
        self.rank_ = final.rank_
        self.loo_mse_ = errors.tolist()
        return self
