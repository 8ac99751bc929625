"""Centered kernel alignment (Kornblith et al., ICML 2019) and its debiased and minibatch estimators.

Notation: X (n, p) and Y (n, q) hold the same n samples in rows; Xc, Yc are their column-centred versions.

- Linear CKA (biased HSIC): ``||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)``, computed in feature space from the
  centred second moments (``CrossMoments``), so memory is O(p^2 + q^2), never O(n^2).
- Debiased CKA replaces each HSIC by the unbiased estimator of Song et al. (2012), which equals the inner product of
  U-centred Gram matrices (Szekely & Rizzo 2014). In feature space (Kornblith's notebook):
  ``||Yc^T Xc||^2 - n/(n-2) <s_x, s_y> + ||Xc||_F^2 ||Yc||_F^2 / ((n-1)(n-2))``, s = squared row norms of Xc, Yc.
  The row norms depend on the final mean, so streaming keeps sums of row norms about the accumulator's shift
  (``_cka_statistics.RowNormSums``) and moves them to the mean at the end.
- Kernel (RBF) CKA and the linear index with many more features than samples use n x n Gram matrices.
"""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.device import check_finite
from latentstitch._core.moments import MagnitudeError, rescaled_for_moments
from latentstitch._core.numerics import matmul
from latentstitch._core.params import check_bool, check_choice, check_positive, check_positive_int
from latentstitch.similarity.measures._cka_statistics import CKAStatistics, cka_ratio
from latentstitch.similarity.measures._registry import as_result, needs_grad, prepare_pair
from latentstitch.similarity.measures._sample_size import warn_if_trivial

CKA_KERNELS = ("linear", "rbf")


# --- Gram matrices ---------------------------------------------------------------------------------------------


def gram_linear(x: torch.Tensor) -> torch.Tensor:
    """``x x^T`` of the column-centred data, in float64 (n x n)."""
    xc = x - x.mean(dim=0)
    return matmul(xc, xc.T).to(torch.float64)


def gram_rbf(x: torch.Tensor, bandwidth: float = 1.0) -> torch.Tensor:
    """RBF Gram matrix ``exp(-|x_i - x_j|^2 / (2 bandwidth^2 median))`` (float64, n x n).

    ``median`` is the median of all n^2 squared distances, diagonal zeros included, as in Kornblith et al.'s
    notebook; the kernel width is thus ``bandwidth`` times the median distance, which makes the index invariant to
    isotropic scaling.
    """
    xc = (x - x.mean(dim=0)).to(torch.float64)
    norms = (xc * xc).sum(dim=1)
    distances = (norms[:, None] + norms[None, :] - 2 * (xc @ xc.T)).clamp_min(0.0)
    distances = distances * (1 - torch.eye(x.shape[0], dtype=distances.dtype, device=distances.device))
    median = _median(distances.reshape(-1))
    if not median > 0:
        raise ValueError(
            "x: the median pairwise distance is zero (most rows coincide), so the RBF bandwidth is undefined"
        )
    return torch.exp(-distances / (2 * bandwidth**2 * median))


def _median(values: torch.Tensor) -> torch.Tensor:
    # numpy's convention: the mean of the two middle values for an even count (torch.median takes the lower one).
    m = values.numel()
    upper = torch.kthvalue(values, m // 2 + 1).values
    return upper if m % 2 else (torch.kthvalue(values, m // 2).values + upper) / 2


def center_gram(gram: torch.Tensor, unbiased: bool = False) -> torch.Tensor:
    """Double-centre ``gram`` (``H K H``), or U-centre it (Szekely & Rizzo 2014) when ``unbiased``: zero diagonal,
    rows/columns adjusted so that ``<U(K), U(L)>_F = n(n-3) HSIC_1(K, L)``, the unbiased HSIC of Song et al."""
    n = gram.shape[0]
    if not unbiased:
        means = gram.mean(dim=0)
        means = means - means.mean() / 2
        return gram - means[:, None] - means[None, :]
    off_diagonal = 1 - torch.eye(n, dtype=gram.dtype, device=gram.device)
    gram = gram * off_diagonal
    means = gram.sum(dim=0) / (n - 2)
    means = means - means.sum() / (2 * (n - 1))
    return (gram - means[:, None] - means[None, :]) * off_diagonal


def gram_hsic_terms(gram_x: torch.Tensor, gram_y: torch.Tensor, unbiased: bool):
    kx, ky = center_gram(gram_x, unbiased), center_gram(gram_y, unbiased)
    return (kx * ky).sum(), (kx * kx).sum(), (ky * ky).sum()


def _uses_gram(x: torch.Tensor, y: torch.Tensor, method: str) -> bool:
    n, p, q = x.shape[0], x.shape[1], y.shape[1]
    return method == "gram" or (method == "auto" and n * (p + q) < p * p + p * q + q * q)


def linear_hsic_terms(x: torch.Tensor, y: torch.Tensor, debiased: bool, method: str = "auto"):
    """Scaled HSIC terms of the linear kernel, in feature space or from Gram matrices, whichever is cheaper.

    The Gram path takes products in the data's precision: callers bring the data into range first (``cka`` and
    ``minibatch_cka`` rescale by a power of two)."""
    if _uses_gram(x, y, method):
        return gram_hsic_terms(gram_linear(x), gram_linear(y), debiased)
    return CKAStatistics(debiased, track_grad=needs_grad(x, y)).update(x, y, finite_checked=True).hsic_terms()


# --- public functions ------------------------------------------------------------------------------------------


def cka(
    x: ArrayLike,
    y: ArrayLike,
    kernel: str = "linear",
    debiased: bool = False,
    *,
    bandwidth: float = 1.0,
    method: str = "auto",
) -> float | torch.Tensor:
    """Centered kernel alignment between two representations of the same samples (Kornblith et al. 2019).

    ``CKA = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))`` with K, L the Gram matrices of x and y.

    Parameters
    ----------
    x : (n, p) or (n, ...) array or tensor
        One representation, a row per sample (extra dimensions are flattened).
    y : (n, q) or (n, ...) array or tensor
        The other, same samples in the same order.
    kernel : {"linear", "rbf"}
        ``"rbf"``: ``exp(-|u - v|^2 / (2 sigma^2))`` with ``sigma = bandwidth * median distance`` (Kornblith's
        heuristic; median over all n^2 pairs including the diagonal). Needs O(n^2) memory.
    debiased : bool
        Use the unbiased HSIC estimator (Song et al. 2012) in numerator and denominator; needs n >= 4. The value
        can then be slightly negative; it is less biased upward for small n / wide layers.
    bandwidth : float
        RBF width as a fraction of the median distance.
    method : {"auto", "features", "gram"}
        Linear kernel only: ``"features"`` computes from p x p / q x q moments (O(n (p+q)^2) time, O((p+q)^2)
        memory); ``"gram"`` from n x n Gram matrices; ``"auto"`` picks the cheaper.

    Returns
    -------
    float for numpy inputs; a 0-d tensor (x's dtype and device) for torch inputs, differentiable.

    Notes
    -----
    Centering: columns are centred (equivalently the Gram matrices are double-centred, ``H K H``); the debiased
    estimator U-centres them. Similarity in [0, 1] (debiased: [-1, 1]); symmetric. Linear CKA is invariant to
    orthogonal maps, isotropic scaling and translation of either representation, but not to general invertible
    linear maps or per-axis scaling. RBF CKA (median bandwidth) has the same invariances. Accumulation is in
    float64; float32 products are taken in float32 within blocks of rows (bfloat16/float16 data are promoted to
    float32 for them). A constant representation raises ``ZeroVarianceError``. Magnitudes: data whose squares would
    overflow or underflow (1e20 or 1e-30 in float32, 1e200 or 1e-200 in float64) give the same index as at unit
    scale (float64 products, or a power-of-two rescaling, which the index is invariant to), not a false "zero
    variance" or an overflow.
    """
    check_choice(kernel, "kernel", CKA_KERNELS)
    check_bool(debiased, "debiased")
    check_positive(bandwidth, "bandwidth")
    check_choice(method, "method", ("auto", "features", "gram"))
    if kernel == "rbf" and method == "features":
        raise ValueError("method: the RBF kernel has no finite feature space; use method='gram' or 'auto'")
    name = f"{'debiased ' if debiased else ''}{kernel} CKA"
    # Linear kernel in feature space: NaN/inf are detected in the three HSIC values they would poison, which saves
    # two passes over the data; only then are the inputs searched for the offending row.
    xt, yt = prepare_pair(x, y, min_rows=4 if debiased else 2, measure=name, finite=kernel != "linear", varying=True)
    warn_if_trivial(f"{kernel}_cka", xt.shape[0], xt.shape[1], yt.shape[1])
    if kernel == "rbf":
        # Scale invariant (median bandwidth): power-of-two rescaling keeps every distance in range, at no cost
        # next to the n x n Gram matrices.
        xt, yt = rescaled_for_moments(xt), rescaled_for_moments(yt)
        return as_result(cka_ratio(*_rbf_terms(xt, yt, bandwidth, debiased), measure=name), x, xt)
    if _uses_gram(xt, yt, method):
        xt, yt = rescaled_for_moments(xt), rescaled_for_moments(yt)
    return as_result(cka_ratio(*_scale_free_linear_terms(xt, yt, debiased, method), measure=name), x, xt)


def _rbf_terms(xt: torch.Tensor, yt: torch.Tensor, bandwidth: float, debiased: bool):
    return gram_hsic_terms(gram_rbf(xt, bandwidth), gram_rbf(yt, bandwidth), debiased)


def _scale_free_linear_terms(xt: torch.Tensor, yt: torch.Tensor, debiased: bool, method: str):
    """The linear HSIC terms, whatever the magnitudes: CKA is invariant to rescaling either side, so data whose
    moments would overflow or underflow (``MagnitudeError``, or non-finite terms from finite data) are brought
    into range by a power of two and the terms recomputed. NaN/inf in the data raise an error naming the row."""
    try:
        terms = linear_hsic_terms(xt, yt, debiased, method)
        if all(bool(torch.isfinite(t)) for t in terms):
            return terms
    except MagnitudeError:
        pass
    check_finite(xt, "x")
    check_finite(yt, "y")
    terms = linear_hsic_terms(rescaled_for_moments(xt), rescaled_for_moments(yt), debiased, method)
    if not all(bool(torch.isfinite(t)) for t in terms):
        raise ValueError("x, y: the HSIC sums overflowed even after rescaling; the values span too many magnitudes")
    return terms


def minibatch_cka(x: ArrayLike, y: ArrayLike, batch_size: int = 1024) -> float | torch.Tensor:
    """Minibatch CKA of Nguyen et al. (ICLR 2021): linear CKA from unbiased HSIC accumulated over minibatches.

    ``CKA = sum_i HSIC_1(K_i, L_i) / sqrt(sum_i HSIC_1(K_i, K_i) sum_i HSIC_1(L_i, L_i))`` over consecutive
    minibatches of ``batch_size`` rows, each HSIC_1 the U-centred Gram inner product (``<U(K_i), U(L_i)>_F``,
    unnormalised, exactly as ``efficient_CKA.MinibatchCKA`` accumulates it). A final remainder of fewer than 4
    rows is merged into the preceding batch (the estimator needs 4).

    The value depends on the batching (it estimates population CKA without the small-n bias of the biased
    estimator); for the exact full-data index use ``cka(x, y)`` or ``cka(x, y, debiased=True)``. Centering:
    U-centring per batch (no column centring needed). Similarity in [-1, 1], symmetric, same invariances as linear
    CKA. Differentiable for torch inputs. See ``StreamingMinibatchCKA`` to feed batches as they come.
    """
    batch_size = check_positive_int(batch_size, "batch_size", minimum=4)
    xt, yt = prepare_pair(x, y, min_rows=4, measure="minibatch CKA", varying=True)
    # One power of two per side for all batches (the index is scale invariant; per-batch factors would not be).
    xt, yt = rescaled_for_moments(xt), rescaled_for_moments(yt)
    totals = None
    for xb, yb in _batches(xt, yt, batch_size):
        terms = linear_hsic_terms(xb, yb, debiased=True)
        totals = terms if totals is None else tuple(t + u for t, u in zip(totals, terms, strict=True))
    return as_result(cka_ratio(*totals, measure="minibatch CKA"), x, xt)


def _batches(x: torch.Tensor, y: torch.Tensor, batch_size: int):
    n = x.shape[0]
    stops = [*range(batch_size, n, batch_size), n]
    if len(stops) > 1 and stops[-1] - stops[-2] < 4:
        stops.pop(-2)
    start = 0
    for stop in stops:
        yield x[start:stop], y[start:stop]
        start = stop
