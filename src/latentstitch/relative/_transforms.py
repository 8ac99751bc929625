"""Pre-transforms fitted on the anchors and applied to any vectors of the same space.

scikit-learn transformers (``fit`` / ``transform`` / ``inverse_transform``, ``get_params``, ``clone``) that accept
numpy arrays or torch tensors and return the type they were given. Fit them on the anchors of a space, then apply
them to samples and anchors alike before a relative projection.
"""

from __future__ import annotations

import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from latentstitch._persist import Persistable
from latentstitch._validation import ArrayLike, as_float_tensor, check_positive, match_reference, wrap_like
from latentstitch.relative._similarities import unit_rows


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
    """Per-feature standardisation with the anchors' statistics: ``x -> (x - mean) / std``.

    ``std`` is the population standard deviation (ddof=0); features that are constant over the anchors keep
    scale 1, as in scikit-learn's StandardScaler. Learned: ``mean_``, ``scale_``. The spread is computed in float64
    after dividing each feature by its largest deviation, so features of any magnitude (1e-30 or 1e30 in float32)
    are standardised, not mistaken for constants or overflowed.
    """

    def fit(self, anchors: ArrayLike, y: object = None) -> StandardScaling:
        t = self._start_fit(anchors)
        std = _spread(t).to(t.dtype)
        self.mean_ = wrap_like(t.mean(dim=0), anchors)
        self.scale_ = wrap_like(torch.where(std > 0, std, torch.ones_like(std)), anchors)
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

    def __init__(self, eps: float | None = None):
        self.eps = eps

    def _check_params(self) -> None:
        if self.eps is not None:
            check_positive(self.eps, "eps")

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
