"""Distance correlation (Szekely, Rizzo, Bakirov 2007), as ReSi's ``DistanceCorrelation``: the correlation of the
double-centred Euclidean distance matrices of the two representations."""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch.similarity.measures._registry import ZeroVarianceError, as_result, prepare_pair
from latentstitch.similarity.measures._sample_size import warn_if_trivial


def double_centred_distances(t: torch.Tensor) -> torch.Tensor:
    """``A_ij = d_ij - mean_i. - mean_.j + mean_..`` of the Euclidean distances of the rows (float64, n x n)."""
    t = t.to(torch.float64)
    distances = torch.cdist(t, t, compute_mode="donot_use_mm_for_euclid_dist")
    row_means = distances.mean(dim=1, keepdim=True)
    return distances - row_means - row_means.T + distances.mean()


def distance_correlation_terms(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``sqrt(dCov^2(x, y) / sqrt(dCov^2(x, x) dCov^2(y, y)))`` from double-centred distance matrices."""
    xx, yy = (a * a).mean(), (b * b).mean()
    if not xx > 0:
        raise ZeroVarianceError("x", "distance correlation")
    if not yy > 0:
        raise ZeroVarianceError("y", "distance correlation")
    return torch.sqrt(((a * b).mean() / torch.sqrt(xx * yy)).clamp_min(0.0))


def distance_correlation(x: ArrayLike, y: ArrayLike) -> float | torch.Tensor:
    """Distance correlation (Szekely et al. 2007), the V-statistic: with A, B the double-centred Euclidean distance
    matrices of x and y, ``dCov^2(x, y) = mean(A * B)`` and ``dCor = sqrt(dCov^2(x, y) / sqrt(dCov^2(x, x)
    dCov^2(y, y)))``.

    Centering: none needed (distances ignore translation). Similarity in [0, 1], symmetric; 0 in the population only
    for independent x and y (any dependence, not only linear). Invariant to orthogonal maps, isotropic scaling and
    translation of either side. O(n^2) time and memory (three n x n float64 matrices). Differentiable for torch
    inputs (the gradient of a zero distance is taken as zero).
    """
    xt, yt = prepare_pair(x, y, min_rows=2, measure="distance correlation", scale_free=True, varying=True)
    warn_if_trivial("distance_correlation", xt.shape[0], xt.shape[1], yt.shape[1])
    a, b = double_centred_distances(xt), double_centred_distances(yt)
    return as_result(distance_correlation_terms(a, b), x, xt)
