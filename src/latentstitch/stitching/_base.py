"""What every stitcher shares: an affine map ``b ~ a @ coef_ + intercept_`` and the machinery around it.

``_AffineMap`` holds a fitted map and provides ``transform``, ``score``, ``to_torch``, ``save`` and ``load``.
``_MomentStitcher`` adds ``fit`` / ``partial_fit`` for maps that depend on the data only through sufficient
statistics (``CrossMoments``): a subclass only says which statistics it needs and how to turn them into
``coef_`` and ``intercept_`` (``_solve``).

Activation layouts (Dr. Frankenstein's convention, ``_validation.channels_as_rows``): (N, D) rows are used as they
are; (N, T, D) token sequences and (N, C, H, W) feature maps are matched per feature, every token or spatial
position being one sample of the D (or C) features, as a 1x1 convolution sees them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, ClassVar

import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted
from torch import nn

from latentstitch._backend import matmul
from latentstitch._moments import SECOND_MOMENTS, CrossMoments, residual_r2
from latentstitch._validation import (
    ArrayLike,
    as_float_tensor,
    channels_as_rows,
    check_same_rows,
    match_reference,
    wrap_like,
)

# Elements of a (and of b) converted to rows and float64 at a time: 2 Mi elements (16 MiB in float64), large
# enough for efficient products, small enough that a fit's extra memory does not grow with the number of samples.
_CHUNK_ELEMENTS = 1 << 21

LAYOUTS = {2: "(N, D)", 3: "(N, T, D)", 4: "(N, C, H, W)"}


def _features(t: torch.Tensor) -> int:
    return t.shape[1] if t.ndim == 4 else t.shape[-1]


def _positions(t: torch.Tensor) -> tuple[int, ...]:
    """The shape of the sample positions besides N: () for rows, (T,) for sequences, (H, W) for feature maps."""
    return tuple(t.shape[2:]) if t.ndim == 4 else tuple(t.shape[1:-1])


def paired_activations(a: ArrayLike, b: ArrayLike) -> tuple[torch.Tensor, torch.Tensor]:
    """Check two activation arrays of the same samples: same layout, same N and same positions (T or H, W)."""
    at = as_float_tensor(a, "a", ndim=tuple(LAYOUTS), min_rows=1)
    bt = as_float_tensor(b, "b", ndim=tuple(LAYOUTS), min_rows=1)
    check_same_rows(at, bt, "a", "b")
    if at.ndim != bt.ndim or _positions(at) != _positions(bt):
        raise ValueError(
            f"a and b must have the same layout and positions per sample: got shapes {tuple(at.shape)} "
            f"{LAYOUTS[at.ndim]} and {tuple(bt.shape)} {LAYOUTS[bt.ndim]}"
        )
    return at, bt


def row_chunks(a: torch.Tensor, b: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Paired (rows, features) chunks of two activation arrays, a few samples at a time."""
    per_sample = max(a[:1].numel(), b[:1].numel(), 1)
    step = max(1, _CHUNK_ELEMENTS // per_sample)
    for start in range(0, a.shape[0], step):
        yield channels_as_rows(a[start : start + step], "a"), channels_as_rows(b[start : start + step], "b")


def _as_layout(rows: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Inverse of ``channels_as_rows``: (rows, q) back to ``like``'s layout with q features."""
    if like.ndim == 2:
        return rows
    if like.ndim == 3:
        return rows.reshape(*like.shape[:2], rows.shape[1])
    n, _, h, w = like.shape
    return rows.reshape(n, h, w, rows.shape[1]).permute(0, 3, 1, 2).contiguous()


class _AffineMap(BaseEstimator):
    """A fitted affine map between two activation spaces.

    Learned state common to all: ``coef_`` (p, q) and ``intercept_`` (q,), float64, of the fit input's type (numpy
    array or torch tensor, on its device); ``n_features_in_`` (p), ``n_features_out_`` (q); ``ndim_in_``, the
    layout of the fit input (2, 3 or 4), which decides what ``to_torch`` returns.
    """

    _registry: ClassVar[dict[str, type]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            _AffineMap._registry[cls.__name__] = cls

    # --- learned state -------------------------------------------------------------------------------------
    def _set_map(self, coef: torch.Tensor, intercept: torch.Tensor, like: ArrayLike, ndim: int) -> None:
        self.coef_ = wrap_like(coef, like)
        self.intercept_ = wrap_like(intercept, like)
        self.n_features_in_, self.n_features_out_ = coef.shape
        self.ndim_in_ = ndim

    def _map64(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``coef_`` and ``intercept_`` as float64 tensors (shared with the attributes, not copied)."""
        check_is_fitted(self, "coef_")
        return as_float_tensor(self.coef_, "coef_"), as_float_tensor(self.intercept_, "intercept_")

    # --- use -----------------------------------------------------------------------------------------------
    def transform(self, x: ArrayLike) -> ArrayLike:
        """Map activations of the source space into the target space: ``x @ coef_ + intercept_``.

        ``x`` may be (N, p), (N, T, p) or (N, p, H, W) whatever the layout of the fit; the output has the same
        layout with q features, and ``x``'s type, dtype and device. Differentiable with respect to a tensor ``x``.
        """
        coef, intercept = self._map64()
        xt = as_float_tensor(x, "x", ndim=tuple(LAYOUTS))
        if _features(xt) != self.n_features_in_:
            raise ValueError(
                f"x: has {_features(xt)} features but {type(self).__name__} was fitted on {self.n_features_in_}"
            )
        coef = match_reference(coef, xt, "coef_", "x")
        intercept = match_reference(intercept, xt, "intercept_", "x")
        out = matmul(channels_as_rows(xt, "x"), coef)
        out = out + intercept if out.requires_grad else out.add_(intercept)
        return wrap_like(_as_layout(out, xt), x)

    def score(self, a: ArrayLike, b: ArrayLike) -> float:
        """R^2 of predicting ``b`` by ``transform(a)``, one number over all target features.

        ``1 - sum ||b_i - pred_i||^2 / sum ||b_i - mean(b)||^2`` (scikit-learn's ``r2_score`` with
        ``multioutput="variance_weighted"``), computed in float64 from the moments of (a, b), chunk by chunk.
        (N, C, H, W) activations are scored per position, as they are fitted.
        """
        coef, intercept = self._map64()
        at, bt = paired_activations(a, b)
        if _features(at) != self.n_features_in_ or _features(bt) != self.n_features_out_:
            raise ValueError(
                f"a, b: have {_features(at)} and {_features(bt)} features but {type(self).__name__} maps "
                f"{self.n_features_in_} to {self.n_features_out_}"
            )
        moments = CrossMoments()
        for rows_a, rows_b in row_chunks(at, bt):
            moments.update(rows_a, rows_b)
        return residual_r2(moments, coef.to(moments.ab.device), intercept.to(moments.ab.device))

    def to_torch(self, dtype: torch.dtype = torch.float32) -> nn.Module:
        """The fitted map as a torch layer that reproduces ``transform``.

        ``nn.Conv2d(p, q, kernel_size=1)`` if the estimator was fitted on (N, C, H, W) activations (the paper's
        stitching layer), else ``nn.Linear(p, q)`` (which also applies to the last dimension of (N, T, p)).
        Weight = ``coef_.T``, bias = ``intercept_``; parameters are trainable, so the layer can initialise task-loss
        matching (the paper's least-squares initialisation). On the device of ``coef_``.
        """
        coef, intercept = self._map64()
        p, q = coef.shape
        factory = {"device": coef.device, "dtype": dtype}
        layer = nn.Conv2d(p, q, kernel_size=1, **factory) if self.ndim_in_ == 4 else nn.Linear(p, q, **factory)
        with torch.no_grad():
            layer.weight.copy_(coef.T.reshape(layer.weight.shape))
            layer.bias.copy_(intercept)
        return layer

    # --- persistence ---------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write parameters and learned state to one safetensors file (never pickle).

        Arrays (``coef_``, ``intercept_``, accumulated moments...) are tensors of the file; the class name,
        parameters, scalar attributes and the library version are JSON in its header. ``load`` restores them,
        including the moments, so ``partial_fit`` can resume. Arrays come back on the CPU.
        """
        from latentstitch.stitching._io import save

        save(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> _AffineMap:
        """Read an estimator written by ``save``; refuses files of other classes than ``cls`` (or its subclasses)."""
        from latentstitch.stitching._io import load

        return load(path, expected=cls)


class _MomentStitcher(_AffineMap):
    """An affine map computed from the sufficient statistics of paired activations, fittable chunk by chunk.

    Subclasses set ``_products`` (the statistics ``_solve`` reads, or override ``_needed_products``) and
    ``_precision`` (``CrossMoments``' precision), and implement ``_check_params`` and ``_solve``.
    Learned: ``moments_``, the accumulated statistics.
    """

    _products: ClassVar[tuple[str, ...]] = SECOND_MOMENTS
    _precision: ClassVar[str] = "float64"

    def fit(self, a: ArrayLike, b: ArrayLike) -> _MomentStitcher:
        """Fit the map from paired activations ``a`` (source) and ``b`` (target) of the same samples.

        ``a``: (N, p), (N, T, p) or (N, p, H, W); ``b``: the same layout with q features. Memory beyond the inputs
        does not grow with N: statistics are accumulated a few samples at a time. Returns ``self``.
        """
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
            delattr(self, name)
        return self.partial_fit(a, b)

    def partial_fit(self, a: ArrayLike, b: ArrayLike) -> _MomentStitcher:
        """Add a chunk of paired activations to the statistics and refit; returns ``self``.

        A fit over a stream of chunks equals the one-shot ``fit`` on their concatenation (to float64 rounding for
        the closed-form estimators, to the solver's tolerance for iterative ones).
        """
        self._check_params()
        at, bt = paired_activations(a, b)
        previous = getattr(self, "moments_", None)
        if previous is not None:
            if (_features(at), _features(bt)) != (self.n_features_in_, self.n_features_out_):
                raise ValueError(
                    f"a, b: have {_features(at)} and {_features(bt)} features but earlier chunks had "
                    f"{self.n_features_in_} and {self.n_features_out_}"
                )
            if at.ndim != self.ndim_in_:
                raise ValueError(f"a: {LAYOUTS[at.ndim]} activations, but earlier chunks were {LAYOUTS[self.ndim_in_]}")
        chunk = CrossMoments(products=self._needed_products(), precision=self._precision)
        for rows_a, rows_b in row_chunks(at, bt):
            chunk.update(rows_a, rows_b)
        if previous is not None:
            chunk = previous.merge(chunk)
        learned = self._solve(chunk, input_dtype=at.dtype)
        coef, intercept = learned.pop("coef_"), learned.pop("intercept_")
        self.moments_ = chunk
        self._set_map(coef, intercept, a, at.ndim)
        for name, value in learned.items():
            setattr(self, name, wrap_like(value, a) if isinstance(value, torch.Tensor) else value)
        return self

    def _check_params(self) -> None:
        """Validate the constructor's parameters (called by ``fit``, as scikit-learn estimators do)."""

    def _needed_products(self) -> tuple[str, ...]:
        """The statistics ``_solve`` reads (``CrossMoments``' ``products``); may depend on the parameters."""
        return self._products

    def _solve(self, moments: CrossMoments, *, input_dtype: torch.dtype) -> dict[str, Any]:
        """Learned state from the statistics: ``coef_`` (p, q) and ``intercept_`` (q,) float64 tensors, plus any
        other attributes (tensors are handed back in the fit input's type)."""
        raise NotImplementedError


def intercept_for(moments: CrossMoments, coef: torch.Tensor, centred: bool) -> torch.Tensor:
    """The intercept that goes with ``coef``: ``mean_b - mean_a @ coef`` for a fit on centred statistics (the
    least-squares optimum given ``coef``), zero for a map through the origin."""
    if centred:
        return moments.mean_b - moments.mean_a @ coef
    return torch.zeros(coef.shape[1], dtype=coef.dtype, device=coef.device)
