"""Shape metrics from the optimal orthogonal alignment: the Procrustes distance (Ding et al. 2021) and the
angular shape metric (Williams et al. 2021), both from centred moments.

With Xc, Yc column-centred and scaled to unit Frobenius norm, ``min_Q ||Xc Q - Yc||_F^2 = 2 - 2 ||Xc^T Yc||_*``
(nuclear norm; representations of different widths are implicitly zero-padded), and the angle between the aligned
representations is ``arccos ||Xc^T Yc||_*``. Both need only ``Cxy``, ``tr Cxx`` and ``tr Cyy``.
"""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.moments import CrossMoments
from latentstitch.similarity.measures._registry import ZeroVarianceError, as_result, moments_of, prepare_pair
from latentstitch.similarity.measures._sample_size import warn_if_trivial


def aligned_cosine(m: CrossMoments, measure: str) -> torch.Tensor:
    """``||Xc^T Yc||_* / (||Xc||_F ||Yc||_F)``, in [0, 1]: the cosine of the angle after optimal rotation."""
    norm_x, norm_y = torch.trace(m.centered_aa()), torch.trace(m.centered_bb())
    if not norm_x > 0:
        raise ZeroVarianceError("x", measure)
    if not norm_y > 0:
        raise ZeroVarianceError("y", measure)
    nuclear = torch.linalg.matrix_norm(m.centered_ab(), ord="nuc")
    return (nuclear / (torch.sqrt(norm_x) * torch.sqrt(norm_y))).clamp(0.0, 1.0)


def procrustes_from_moments(m: CrossMoments) -> torch.Tensor:
    return 2.0 - 2.0 * aligned_cosine(m, "the Procrustes distance")


def angular_from_moments(m: CrossMoments) -> torch.Tensor:
    cosine = aligned_cosine(m, "the angular shape metric")
    # arccos has an infinite derivative at 1: keep the gradient finite for identical representations.
    return torch.arccos(cosine.clamp(max=1.0 - torch.finfo(cosine.dtype).eps))


def procrustes_distance(x: ArrayLike, y: ArrayLike) -> float | torch.Tensor:
    """Orthogonal Procrustes distance (Ding et al. 2021): ``min_Q ||X Q - Y||_F^2`` after centring each column
    and scaling each representation to unit Frobenius norm; equals ``2 - 2 ||X^T Y||_*``.

    Centering: columns centred, then ``||X||_F = ||Y||_F = 1``. A distance in [0, 2] (0: identical up to rotation,
    translation and scale), symmetric. Invariant to orthogonal maps, isotropic scaling and translation of either
    side; not to per-axis scaling. Differentiable for torch inputs; computed in float64 from moments.
    """
    xt, yt = prepare_pair(x, y, min_rows=2, measure="the Procrustes distance", varying=True)
    warn_if_trivial("procrustes_distance", xt.shape[0], xt.shape[1], yt.shape[1])
    return as_result(procrustes_from_moments(moments_of(xt, yt)), x, xt)


def shape_metric_angular(x: ArrayLike, y: ArrayLike) -> float | torch.Tensor:
    """Angular shape metric (Williams et al. 2021; netrep ``LinearMetric(alpha=1, score_method="angular")``):
    ``arccos(||Xc^T Yc||_* / (||Xc||_F ||Yc||_F))``, the angle between the representations after optimal rotation.

    Centering: columns centred. A distance in [0, pi/2], symmetric, a metric on shapes (triangle inequality).
    Invariant to orthogonal maps, isotropic scaling and translation of either side. Differentiable for torch inputs
    (the cosine is clamped below 1 by one ulp so the gradient stays finite).
    """
    xt, yt = prepare_pair(x, y, min_rows=2, measure="the angular shape metric", varying=True)
    warn_if_trivial("shape_metric_angular", xt.shape[0], xt.shape[1], yt.shape[1])
    return as_result(angular_from_moments(moments_of(xt, yt)), x, xt)
