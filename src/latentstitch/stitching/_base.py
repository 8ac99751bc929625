"""What every stitcher shares: an affine map ``b ~ a @ coef_ + intercept_`` and the machinery around it.

``_AffineMap`` holds a fitted map and provides ``transform``, ``score``, ``to_torch``, ``save`` and ``load``.
``_MomentStitcher`` adds ``fit`` / ``partial_fit`` for maps that depend on the data only through sufficient
statistics (``CrossMoments``): a subclass only says which statistics it needs and how to turn them into
``coef_`` and ``intercept_`` (``_solve``). Both accept dask arrays: the statistics of every block of rows are
merged in a tree (``latentstitch.distributed``) before the same ``_solve``.

Activation layouts (Dr. Frankenstein's convention, ``_core.arrays.channels_as_rows``): (N, D) rows are used as they
are; (N, T, D) token sequences and (N, C, H, W) feature maps are matched per feature, every token or spatial
position being one sample of the D (or C) features, as a 1x1 convolution sees them.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted
from torch import nn

from latentstitch._core.arrays import (
    ArrayLike,
    as_float_tensor,
    channels_as_rows,
    check_same_rows,
    match_reference,
    wrap_like,
)
from latentstitch._core.device import check_finite, chunk_rows
from latentstitch._core.moments import SECOND_MOMENTS, CrossMoments, overflow_error, residual_r2
from latentstitch._core.numerics import matmul
from latentstitch._core.params import check_float_dtype
from latentstitch._core.persist import Persistable
from latentstitch.distributed._arrays import dask_pair, dask_rows, is_dask_array, reduce_blocks

# Elements of a (and of b) converted to rows and float64 at a time: 2 Mi elements (16 MiB in float64), large
# enough for efficient products, small enough that a fit's extra memory does not grow with the number of samples.
_CHUNK_ELEMENTS = 1 << 21

LAYOUTS = {2: "(N, D)", 3: "(N, T, D)", 4: "(N, C, H, W)"}


def _features(t: torch.Tensor) -> int:
    return t.shape[1] if t.ndim == 4 else t.shape[-1]


def _positions(t: torch.Tensor) -> tuple[int, ...]:
    """The shape of the sample positions besides N: () for rows, (T,) for sequences, (H, W) for feature maps."""
    return tuple(t.shape[2:]) if t.ndim == 4 else tuple(t.shape[1:-1])


def paired_activations(a: ArrayLike, b: ArrayLike, *, finite: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Check two activation arrays of the same samples: same layout, same N and same positions (T or H, W).
    ``finite=False`` leaves NaN/inf to the caller (``checked_moments`` finds them in the statistics)."""
    at = as_float_tensor(a, "a", ndim=tuple(LAYOUTS), min_rows=1, finite=finite)
    bt = as_float_tensor(b, "b", ndim=tuple(LAYOUTS), min_rows=1, finite=finite)
    check_same_rows(at, bt, "a", "b")
    _check_same_layout(at, bt)
    return at, bt


def dask_activations(a: Any, b: Any) -> tuple[Any, Any]:
    """``paired_activations`` for a pair holding a dask array: the same checks, on the shapes; both become dask
    arrays with the same row chunks and one chunk along every other axis."""
    at, bt = dask_pair(a, b, ("a", "b"), ndim=tuple(LAYOUTS))
    if at.shape[0] < 1:
        raise ValueError("a: expected at least 1 rows (samples), got 0")
    _check_same_layout(at, bt)
    return at, bt


def _check_same_layout(a: Any, b: Any) -> None:
    if a.ndim != b.ndim or _positions(a) != _positions(b):
        raise ValueError(
            f"a and b must have the same layout and positions per sample: got shapes {tuple(a.shape)} "
            f"{LAYOUTS[a.ndim]} and {tuple(b.shape)} {LAYOUTS[b.ndim]}"
        )


def moments_of_rows(
    a: torch.Tensor,
    b: torch.Tensor,
    products: tuple[str, ...] = SECOND_MOMENTS,
    precision: str = "float64",
    shift: bool = True,
) -> CrossMoments:
    """``CrossMoments`` of paired activations whose layout is checked, a few samples at a time. NaN/inf are not
    looked for here: they make the statistics non-finite (``checked_moments``)."""
    moments = CrossMoments(products=products, precision=precision, shift=shift)
    # Data multiplied in their own precision need no converted copy: (N, D) arrays go whole (CrossMoments works
    # through them in blocks). Converted ones go a chunk at a time, so the copy stays small whatever N.
    converted = precision == "float64" and (a.dtype != torch.float64 or b.dtype != torch.float64)
    for rows_a, rows_b in row_chunks(a, b, whole=not converted):
        moments.update(rows_a, rows_b, finite_checked=True)
    return moments


def checked_moments(moments: CrossMoments, a: Any, b: Any) -> CrossMoments:
    """``moments`` if every statistic is finite (one host synchronisation); otherwise the error that says why: NaN
    or inf in ``a`` or ``b`` (naming the first row), or an overflow of finite values."""
    if bool(moments.finite()):
        return moments
    if not is_dask_array(a):
        check_finite(a, "a")
        check_finite(b, "b")
    raise overflow_error(("a", "b"))


def moments_of_pair(
    a: Any, b: Any, products: tuple[str, ...] = SECOND_MOMENTS, precision: str = "float64", shift: bool = True
) -> CrossMoments:
    """``moments_of_rows`` of activations whose layout is checked, in memory or, for dask arrays, one task per row
    block merged in a tree (``latentstitch.distributed``); checked for NaN/inf and overflow (``checked_moments``)."""
    if is_dask_array(a):
        moments = reduce_blocks(functools.partial(_block_moments, products, precision, shift), a, b)
    else:
        moments = moments_of_rows(a, b, products, precision, shift)
    return checked_moments(moments, a, b)


def _block_moments(products: tuple[str, ...], precision: str, shift: bool, a: Any, b: Any) -> CrossMoments:
    if a.shape[0] == 0:
        return CrossMoments(products=products, precision=precision, shift=shift)
    return moments_of_rows(*paired_activations(a, b), products, precision, shift)


def _apply_map(block: Any, estimator: _AffineMap) -> Any:
    return estimator.transform(block)


def row_chunks(a: torch.Tensor, b: torch.Tensor, *, whole: bool = False) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Paired (rows, features) chunks of two activation arrays, a few samples at a time: sized for the cache on the
    CPU and for the free memory on a GPU (``_core.device.chunk_rows``). With ``whole``, (N, D) arrays come whole (views,
    for a consumer that works through them in blocks itself)."""
    if whole and a.ndim == 2 and b.ndim == 2:
        yield a, b
        return
    per_sample = max(a[:1].numel(), b[:1].numel(), 1)
    step = chunk_rows(a.device, 4 * per_sample * a.element_size(), max(1, _CHUNK_ELEMENTS // per_sample))
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


class _AffineMap(Persistable, BaseEstimator):
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
        return wrap_like(_as_layout(out, xt), x)

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
        if _features(x) != self.n_features_in_:
            raise ValueError(
                f"x: has {_features(x)} features but {type(self).__name__} was fitted on {self.n_features_in_}"
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
        if _features(at) != self.n_features_in_ or _features(bt) != self.n_features_out_:
            raise ValueError(
                f"a, b: have {_features(at)} and {_features(bt)} features but {type(self).__name__} maps "
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
            if (_features(at), _features(bt)) != (self.n_features_in_, self.n_features_out_):
                raise ValueError(
                    f"a, b: have {_features(at)} and {_features(bt)} features but earlier chunks had "
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
