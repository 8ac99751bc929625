"""Sparsified and sharpened relative vectors (ASIF, Norelli et al., NeurIPS 2023).

ASIF keeps, for every sample, only its ``k`` largest similarities to the anchors (the rest set to zero) and raises
the kept ones to a power ``p`` (their code: ``topk`` of the cosine similarities, ``values ** p``, then each row
L2-normalised). Sparsification keeps the anchors a sample is actually close to; the power sharpens the contrast
between the nearest anchors and the rest. ``relative_projection(..., top_k=, power=)`` applies this to each chunk of
its output; the row normalisation is left to the caller (``RelativeProjection(output_norm="l2")``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from latentstitch._core.params import check_positive, check_positive_int


def sparsify_similarities(r: torch.Tensor, top_k: int | None = None, power: float | None = None) -> torch.Tensor:
    """Keep each row's ``top_k`` largest values (zeros elsewhere), then raise them to ``power``.

    The power keeps the sign: ``sign(r) |r|^power``, equal to ``r ** power`` on the non-negative similarities
    ASIF keeps, and defined (no NaN) for negative ones. Ties at the k-th value are broken by position (exactly
    ``top_k`` values are kept). Differentiable with respect to the kept values. Returns a new tensor.
    """
    if top_k is not None and top_k < r.shape[1]:
        values, index = torch.topk(r, top_k, dim=1)
        r = torch.zeros_like(r).scatter(1, index, values)
    if power is not None and power != 1:
        r = torch.sign(r) * r.abs().pow(power)
    return r


def sparsifier(
    top_k: int | None, power: float | None, kind: str, similarity: str, num_anchors: int | None
) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The per-chunk post-processing of ``relative_projection`` for these options, checked; None when both are
    off. Only similarities (larger = closer) can be sparsified: zero is no neutral value for a distance.
    ``num_anchors`` None: not known yet (a layer given its anchors at ``forward``), so ``top_k`` is not bounded
    here."""
    if top_k is None and power is None:
        return None
    if kind != "similarity":
        option = "top_k" if top_k is not None else "power"
        raise ValueError(
            f"{option}: needs a similarity (larger = closer), but {similarity!r} is a {kind}; use cosine, angular "
            "or dot"
        )
    if top_k is not None:
        top_k = check_positive_int(top_k, "top_k")
        if num_anchors is not None and top_k > num_anchors:
            raise ValueError(f"top_k: expected at most the number of anchors ({num_anchors}), got {top_k}")
    if power is not None:
        power = check_positive(power, "power")
    return lambda r: sparsify_similarities(r, top_k, power)
