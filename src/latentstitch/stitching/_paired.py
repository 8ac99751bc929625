"""Paired activations of the same samples: their layouts, and their sufficient statistics chunk by chunk.

Activation layouts (Dr. Frankenstein's convention, ``_core.arrays.channels_as_rows``): (N, D) rows are used as they
are; (N, T, D) token sequences and (N, C, H, W) feature maps are matched per feature, every token or spatial
position being one sample of the D (or C) features, as a 1x1 convolution sees them. Dask arrays: the statistics of
every block of rows are merged in a tree (``latentstitch.distributed``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import torch

from latentstitch._core.arrays import ArrayLike, as_float_tensor, channels_as_rows, check_same_rows
from latentstitch._core.device import check_finite, chunk_rows
from latentstitch._core.moments import SECOND_MOMENTS, CrossMoments, overflow_error
from latentstitch.distributed import dask_pair, is_dask_array, reduce_blocks

# Elements of a (and of b) converted to rows and float64 at a time: 2 Mi elements (16 MiB in float64), large
# enough for efficient products, small enough that a fit's extra memory does not grow with the number of samples.
_CHUNK_ELEMENTS = 1 << 21

LAYOUTS = {2: "(N, D)", 3: "(N, T, D)", 4: "(N, C, H, W)"}


def feature_count(t: torch.Tensor) -> int:
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


def as_layout(rows: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Inverse of ``channels_as_rows``: (rows, q) back to ``like``'s layout with q features."""
    if like.ndim == 2:
        return rows
    if like.ndim == 3:
        return rows.reshape(*like.shape[:2], rows.shape[1])
    n, _, h, w = like.shape
    return rows.reshape(n, h, w, rows.shape[1]).permute(0, 3, 1, 2).contiguous()
