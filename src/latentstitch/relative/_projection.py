"""The relative projection: each sample described by its similarities to a set of anchors."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_width, match_reference, to_numpy, wrap_like
from latentstitch._core.device import DeferredChecks, careful_mode, check_finite, chunk_rows, collect_flags, finite_flag
from latentstitch._core.errors import RowError
from latentstitch._core.params import check_bool, check_optional_positive_int
from latentstitch.distributed import dask_rows, is_dask_array, map_rows
from latentstitch.invariance import TRANSLATION
from latentstitch.relative._similarities import SimilaritySpec, get_similarity
from latentstitch.relative._sparsify import sparsifier

# Elements per chunk of samples on the CPU: 4 Mi floats (16 MiB in float32) keeps a chunk and its output in
# cache-friendly sizes while amortising the per-call overhead. benchmarks/relative_projection.py measures the choice.
# On a GPU the chunks are as large as the free memory allows (``_core.device.chunk_rows``).
_CHUNK_ELEMENTS = 1 << 22


def relative_projection(
    x: ArrayLike,
    anchors: ArrayLike,
    similarity: str = "cosine",
    *,
    center: bool = False,
    chunk_size: int | None = None,
    top_k: int | None = None,
    power: float | None = None,
    **similarity_kwargs: Any,
) -> ArrayLike:
    """Relative representation of ``x`` with respect to ``anchors`` (Moschella et al., ICLR 2023).

    ``r(x)_j = sim(x, a_j)`` for every anchor ``a_j``. With the default cosine similarity this is invariant to
    rotations, reflections and rescaling of the latent space; see ``SIMILARITIES[name].invariances`` for each
    registered similarity.

    Parameters
    ----------
    x : (n, d) array or tensor
        Samples, in the same latent space as the anchors.
    anchors : (m, d) array or tensor
        Anchor embeddings. Numpy anchors follow ``x``'s device; both are cast to ``x``'s dtype.
    similarity : str
        Name of a registered similarity (``latentstitch.relative.SIMILARITIES``): cosine, angular, dot,
        euclidean, l1, linf, basis_change, geodesic, whitened.
    center : bool
        Subtract the anchors' mean from samples and anchors before comparing them, which adds invariance to
        translations. Off by default, as in the paper's official code. Similarities already invariant to
        translations (euclidean, l1, linf, geodesic, whitened) ignore it.
    chunk_size : int, optional
        Rows of ``x`` processed at a time when no gradient is needed; memory stays at the output plus one chunk.
        Default: cache-sized chunks on the CPU; on a GPU as many rows as half the free device memory holds.
    top_k : int, optional
        Keep each sample's ``top_k`` largest similarities and set the others to zero (ASIF, Norelli et al. 2023).
        Similarities only (not distances or coordinates).
    power : float, optional
        Raise the (kept) similarities to this positive power, sign kept: ``sign(r) |r|^power`` (ASIF's
        sharpening; ASIF then L2-normalises each row, which ``RelativeProjection(output_norm="l2")`` does).
    **similarity_kwargs
        Passed to the similarity, e.g. ``eps`` for cosine/angular, ``scaled`` for dot.

    Returns
    -------
    (n, m) array or tensor, of ``x``'s type, dtype and device. Differentiable with respect to ``x`` and
    ``anchors`` when they are tensors that require grad. A ``dask.array`` ``x`` gives a lazy dask array with
    ``x``'s row chunks and one chunk of columns, projected block by block (``latentstitch.distributed``).

    Notes
    -----
    Half-precision inputs are computed natively (see the similarity's docstring, e.g. ``cosine``: bfloat16 products
    with float32 accumulation on a GPU, norms in float32). Values are exact at any magnitude the output dtype can
    hold; a value it cannot hold (a dot product of 1e20-sized float32 vectors) is an error, never inf.

    Checks do not stall a GPU: each chunk's fast path yields a validity flag on the device (norms in the exactly
    computable range, or a finite output), all flags are read once at the end, and only failing chunks are
    recomputed carefully, which raises the precise error (NaN or inf in ``x``, first at row r; a zero row under
    cosine) or returns the exact values.
    """
    spec = check_projection_options(similarity, center, chunk_size, similarity_kwargs)
    if is_dask_array(x):
        options = {"center": center, "chunk_size": chunk_size, "top_k": top_k, "power": power, **similarity_kwargs}
        return _project_blocks(x, anchors, similarity, options)
    xt = as_float_tensor(x, "x", ndim=2, finite=False)  # checked through each chunk's validity flag, below
    at = as_float_tensor(anchors, "anchors", ndim=2, min_rows=1)
    check_same_width(xt, at, "x", "anchors")
    at = match_reference(at, xt, "anchors", "x")
    shift = at.mean(dim=0) if center and TRANSLATION not in spec.invariances else None
    if shift is not None:
        at = at - shift
    prepared = spec.prepare(at, **similarity_kwargs)
    post = sparsifier(top_k, power, spec.kind, spec.name, at.shape[0])  # per-chunk post-processing, or None

    n, (m, d) = xt.shape[0], at.shape

    def chunk() -> int:  # temporaries per row: a normalised or converted input row and an output row, twice over
        return chunk_size or chunk_rows(
            xt.device, 2 * (d + m) * xt.element_size(), max(1, _CHUNK_ELEMENTS // max(d, m))
        )

    rows = chunk()
    needs_grad = torch.is_grad_enabled() and (xt.requires_grad or at.requires_grad)
    chunks = _Chunks(spec, xt, prepared, shift, similarity_kwargs, post)

    if needs_grad or n <= rows:
        result, ok = chunks.fast(0, n)
        return wrap_like(result if bool(ok) else chunks.careful(0, n), x)
    out = torch.empty((n, m), dtype=xt.dtype, device=xt.device)
    rows = chunk()  # on a GPU, what the output leaves of the free memory
    checks = DeferredChecks()  # one host synchronisation for all chunks, at the end
    with torch.no_grad():
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            if spec.writes_out and post is None:  # e.g. cosine: the chunk's matmul writes into the output, no copy
                _, ok = chunks.fast(start, stop, out[start:stop])
            else:
                out[start:stop], ok = chunks.fast(start, stop)
            checks.add(ok, functools.partial(chunks.repair, out, start, stop))
        checks.resolve()
    return wrap_like(out, x)


def _project_blocks(x: Any, anchors: ArrayLike, similarity: str, options: dict[str, Any]) -> Any:
    """``relative_projection`` of a dask array, block by block (``latentstitch.distributed.map_rows``): a lazy dask
    array with ``x``'s row chunks and one chunk of columns. The anchors travel inside the row function (one task of
    the graph, sent once to each worker), not copied per block; errors name rows of the whole array."""
    x = dask_rows(x, "x", ndim=(2,))
    if is_dask_array(anchors):
        anchors = anchors.compute()
    anchors_t = as_float_tensor(anchors, "anchors", ndim=2, min_rows=1)
    check_same_width(x, anchors_t, "x", "anchors")  # (shapes only)
    project = functools.partial(
        relative_projection, anchors=to_numpy(anchors, "anchors"), similarity=similarity, **options
    )
    return map_rows(x, project, anchors_t.shape[0], "x")


class _Chunks:
    """The projection of rows ``start:stop`` of ``x``: a fast path that reports whether it was valid, and a careful
    path that checks everything (one host synchronisation per check) and computes the exact values."""

    def __init__(
        self,
        spec: SimilaritySpec,
        x: torch.Tensor,
        prepared: Any,
        shift: Any,
        options: dict[str, Any],
        post: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ):
        self.spec, self.x, self.prepared, self.shift, self.options = spec, x, prepared, shift, options
        self.post = post

    def _rows(self, start: int, stop: int) -> torch.Tensor:
        chunk = self.x[start:stop]
        return chunk if self.shift is None else chunk - self.shift

    def fast(self, start: int, stop: int, into: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The chunk's output and a 0-d device flag: true when the fast arithmetic was valid for every row (the
        similarity's own flags, e.g. cosine's norm range, which NaN and inf fail; or else finite input and output:
        some kernels drop NaN, e.g. the maximum in ``linf``). Never waits for the device."""
        rows = self._rows(start, stop)
        with collect_flags() as flags:
            if into is None:
                result = self.spec.function(rows, self.prepared, **self.options)
            else:
                result = self.spec.function(rows, self.prepared, out=into, **self.options)
        ok = torch.stack(flags).all() if flags else finite_flag(rows) & finite_flag(result)
        return self._finish(result), ok

    def careful(self, start: int, stop: int) -> torch.Tensor:
        """Rows ``start:stop`` recomputed with every check: raises the precise error (naming rows of the whole
        input), or returns exact values, widening to float64 where the input's precision overflowed."""
        check_finite(self.x[start:stop], "x", row_offset=start)
        chunk = self._rows(start, stop)
        try:
            with careful_mode():
                result = self.spec.function(chunk, self.prepared, **self.options)
                if not bool(torch.isfinite(result).all()):
                    result = self._wide(chunk, start)
        except RowError as error:
            raise error.shifted(start) from None
        return self._finish(result)

    def repair(self, out: torch.Tensor, start: int, stop: int) -> None:
        out[start:stop] = self.careful(start, stop)

    def _wide(self, chunk: torch.Tensor, start: int) -> torch.Tensor:
        """The chunk in float64, brought back to the input's dtype if every value fits; otherwise an error."""
        prepared = self.prepared.double() if isinstance(self.prepared, torch.Tensor) else self.prepared
        result = self.spec.function(chunk.double(), prepared, **self.options).to(chunk.dtype)
        finite = torch.isfinite(result).reshape(result.shape[0], -1).all(dim=1)
        if not bool(finite.all()):
            row = int((~finite).nonzero()[0, 0])
            raise ValueError(
                f"x, anchors: the {self.spec.name} values of row {start + row} of x are beyond the range of "
                f"{chunk.dtype} (largest {torch.finfo(chunk.dtype).max:.3g}); use smaller values (rescale x and "
                "anchors together) or a wider dtype"
            )
        return result

    def _finish(self, result: torch.Tensor) -> torch.Tensor:
        """The one post-processing point every chunk's output goes through, fast or repaired: the top_k / power
        sparsification of each row, when asked for."""
        return result if self.post is None else self.post(result)


def check_projection_options(
    similarity: str, center: object, chunk_size: object, options: dict[str, Any]
) -> SimilaritySpec:
    """Validate the arguments of ``relative_projection`` besides the arrays, naming each; returns the similarity."""
    spec = get_similarity(similarity)
    check_bool(center, "center")
    check_optional_positive_int(chunk_size, "chunk_size")
    spec.check_options(options)
    return spec
