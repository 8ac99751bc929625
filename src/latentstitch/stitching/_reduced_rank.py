"""Reduced-rank regression (Izenman, 1975), the paper's low-rank least-squares matching (``ls_sum``)."""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import torch
from sklearn.utils.validation import check_is_fitted

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.least_squares import solve_least_squares
from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import (
    Rule,
    check_bool,
    check_choice,
    check_nonnegative,
    check_positive_int,
    optional,
    rule,
)
from latentstitch.stitching._base import _MomentStitcher, intercept_for
from latentstitch.stitching._least_squares import RIDGE_UNITS, gram_ridge


class ReducedRank(_MomentStitcher):
    """The best map of rank at most k: ``M_k = M_LS V_k V_k^T``.

    ``M_LS`` is the least-squares map (as ``LeastSquares``), and ``V_k`` the top-k right singular vectors of the
    fitted values ``A M_LS`` (centred, with ``bias``): the rank-k map minimising ``||A M + 1 c^T - B||_F``.

    A rank sweep costs one decomposition: the singular vectors of the fitted values come from the q x q matrix
    ``M_LS^T (A^T A) M_LS``, available from the accumulated moments, and every rank reuses them.
    ``with_rank(k)`` returns the fitted estimator for another rank without refitting::

        rrr = ReducedRank(rank=None).fit(a, b)            # full rank: the least-squares map
        scores = {k: rrr.with_rank(k).score(a_test, b_test) for k in (4, 8, 16, None)}   # the paper's sweep

    Parameters
    ----------
    rank : int or None
        Rank k of the map, at most ``min(p, q)``; None for full rank (then ``coef_`` equals ``LeastSquares``').
    bias : bool
        Fit an intercept (default, as ``LeastSquares``); the paper's ``ls_sum`` had none (``bias=False``).
    ridge : float
        L2 penalty of the underlying least-squares map (reduced-rank ridge regression), in ``ridge_units``.
    ridge_units : {"gram", "relative"}
        As in ``LeastSquares``: "gram" (default) adds ``ridge`` to the Gram matrix's eigenvalues as it is;
        "relative" makes it a fraction of their mean (scale-free).

    Attributes
    ----------
    coef_ : (p, q), intercept_ : (q,)
        The rank-k map: ``transform(a) = a @ coef_ + intercept_``.
    full_coef_ : (p, q)
        The least-squares map ``M_LS``.
    components_ : (q, q)
        Columns ``V``: right singular vectors of the fitted values, by decreasing singular value.
    singular_values_ : (q,)
        Singular values of the (centred) fitted values ``A M_LS``, decreasing. Computed from their q x q Gram
        matrix, so values below about 1e-8 of the largest (sqrt of float64's precision) read as noise.
    n_components_ : int
        The rank k in use.
    rank_ : int
        Numerical rank of the Gram matrix of ``a``: rank deficiency warns, as in ``LeastSquares``.
    """

    _products = ("aa", "ab")

    def __init__(self, rank: int | None, bias: bool = True, ridge: float = 0.0, ridge_units: str = "gram"):
        self.rank = rank
        self.bias = bias
        self.ridge = ridge
        self.ridge_units = ridge_units

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "rank": optional(check_positive_int),
        "bias": rule(check_bool),
        "ridge": rule(check_nonnegative),
        "ridge_units": rule(check_choice, choices=RIDGE_UNITS),
    }

    def _check_loaded(self) -> None:
        super()._check_loaded()
        p, q = self.n_features_in_, self.n_features_out_
        for name, shape in (("full_coef_", (p, q)), ("components_", (q, q)), ("singular_values_", (q,))):
            value = as_float_tensor(getattr(self, name), name)
            if tuple(value.shape) != shape:
                raise ValueError(f"{name} has shape {tuple(value.shape)}, expected {shape} for a {p} -> {q} map")

    def _solve(self, moments: CrossMoments, *, input_dtype: torch.dtype) -> dict[str, Any]:
        ridge = float(self.ridge)
        if self.ridge_units == "relative" and ridge > 0:
            diagonal = moments.centered_aa_diag() if self.bias else moments.raw_aa_diag()
            ridge = gram_ridge(ridge, "relative", float(diagonal.sum()), diagonal.shape[0])
        k = self._components_for(moments.mean_a.shape[-1], moments.mean_b.shape[-1])  # rank before sample count
        full, _, rank = solve_least_squares(moments, bias=self.bias, ridge=ridge)
        gram = moments.centered_aa() if self.bias else moments.raw_aa()
        fitted_gram = full.T @ gram @ full
        eigenvalues, eigenvectors = torch.linalg.eigh((fitted_gram + fitted_gram.T) / 2)
        eigenvalues, components = eigenvalues.flip(0), eigenvectors.flip(1).contiguous()
        coef, intercept = self._map_of_rank(full, components, moments, k)
        return {
            "coef_": coef,
            "intercept_": intercept,
            "full_coef_": full,
            "components_": components,
            "singular_values_": eigenvalues.clamp(min=0).sqrt(),
            "n_components_": k,
            "rank_": rank,
        }

    def _components_for(self, p: int, q: int) -> int:
        if self.rank is None:
            return min(p, q)
        rank = check_positive_int(self.rank, "rank")
        if rank > min(p, q):
            raise ValueError(f"rank: expected at most min(p, q) = min({p}, {q}) = {min(p, q)}, got {rank}")
        return rank

    def _map_of_rank(
        self, full: torch.Tensor, components: torch.Tensor, moments: CrossMoments, k: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        v = components[:, :k]
        coef = (full @ v) @ v.T
        intercept = intercept_for(moments, coef, self.bias)
        return coef, intercept

    def with_rank(self, rank: int | None) -> ReducedRank:
        """A copy fitted for another rank (``rank`` set, ``coef_``/``intercept_`` recomputed); no refit needed."""
        check_is_fitted(self, "full_coef_")
        full = as_float_tensor(self.full_coef_, "full_coef_")
        out = copy.copy(self)
        out.rank = rank
        out._check_params()
        k = out._components_for(*full.shape)
        components = as_float_tensor(self.components_, "components_")
        coef, intercept = out._map_of_rank(full, components, self.moments_, k)
        out._set_map(coef, intercept, self.coef_, self.ndim_in_)
        out.n_components_ = k
        return out
