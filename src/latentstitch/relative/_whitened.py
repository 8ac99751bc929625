"""The whitened inner product: an affine-invariant similarity (Svendsen et al., 2026).

The anchors fix a mean ``mu`` and a covariance ``Sigma``; samples and anchors are compared by the Mahalanobis
inner product ``<x, a>_W = (x - mu) Sigma^-1 (a - mu)^T``, i.e. the plain inner product after whitening both with
the anchors' statistics. Under any affine map ``x -> x M + b`` (M invertible) applied to samples and anchors
alike, ``mu -> mu M + b`` and ``Sigma -> M^T Sigma M``, and the product is unchanged: the relative representation is
invariant to every invertible linear map and every translation, where cosine is invariant to rotations and
isotropic scale only.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch

from latentstitch._core.numerics import matmul, power_of_two_scale, safe_row_norms
from latentstitch._core.params import check_nonnegative
from latentstitch.invariance import INVERTIBLE_LINEAR, TRANSLATION
from latentstitch.relative._similarities import register_similarity


@dataclass(frozen=True)
class _Whitening:
    mean: torch.Tensor  # (d,)
    transform: torch.Tensor  # (d, r): rows whitened as (x - mean) @ transform
    anchors: torch.Tensor  # (m, r): the whitened anchors (normalised when cosine=True)


def _whitened_prepare(anchors: torch.Tensor, shrinkage: float = 0.0, cosine: bool = False) -> _Whitening:
    shrinkage = check_nonnegative(shrinkage, "shrinkage")
    if shrinkage > 1:
        raise ValueError(f"shrinkage: expected a number in [0, 1], got {shrinkage}")
    m, d = anchors.shape
    # Statistics and eigendecomposition in float64: the small eigenvalues are the ones whitening amplifies. They are
    # taken in units where the largest anchor coordinate, then the largest centred one, lies in [0.5, 1): scaling by
    # powers of two is exact, and the covariance of 1e200-sized (1e-200-sized) anchors neither overflows nor
    # underflows. With ``scale`` the product of both, the covariance is ``scale^2`` times the one computed.
    a64 = anchors.detach().double()
    to_unit = power_of_two_scale(a64.abs().amax())
    a64 = a64 * to_unit
    mean = a64.mean(dim=0)
    centred = a64 - mean
    spread = power_of_two_scale(centred.abs().amax())
    centred = centred * spread
    covariance = centred.T @ centred / m
    if shrinkage:  # Ledoit-Wolf-style shrinkage towards the scaled identity (no longer exactly affine-invariant)
        covariance = (1 - shrinkage) * covariance + shrinkage * covariance.trace() / d * torch.eye(d, dtype=a64.dtype)
    eigenvalues, eigenvectors = torch.linalg.eigh(covariance)
    tol = eigenvalues.max().clamp_min(0) * d * torch.finfo(anchors.dtype).eps
    keep = eigenvalues > tol
    rank = int(keep.sum())
    if rank == 0:
        raise ValueError("anchors: all anchors are the same point, so their covariance is zero and cannot whiten")
    if rank < d:
        warnings.warn(
            f"anchors: their covariance has rank {rank} < {d} features (at least d + 1 = {d + 1} anchors in general "
            "position are needed), so whitened compares the parts of the vectors in the anchors' span only and is "
            "invariant to affine maps of that span, not of the whole space; use more anchors or shrinkage > 0",
            stacklevel=4,
        )
    # Sigma^-1/2 restricted to the span (up to a rotation, which the inner product ignores), back in data units
    transform = (eigenvectors[:, keep] / eigenvalues[keep].sqrt() * spread * to_unit).to(anchors.dtype)
    mean = (mean / to_unit).to(anchors.dtype)
    # A gradient with respect to the anchors flows through (anchors - mean); the statistics count as constants.
    whitened = matmul(anchors - mean, transform)
    if cosine:  # likewise an anchor at the mean gets similarity 0 to every sample
        whitened = whitened / safe_row_norms(whitened, "anchors (whitened)", torch.finfo(whitened.dtype).tiny)
    return _Whitening(mean, transform, whitened)


@register_similarity(
    "whitened",
    value_range=(-math.inf, math.inf),
    invariances={INVERTIBLE_LINEAR, TRANSLATION},
    prepare=_whitened_prepare,
)
def whitened(x: torch.Tensor, whitening: _Whitening, shrinkage: float = 0.0, cosine: bool = False) -> torch.Tensor:
    """Whitened (Mahalanobis) inner product ``(x - mu) Sigma^-1 (a - mu)^T``, mean ``mu`` and covariance ``Sigma``
    (population, ddof=0) of the anchors; with ``cosine=True`` the cosine of the whitened vectors, in [-1, 1] (a
    vector at the anchors' mean, whitened to zero, has cosine 0 with everything).

    Invariant to every invertible affine map ``x -> x M + b`` applied to samples and anchors together (so to
    rotations, any rescaling, shears and translations), provided the anchors' covariance has full rank: at least
    d + 1 anchors in general position; otherwise (fewer anchors than features, as with 300 anchors of a 384-d
    encoder) a warning is raised and the product is taken on the anchors' span. Not invariant to non-linear maps.
    ``shrinkage`` in [0, 1] blends the covariance with ``trace(Sigma) / d * I``: it regularises few-anchor
    estimates at the price of exact invariance (the identity does not transform with the space).
    Differentiable with respect to ``x``; with respect to the anchors through their whitened positions, the mean
    and covariance being treated as constants.
    """
    z = matmul(x - whitening.mean, whitening.transform)
    if cosine:  # a sample at the anchors' mean (whitened to zero) gets similarity 0 to every anchor
        z = z / safe_row_norms(z, "x (whitened)", torch.finfo(z.dtype).tiny)
    out = matmul(z, whitening.anchors.T)
    return out.clamp(-1.0, 1.0) if cosine else out
