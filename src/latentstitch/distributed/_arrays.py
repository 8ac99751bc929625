"""Dask arrays in, the same results out: row-wise maps block by block and tree reductions of sufficient statistics.

A dask array is processed in blocks of rows. Row-wise maps (``map_rows``) map every block independently; fits and
similarity measures turn every block into an accumulator of sufficient statistics (``CrossMoments`` and the
objects built on it: p x p, p x q, q x q float64, whatever the number of rows) and merge the accumulators in a tree
(``merge``), so the final solve or measure runs on exactly the statistics the in-memory path accumulates.

Nothing here imports dask at module import: ``is_dask_array`` only looks at modules already imported.
"""

from __future__ import annotations

import copy
import functools
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import check_same_rows, to_numpy
from latentstitch._core.device import check_finite
from latentstitch._core.errors import RowError
from latentstitch._core.extras import require

# Accumulators merged by one task of the tree: each holds a few d x d float64 matrices, so a merge task needs
# about SPLIT_EVERY of them in memory (8 x 14 MiB for CKA at d = 768).
SPLIT_EVERY = 8


def is_dask_array(x: object) -> bool:
    """Whether ``x`` is a ``dask.array.Array``; never imports dask (an object of a module that is not imported
    cannot exist)."""
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(x, module.Array)


def dask_rows(x: Any, name: str, *, ndim: tuple[int, ...] | None = None, rows: tuple[int, ...] | None = None) -> Any:
    """Check a dask array of samples (rows first, at least 2-D) and give it one chunk along every axis but the
    first.

    ``rows``: the row chunks to use instead of ``x``'s (to align a second array with the first); numpy arrays and
    torch tensors are wrapped with those chunks.
    """
    da = require("dask.array", "dask")
    if not is_dask_array(x):
        x = to_numpy(x, name)
        x = da.from_array(x, chunks=(rows or -1,) + (-1,) * (x.ndim - 1))
    if np.dtype(x.dtype).kind != "f":
        raise TypeError(
            f"{name}: expected a floating-point array, got dtype {x.dtype}; convert it first, "
            f"for example {name}.astype(np.float32)"
        )
    if ndim is not None and x.ndim not in ndim:
        want = " or ".join(f"{d}-D" for d in ndim)
        raise ValueError(f"{name}: expected a {want} array, got shape {x.shape}")
    if x.ndim < 2:
        raise ValueError(f"{name}: expected (n_samples, n_features) or (n_samples, ...) rows, got shape {x.shape}")
    if any(math.isnan(s) for s in x.shape):
        raise ValueError(f"{name}: has unknown chunk sizes (shape {x.shape}); call {name}.compute_chunk_sizes() first")
    chunks = {axis: -1 for axis in range(1, x.ndim)}
    if rows is not None:
        chunks[0] = rows
    if any(len(x.chunks[axis]) > 1 for axis in range(1, x.ndim)) or (rows is not None and x.chunks[0] != rows):
        x = x.rechunk(chunks)
    return x


def dask_pair(x: Any, y: Any, names: tuple[str, str] = ("x", "y"), **checks: Any) -> tuple[Any, Any]:
    """Two arrays of the same samples (at least one a dask array) as dask arrays with the same row chunks: those of
    the first dask array. ``checks``: ``dask_rows``' (``ndim``)."""
    pair = [x if is_dask_array(x) else to_numpy(x, names[0]), y if is_dask_array(y) else to_numpy(y, names[1])]
    lead = 0 if is_dask_array(x) else 1
    pair[lead] = dask_rows(pair[lead], names[lead], **checks)
    check_same_rows(*pair, *names)  # (shapes only)
    pair[1 - lead] = dask_rows(pair[1 - lead], names[1 - lead], rows=pair[lead].chunks[0], **checks)
    return pair[0], pair[1]


def _unwrapped(part: Any) -> Any:
    return part.flat[0] if isinstance(part, np.ndarray) else part  # a block's accumulator comes in a 1-element array


def _merge_all(*parts: Any) -> Any:
    return functools.reduce(lambda left, right: left.merge(right), map(_unwrapped, parts))


def _accumulate_block(start: np.ndarray, *blocks: Any, accumulate: Callable[..., Any], ndim: int) -> np.ndarray:
    out = np.empty((1,) * ndim, dtype=object)
    try:
        out.flat[0] = accumulate(*blocks)
    except Exception as error:
        if hasattr(error, "add_note"):  # Python >= 3.11
            first, stop = int(start[0]), int(start[0]) + blocks[0].shape[0]
            error.add_note(f"(in the block of rows {first}:{stop} of the dask array; rows above count from {first})")
        raise
    return out


def reduce_blocks(accumulate: Callable[..., Any], *arrays: Any, split_every: int = SPLIT_EVERY) -> Any:
    """``accumulate(*blocks)`` on every row block of ``arrays`` (dask arrays with the same row chunks and one chunk
    along the other axes), then ``merge`` of the results in a tree of fan-in ``split_every``; returns the computed
    accumulator. Runs on dask's current scheduler: the active ``distributed.Client`` if there is one.

    Each block's task computes the block, fused with whatever element-wise steps produced it (rows of x and y
    generated by one function are generated once, in the same task), and returns only its accumulator. The merge
    order follows the rows, so the result does not depend on which worker finished first.
    """
    da = require("dask.array", "dask")
    dask = require("dask", "dask")
    # Every axis but the rows is one chunk, so all arrays can share one index (block (r, 0, 0...)): blockwise then
    # fuses the accumulation with the tasks that produce the blocks, which a contraction over those axes prevents.
    ndim = max(array.ndim for array in arrays)
    index = "ijklmnopqrstuvwxyz"[:ndim]
    starts = np.cumsum((0, *arrays[0].chunks[0][:-1]))
    per_block = da.blockwise(
        _accumulate_block,
        index,
        da.from_array(starts, chunks=1),  # each block's first row, for errors
        "i",
        *[part for array in arrays for part in (array, index[: array.ndim])],
        accumulate=accumulate,
        ndim=ndim,
        align_arrays=False,  # one block per row chunk, whatever the widths
        adjust_chunks=dict.fromkeys(index, 1),
        dtype=object,
        meta=np.empty((0,) * ndim, dtype=object),
    )
    parts = list(np.ravel(per_block.to_delayed()))
    while len(parts) > 1:
        parts = [
            dask.delayed(_merge_all)(*parts[start : start + split_every]) for start in range(0, len(parts), split_every)
        ]
    (result,) = dask.compute(parts[0])
    return _unwrapped(result)


def update_blocks(stream: Any, x: Any, y: Any) -> Any:
    """``stream.update(x, y)`` for a pair holding a dask array, as a new accumulator: every row block updates an
    empty copy of ``stream`` (``reset``) on a worker, the copies are merged in a tree, then into ``stream``."""
    x, y = dask_pair(x, y)
    empty = copy.copy(stream)
    empty.reset()
    return stream.merge(reduce_blocks(functools.partial(_update_copy, empty), x, y))


def _update_copy(empty: Any, *blocks: Any) -> Any:
    return copy.deepcopy(empty).update(*blocks)


def map_rows(x: Any, function: Callable[[Any], Any], width: int, name: str = "x") -> Any:
    """``function`` (a fitted row-wise map: (n, d) numpy -> (n, width) numpy) applied to every row block of the
    dask array ``x``: a lazy dask array with ``x``'s row chunks and one chunk of ``width`` columns. ``function``
    (with whatever it holds, e.g. a fitted estimator's bound method) is one task of the graph, sent once to each
    worker."""
    dask = require("dask", "dask")
    x = dask_rows(x, name, ndim=(2,))
    return x.map_blocks(
        _map_block,
        dask.delayed(function),
        name,
        chunks=(x.chunks[0], (width,)),
        dtype=x.dtype,
        meta=np.empty((0, 0), dtype=x.dtype),
    )


def _map_block(block: np.ndarray, function: Callable[[Any], Any], name: str, block_info=None) -> np.ndarray:
    start = block_info[0]["array-location"][0][0] if block_info else 0
    check_finite(torch.from_numpy(np.ascontiguousarray(block)), name, row_offset=start)  # rows of the whole array
    try:
        return np.asarray(function(block))
    except RowError as error:  # an error naming a row of the block names that row of the whole array
        raise error.shifted(start) from None
