"""Measures that align neurons (columns) one to one, or rows by a rotation, before comparing:

- correlation match (Li et al. 2016; ReSi's ``HardCorrelationMatch`` / ``SoftCorrelationMatch``): each neuron of one
  representation paired with its most correlated neuron of the other;
- the permutation metric (Williams et al. 2021; netrep's ``PermutationMetric``): the angle between the
  representations after the best permutation of neurons;
- aligned cosine similarity (ReSi's ``AlignedCosineSimilarity``): mean cosine of matched rows after the best
  rotation (orthogonal Procrustes on the raw data).

The assignments (``scipy.optimize.linear_sum_assignment``) are computed on detached values; the value is then a
differentiable function of the matched entries.
"""

from __future__ import annotations

import torch
from scipy.optimize import linear_sum_assignment

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.moments import CrossMoments
from latentstitch._core.numerics import unit_rows
from latentstitch._core.params import check_bool, check_choice
from latentstitch.similarity.measures._registry import (
    ZeroVarianceError,
    as_result,
    moments_of,
    needs_grad,
    prepare_pair,
)
from latentstitch.similarity.measures._sample_size import warn_if_trivial


def assignment(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column indices of the assignment maximising the sum of ``scores`` (min(p, q) pairs)."""
    rows, cols = linear_sum_assignment(scores.detach().cpu().numpy(), maximize=True)
    device = scores.device
    return torch.as_tensor(rows, device=device), torch.as_tensor(cols, device=device)


def neuron_scales(m: CrossMoments, measure: str) -> torch.Tensor:
    """``1 / (sd_x sd_y^T)`` (p, q) for the neurons of x and y, 0 for a constant neuron (so it correlates 0 with
    everything, as scikit-learn's cosine of a zero vector, which ReSi uses); a side with no varying neuron is an
    error."""
    sides = []
    for diagonal, name in ((m.centered_aa_diag(), "x"), (m.centered_bb_diag(), "y")):
        top = diagonal.max()
        if not top > 0:
            raise ZeroVarianceError(name, measure)
        varying = diagonal > top * torch.finfo(torch.float64).eps ** 2
        sides.append(torch.where(varying, torch.rsqrt(torch.where(varying, diagonal, 1.0)), 0.0))
    return sides[0][:, None] * sides[1][None, :]


def correlations(m: CrossMoments, measure: str) -> torch.Tensor:
    """Pearson correlations (p, q) between the neurons of x and y (see ``neuron_scales``)."""
    return m.centered_ab() * neuron_scales(m, measure)


def correlation_match_terms(correlation: torch.Tensor, soft: bool) -> torch.Tensor:
    if soft:
        return (correlation.max(dim=1).values.mean() + correlation.max(dim=0).values.mean()) / 2
    rows, cols = assignment(correlation)
    return correlation[rows, cols].mean()


def correlation_match_from_moments(m: CrossMoments, soft: bool = False) -> torch.Tensor:
    return correlation_match_terms(correlations(m, "correlation match"), soft)


def correlation_match(x: ArrayLike, y: ArrayLike, *, soft: bool = False) -> float | torch.Tensor:
    """Correlation match (Li et al. 2016), as ReSi computes it.

    ``soft=False`` (hard, registered as ``"correlation_match"``): the one-to-one pairing of neurons of x and y that
    maximises the summed Pearson correlation (``min(p, q)`` pairs, Hungarian algorithm); the value is the mean
    correlation of the pairs. ``soft=True`` (``"soft_correlation_match"``): every neuron takes its best partner, the
    mean best correlation is averaged over both directions.

    Centering: columns centred (correlations). Similarity in [-1, 1], symmetric. Invariant to permutations and
    positive rescaling of neurons (per-axis and isotropic scaling) and translation of either side; not to rotations
    or sign flips. A constant neuron correlates 0 with every other. Computed in float64 from moments; differentiable
    for torch inputs (the pairing held fixed).
    """
    soft = check_bool(soft, "soft")
    xt, yt = prepare_pair(x, y, min_rows=2, measure="correlation match", varying=True)
    warn_if_trivial("soft_correlation_match" if soft else "correlation_match", xt.shape[0], xt.shape[1], yt.shape[1])
    return as_result(correlation_match_from_moments(moments_of(xt, yt), soft), x, xt)


PERMUTATION_SCORES = ("angular", "euclidean")


def permutation_terms(cxy: torch.Tensor, norm_x: torch.Tensor, norm_y: torch.Tensor, score: str) -> torch.Tensor:
    """The permutation metric from the centred cross moment and the total sums of squares (``tr Cxx``, ``tr Cyy``)."""
    rows, cols = assignment(cxy)
    matched = cxy[rows, cols].sum()
    if score == "euclidean":
        return torch.sqrt((norm_x + norm_y - 2 * matched).clamp_min(0.0))
    if not norm_x > 0:
        raise ZeroVarianceError("x", "the permutation metric")
    if not norm_y > 0:
        raise ZeroVarianceError("y", "the permutation metric")
    cosine = (matched / torch.sqrt(norm_x * norm_y)).clamp(-1.0, 1.0 - torch.finfo(torch.float64).eps)
    return torch.arccos(cosine)


def permutation_from_moments(m: CrossMoments, score: str = "angular") -> torch.Tensor:
    return permutation_terms(m.centered_ab(), torch.trace(m.centered_aa()), torch.trace(m.centered_bb()), score)


def permutation_metric(x: ArrayLike, y: ArrayLike, score: str = "angular") -> float | torch.Tensor:
    """Permutation metric (Williams et al. 2021; netrep ``PermutationMetric(center_columns=True, zero_pad=True)``):
    the distance between x and y after the permutation of neurons that aligns them best.

    The permutation maximises ``tr(P^T Xc^T Yc)`` (Hungarian algorithm; the narrower side is zero-padded).
    ``score="angular"`` (default, registered as ``"permutation"``): ``arccos(<Xc P, Yc> / (||Xc|| ||Yc||))``;
    ``"euclidean"``: ``||Xc P - Yc||_F``.

    Centering: columns centred. A distance: angular in [0, pi] (a metric on representations up to permutation,
    isotropic scaling and translation), euclidean in [0, inf) (not scale invariant). Symmetric. Invariant to
    permutations of neurons and translation of either side (angular: also isotropic scaling); not to rotations,
    sign flips or per-axis scaling. Computed in float64 from moments; differentiable for torch inputs (the
    permutation held fixed).
    """
    score = check_choice(score, "score", PERMUTATION_SCORES)
    xt, yt = prepare_pair(x, y, min_rows=2, measure="the permutation metric", varying=True)
    # the euclidean score is not scale invariant: its moments must not be rescaled (moments_of may rescale)
    moments = moments_of(xt, yt) if score == "angular" else raw_moments(xt, yt)
    return as_result(permutation_from_moments(moments, score), x, xt)


def raw_moments(xt: torch.Tensor, yt: torch.Tensor) -> CrossMoments:
    return CrossMoments(track_grad=needs_grad(xt, yt)).update(xt, yt, finite_checked=True)


def aligned_cosine(x: ArrayLike, y: ArrayLike) -> float | torch.Tensor:
    """Aligned cosine similarity (ReSi's ``AlignedCosineSimilarity``): the mean cosine similarity of matched rows
    after rotating x onto y, ``mean_i cos(x_i Q, y_i)``, Q the orthogonal Procrustes solution on the raw data
    (``min_Q ||X Q - Y||_F``; the narrower side zero-padded).

    Centering: none. Similarity in [-1, 1], symmetric. Invariant to orthogonal maps and isotropic scaling of either
    side; not to translation. Not differentiable. A zero row raises ``ZeroNormError``.
    """
    xt, yt = prepare_pair(x, y, min_rows=1, measure="aligned cosine similarity", scale_free=True)
    with torch.no_grad():
        a, b = xt.detach().to(torch.float64), yt.detach().to(torch.float64)
        width = max(a.shape[1], b.shape[1])
        a = torch.nn.functional.pad(a, (0, width - a.shape[1]))
        b = torch.nn.functional.pad(b, (0, width - b.shape[1]))
        unit_rows(a, "x"), unit_rows(b, "y")  # zero rows are errors, not NaN
        u, _, vh = torch.linalg.svd(a.T @ b)
        aligned = a @ (u @ vh)
        cosines = (unit_rows(aligned, "x") * unit_rows(b, "y")).sum(dim=1)
    return as_result(cosines.mean(), x, xt)
