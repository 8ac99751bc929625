"""The relative projection: each sample described by its similarities to a set of anchors."""

from __future__ import annotations

from typing import Any

import torch

from latentstitch._validation import (
    ArrayLike,
    as_float_tensor,
    check_bool,
    check_finite,
    check_optional_positive_int,
    check_same_width,
    match_reference,
    wrap_like,
)
from latentstitch.distributed._arrays import is_dask_array, project_blocks
from latentstitch.invariance import TRANSLATION
from latentstitch.relative._similarities import SimilaritySpec, ZeroNormError, get_similarity
from latentstitch.relative._sparsify import sparsifier

# Elements per chunk of samples: 4 Mi floats (16 MiB in float32) keeps a chunk and its output in cache-friendly
# sizes while amortising the per-call overhead. benchmarks/relative_projection.py measures the choice.
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
    """
    spec = check_projection_options(similarity, center, chunk_size, similarity_kwargs)
    if is_dask_array(x):
        return project_blocks(
            x, anchors, similarity, center=center, chunk_size=chunk_size, top_k=top_k, power=power, **similarity_kwargs
        )
    xt = as_float_tensor(x, "x", ndim=2, finite=False)  # finiteness is checked chunk by chunk, below
    at = as_float_tensor(anchors, "anchors", ndim=2, min_rows=1)
    check_same_width(xt, at, "x", "anchors")
    at = match_reference(at, xt, "anchors", "x")
    shift = at.mean(dim=0) if center and TRANSLATION not in spec.invariances else None
    if shift is not None:
        at = at - shift
    prepared = spec.prepare(at, **similarity_kwargs)
    post = sparsifier(top_k, power, spec.kind, spec.name, at.shape[0])  # per-chunk post-processing, or None

    n, m = xt.shape[0], at.shape[0]
    rows = chunk_size or max(1, _CHUNK_ELEMENTS // max(xt.shape[1], m))
    needs_grad = torch.is_grad_enabled() and (xt.requires_grad or at.requires_grad)

    def project(start: int, stop: int, into: torch.Tensor | None = None) -> torch.Tensor:
        chunk = xt[start:stop]
        check_finite(chunk, "x", row_offset=start)
        if shift is not None:
            chunk = chunk - shift
        try:
            if into is None:
                out = spec.function(chunk, prepared, **similarity_kwargs)
                return out if post is None else post(out)
            return spec.function(chunk, prepared, out=into, **similarity_kwargs)
        except ZeroNormError as error:
            raise ZeroNormError(error.name, error.row + start) from None

    if needs_grad or n <= rows:
        return wrap_like(project(0, n), x)
    out = torch.empty((n, m), dtype=xt.dtype, device=xt.device)
    with torch.no_grad():
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            if spec.writes_out and post is None:  # e.g. cosine: the chunk's matmul writes into the output, no copy
                project(start, stop, out[start:stop])
            else:
                out[start:stop] = project(start, stop)
    return wrap_like(out, x)


def check_projection_options(
    similarity: str, center: object, chunk_size: object, options: dict[str, Any]
) -> SimilaritySpec:
    """Validate the arguments of ``relative_projection`` besides the arrays, naming each; returns the similarity."""
    spec = get_similarity(similarity)
    check_bool(center, "center")
    check_optional_positive_int(chunk_size, "chunk_size")
    spec.check_options(options)
    return spec
