"""Pre-transforms fitted on the anchors and applied to any vectors of the same space.

scikit-learn transformers (``fit`` / ``transform`` / ``inverse_transform``, ``get_params``, ``clone``) that accept
numpy arrays or torch tensors and return the type they were given. Fit them on the anchors of a space, then apply
them to samples and anchors alike before a relative projection.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from latentstitch._core.arrays import ArrayLike, as_float_tensor, match_reference, wrap_like
from latentstitch._core.numerics import unit_rows
from latentstitch._core.params import Rule, check_nonnegative, check_positive, optional, rule
from latentstitch._core.persist import Persistable

#: Default floor of a per-feature spread, relative to the largest spread of the same data: every standardisation
#: in latentstitch (``StandardScaling``, the robust relative transform, ``LatentTranslator(standardize=True)``)
#: divides feature j by ``max(std_j, SPREAD_FLOOR * max_k std_k)``.
SPREAD_FLOOR = 1e-3


def check_spread_floor(value: object, name: str = "spread_floor") -> float:
    """A spread floor is a fraction of the largest spread: a number in [0, 1)."""
    floor = check_nonnegative(value, name)
    if floor >= 1:
        raise ValueError(f"{name}: expected a fraction of the largest spread in [0, 1), got {value}")
    return floor


def floored_spread(std: torch.Tensor, floor: float = SPREAD_FLOOR) -> torch.Tensor:
    """The divisor of a per-feature standardisation: ``max(std_j, floor * max_k std_k)``.

    Near-dead features (a spread many orders of magnitude below the others', e.g. 1e-30) would otherwise come out of
    the standardisation at full unit size, as large as the informative ones, and dominate any similarity computed
    after it; with the floor they stay small (their standardised spread is ``std_j / (floor * max std)`` < 1).
    Constant features get the floor too. When every feature is constant (or ``floor`` is 0 and a feature is
    constant) the divisor of those features is 1, as in scikit-learn's ``StandardScaler``.
    """
    top = std.max() if std.numel() else std.new_zeros(())
    divisor = torch.maximum(std, floor * top)
    return torch.where(divisor > 0, divisor, torch.ones_like(divisor))


def floored_variance(var: torch.Tensor, floor: float = SPREAD_FLOOR) -> torch.Tensor:
    """``floored_spread``'s rule on variances, ``max(var_j, floor^2 * max_k var_k)``, differentiable in ``var``
    (for layers that standardise with batch statistics and add their own ``eps``)."""
    return torch.maximum(var, (floor**2) * var.detach().max())


class _AnchorFittedTransform(Persistable, TransformerMixin, BaseEstimator):
    def _start_fit(self, anchors: ArrayLike) -> torch.Tensor:
        self._check_params()
        t = as_float_tensor(anchors, "anchors", ndim=2, min_rows=1)
        self.n_features_in_ = t.shape[1]
        return t

    def _check_loaded(self) -> None:
        # every learned array is one value per feature, finite (checked when a file is read)
        for name in ("mean_", "scale_"):
            if hasattr(self, name):
                value = as_float_tensor(getattr(self, name), name)
                if tuple(value.shape) != (self.n_features_in_,):
                    raise ValueError(f"{name} has shape {tuple(value.shape)}, expected ({self.n_features_in_},)")

    def _input(self, x: ArrayLike) -> torch.Tensor:
        check_is_fitted(self, "n_features_in_")
        t = as_float_tensor(x, "x", ndim=2)
        if t.shape[1] != self.n_features_in_:
            raise ValueError(
                f"x: has {t.shape[1]} features but {type(self).__name__} was fitted on {self.n_features_in_}"
            )
        return t

    @staticmethod
    def _learned(value: ArrayLike, name: str, like: torch.Tensor) -> torch.Tensor:
        return match_reference(as_float_tensor(value, name), like, name, "x")


class Centering(_AnchorFittedTransform):
    """Subtract the anchors' mean: ``x -> x - mean(anchors)``.

    After centering, cosine relative representations are also invariant to translations of the space.
    Learned: ``mean_`` (of the fit input's type).
    """

    def fit(self, anchors: ArrayLike, y: object = None) -> Centering:
        self.mean_ = wrap_like(self._start_fit(anchors).mean(dim=0), anchors)
        return self

    def transform(self, x: ArrayLike) -> ArrayLike:
        t = self._input(x)
        return wrap_like(t - self._learned(self.mean_, "mean_", t), x)

    def inverse_transform(self, x: ArrayLike) -> ArrayLike:
        t = self._input(x)
        return wrap_like(t + self._learned(self.mean_, "mean_", t), x)


class StandardScaling(_AnchorFittedTransform):
    """Per-feature standardisation with the anchors' statistics: ``x -> (x - mean) / scale``.

    ``scale_j = max(std_j, spread_floor * max_k std_k)`` (``floored_spread``), with ``std`` the population standard
    deviation (ddof=0) of the anchors. The floor is relative to the largest spread, so it means the same at any
    scale of the data: near-dead and constant features stay small instead of being blown up to unit size. Features
    whose spread is at least ``spread_floor`` times the largest are standardised exactly as by scikit-learn's
    ``StandardScaler``. The spread is computed in float64 after dividing each feature by its largest deviation,
    so features of any magnitude (1e-30 or 1e30 in float32) are standardised, not mistaken for constants or
    overflowed.

    Parameters
    ----------
    spread_floor : float in [0, 1)
        Smallest divisor, as a fraction of the largest feature spread (default ``SPREAD_FLOOR`` = 1e-3). 0 gives
        scikit-learn's behaviour (constant features keep scale 1, any other spread is divided out).

    Learned: ``mean_``, ``scale_`` (of the fit input's type).
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {"spread_floor": rule(check_spread_floor)}

    def __init__(self, spread_floor: float = SPREAD_FLOOR):
        self.spread_floor = spread_floor

    def fit(self, anchors: ArrayLike, y: object = None) -> StandardScaling:
        t = self._start_fit(anchors)  # checks the parameters
        self.mean_ = wrap_like(t.mean(dim=0), anchors)
        self.scale_ = wrap_like(floored_spread(_spread(t), float(self.spread_floor)).to(t.dtype), anchors)
        return self

    def transform(self, x: ArrayLike) -> ArrayLike:
        t = self._input(x)
        return wrap_like((t - self._learned(self.mean_, "mean_", t)) / self._learned(self.scale_, "scale_", t), x)

    def inverse_transform(self, x: ArrayLike) -> ArrayLike:
        t = self._input(x)
        return wrap_like(t * self._learned(self.scale_, "scale_", t) + self._learned(self.mean_, "mean_", t), x)


class L2Normalization(_AnchorFittedTransform):
    """Scale every vector to unit Euclidean norm: ``x -> x / |x|``. Stateless; there is no inverse.

    Zero vectors raise an error unless ``eps`` is given, in which case norms are clamped to at least ``eps``.
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {"eps": optional(check_positive)}

    def __init__(self, eps: float | None = None):
        self.eps = eps

    def fit(self, anchors: ArrayLike, y: object = None) -> L2Normalization:
        self._start_fit(anchors)
        return self

    def transform(self, x: ArrayLike) -> ArrayLike:
        t = self._input(x)
        return wrap_like(unit_rows(t, "x", self.eps), x)  # exact at any magnitude


def _spread(t: torch.Tensor) -> torch.Tensor:
    """Per-feature population standard deviation, in float64, computed on deviations rescaled by their largest
    magnitude (as BLAS nrm2 does), so that neither tiny nor huge values underflow or overflow on the way."""
    deviations = t.double() - t.double().mean(dim=0)
    peak = deviations.abs().amax(dim=0)
    safe = torch.where(peak > 0, peak, torch.ones_like(peak))
    return peak * (deviations / safe).pow(2).mean(dim=0).sqrt()
