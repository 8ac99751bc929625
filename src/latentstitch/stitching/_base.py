"""What every stitcher shares: an affine map ``b ~ a @ coef_ + intercept_`` and the machinery around it.

``AffineMap`` holds a fitted map and provides ``transform``, ``score``, ``to_torch``, ``save`` and ``load``: the base
class of every stitcher and alignment map. ``_MomentStitcher`` adds ``fit`` / ``partial_fit`` for maps that depend
on the data only through sufficient statistics (``CrossMoments``): a subclass only says which statistics it needs
and how to turn them into ``coef_`` and ``intercept_`` (``_solve``). Both accept dask arrays: the statistics of
every block of rows are merged in a tree (``latentstitch.distributed``) before the same ``_solve``. Activation
layouts and the statistics of paired activations: ``latentstitch.stitching._paired``.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted
from torch import nn

from latentstitch._core.arrays import ArrayLike, as_float_tensor, channels_as_rows, match_reference, wrap_like
from latentstitch._core.least_squares import residual_r2
from latentstitch._core.moments import SECOND_MOMENTS, CrossMoments
from latentstitch._core.numerics import matmul
from latentstitch._core.params import check_float_dtype
from latentstitch._core.persist import Persistable
from latentstitch.distributed import dask_rows, is_dask_array
from latentstitch.stitching._paired import (
    LAYOUTS,
    as_layout,
    dask_activations,
    feature_count,
    moments_of_pair,
    paired_activations,
)


def _apply_map(block: Any, estimator: AffineMap) -> Any:
    return estimator.transform(block)


class AffineMap(Persistable, BaseEstimator, abstract=True):
    """A fitted affine map between two activation spaces.

    Learned state common to all: ``coef_`` (p, q) and ``intercept_`` (q,), float64, of the fit input's type (numpy
    array or torch tensor, on its device); ``n_features_in_`` (p), ``n_features_out_`` (q); ``ndim_in_``, the
    layout of the fit input (2, 3 or 4), which decides what ``to_torch`` returns.
    """

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
        A ``dask.array`` ``x`` gives a lazy dask array, mapped block by block.
        """
        if is_dask_array(x):
            return self._transform_blocks(x)
        coef, intercept = self._map64()
        xt = as_float_tensor(x, "x", ndim=tuple(LAYOUTS))
        self._check_features_in(xt)
        coef = match_reference(coef, xt, "coef_", "x")
        intercept = match_reference(intercept, xt, "intercept_", "x")
        out = matmul(channels_as_rows(xt, "x"), coef)
        out = out + intercept if out.requires_grad else out.add_(intercept)
        return wrap_like(as_layout(out, xt), x)

    def _transform_blocks(self, x: Any) -> Any:
        """``transform`` of a dask array, block by block: a lazy dask array with ``x``'s row chunks. The fitted map
        (without the accumulated statistics) is one task of the graph, sent once to each worker."""
        import dask

        check_is_fitted(self, "coef_")
        x = dask_rows(x, "x", ndim=tuple(LAYOUTS))
        self._check_features_in(x)
        chunks = list(x.chunks)
        chunks[1 if x.ndim == 4 else -1] = (self.n_features_out_,)
        light = copy.copy(self)
        light.__dict__.pop("moments_", None)
        meta = np.empty((0,) * x.ndim, dtype=x.dtype)
        return x.map_blocks(_apply_map, dask.delayed(light), chunks=tuple(chunks), dtype=x.dtype, meta=meta)

    def _check_features_in(self, x: Any) -> None:
        if feature_count(x) != self.n_features_in_:
            raise ValueError(
                f"x: has {feature_count(x)} features but {type(self).__name__} was fitted on {self.n_features_in_}"
            )

    def score(self, a: ArrayLike, b: ArrayLike) -> float:
        """R^2 of predicting ``b`` by ``transform(a)``, one number over all target features.

        ``1 - sum ||b_i - pred_i||^2 / sum ||b_i - mean(b)||^2`` (scikit-learn's ``r2_score`` with
        ``multioutput="variance_weighted"``), computed in float64 from the moments of (a, b), chunk by chunk.
        (N, C, H, W) activations are scored per position, as they are fitted. Dask arrays are reduced block by
        block (``latentstitch.distributed``).
        """
        coef, intercept = self._map64()
        if is_dask_array(a) or is_dask_array(b):
            at, bt = dask_activations(a, b)
        else:
            at, bt = paired_activations(a, b, finite=False)  # NaN/inf: found in the statistics
        if feature_count(at) != self.n_features_in_ or feature_count(bt) != self.n_features_out_:
            raise ValueError(
                f"a, b: have {feature_count(at)} and {feature_count(bt)} features but {type(self).__name__} maps "
                f"{self.n_features_in_} to {self.n_features_out_}"
            )
        moments = moments_of_pair(at, bt)
        return residual_r2(moments, coef.to(moments.ab.device), intercept.to(moments.ab.device))

    def to_torch(self, dtype: torch.dtype = torch.float32) -> nn.Module:
        """The fitted map as a torch layer that reproduces ``transform``.

        ``nn.Conv2d(p, q, kernel_size=1)`` if the estimator was fitted on (N, C, H, W) activations (the paper's
        stitching layer), else ``nn.Linear(p, q)`` (which also applies to the last dimension of (N, T, p)).
        Weight = ``coef_.T``, bias = ``intercept_``; parameters are trainable, so the layer can initialise task-loss
        matching (the paper's least-squares initialisation). On the device of ``coef_``.
        """
        dtype = check_float_dtype(dtype, "dtype")
        coef, intercept = self._map64()
        p, q = coef.shape
        factory = {"device": coef.device, "dtype": dtype}
        layer = nn.Conv2d(p, q, kernel_size=1, **factory) if self.ndim_in_ == 4 else nn.Linear(p, q, **factory)
        with torch.no_grad():
            layer.weight.copy_(coef.T.reshape(layer.weight.shape))
            layer.bias.copy_(intercept)
        return layer

    # --- persistence (save / load: latentstitch._core.persist) --------------------------------------------------
    def _check_loaded(self) -> None:
        coef, intercept = self._map64()
        if coef.ndim != 2 or (self.n_features_in_, self.n_features_out_) != tuple(coef.shape):
            raise ValueError(
                f"coef_ has shape {tuple(coef.shape)} but the map is {self.n_features_in_} -> {self.n_features_out_}"
            )
        if tuple(intercept.shape) != (self.n_features_out_,):
            raise ValueError(f"intercept_ has shape {tuple(intercept.shape)}, expected ({self.n_features_out_},)")
        if self.ndim_in_ not in LAYOUTS:
            raise ValueError(f"ndim_in_ is {self.ndim_in_!r}, expected one of {sorted(LAYOUTS)}")


class _MomentStitcher(AffineMap):
    """An affine map computed from the sufficient statistics of paired activations, fittable chunk by chunk.

    Subclasses set ``_products`` (the statistics ``_solve`` reads, or override ``_needed_products``) and
    ``_precision`` (``CrossMoments``' precision), declare their parameters' rules (``_parameter_constraints``,
    applied by ``_check_params``) and implement ``_solve``.
    Learned: ``moments_``, the accumulated statistics.
    """

    _products: ClassVar[tuple[str, ...]] = SECOND_MOMENTS
    _precision: ClassVar[str] = "float64"

    def fit(self, a: ArrayLike, b: ArrayLike) -> _MomentStitcher:
        """Fit the map from paired activations ``a`` (source) and ``b`` (target) of the same samples.

        ``a``: (N, p), (N, T, p) or (N, p, H, W); ``b``: the same layout with q features. Memory beyond the inputs
        does not grow with N: statistics are accumulated a few samples at a time. Returns ``self``.

        Dask arrays (``latentstitch.distributed``): every block of rows becomes float64 statistics on a worker, and
        these are merged in a tree before the same solve, so the fit equals the in-memory one (to float64 rounding);
        learned arrays are then numpy arrays. Computed on dask's current scheduler (the active
        ``distributed.Client`` if any).
        """
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
            delattr(self, name)
        return self.partial_fit(a, b)

    def partial_fit(self, a: ArrayLike, b: ArrayLike) -> _MomentStitcher:
        """Add a chunk of paired activations to the statistics and refit; returns ``self``.

        A fit over a stream of chunks equals the one-shot ``fit`` on their concatenation (to float64 rounding for
        the closed-form estimators, to the solver's tolerance for iterative ones). Accepts dask arrays, as ``fit``.
        """
        self._check_params()
        if is_dask_array(a) or is_dask_array(b):
            at, bt = dask_activations(a, b)
            like, dtype = np.empty(0), torch.from_numpy(np.empty(0, dtype=at.dtype)).dtype  # numpy results
        else:
            at, bt = paired_activations(a, b, finite=False)  # NaN/inf show in the statistics: no extra pass
            like, dtype = a, at.dtype
        previous = getattr(self, "moments_", None)
        if previous is not None:
            if (feature_count(at), feature_count(bt)) != (self.n_features_in_, self.n_features_out_):
                raise ValueError(
                    f"a, b: have {feature_count(at)} and {feature_count(bt)} features but earlier chunks had "
                    f"{self.n_features_in_} and {self.n_features_out_}"
                )
            if at.ndim != self.ndim_in_:
                raise ValueError(f"a: {LAYOUTS[at.ndim]} activations, but earlier chunks were {LAYOUTS[self.ndim_in_]}")
        chunk = moments_of_pair(at, bt, self._needed_products(), self._precision, self._shifted())
        if previous is not None:
            chunk = previous.merge(chunk)
        learned = self._solve(chunk, input_dtype=dtype)
        coef, intercept = learned.pop("coef_"), learned.pop("intercept_")
        self.moments_ = chunk
        self._set_map(coef, intercept, like, at.ndim)
        for name, value in learned.items():
            setattr(self, name, wrap_like(value, like) if isinstance(value, torch.Tensor) else value)
        return self

    def _needed_products(self) -> tuple[str, ...]:
        """The statistics ``_solve`` reads (``CrossMoments``' ``products``); may depend on the parameters."""
        return self._products

    def _shifted(self) -> bool:
        """Whether the statistics are accumulated about the first chunk's mean (``CrossMoments(shift=...)``):
        needed for centred statistics; a fit on raw statistics alone may skip it (one copy of the data less)."""
        return True

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
