"""Centered kernel alignment (Kornblith et al., ICML 2019) and its debiased and minibatch estimators.

Notation: X (n, p) and Y (n, q) hold the same n samples in rows; Xc, Yc are their column-centred versions.

- Linear CKA (biased HSIC): ``||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)``, computed in feature space from the
  centred second moments (``CrossMoments``), so memory is O(p^2 + q^2), never O(n^2).
- Debiased CKA replaces each HSIC by the unbiased estimator of Song et al. (2012), which equals the inner product of
  U-centred Gram matrices (Szekely & Rizzo 2014). In feature space (Kornblith's notebook):
  ``||Yc^T Xc||^2 - n/(n-2) <s_x, s_y> + ||Xc||_F^2 ||Yc||_F^2 / ((n-1)(n-2))``, s = squared row norms of Xc, Yc.
  The row norms depend on the final mean, so streaming keeps sums of row norms about the accumulator's shift
  (``_RowNormSums``) and moves them to the mean at the end.
- Kernel (RBF) CKA and the linear index with many more features than samples use n x n Gram matrices.
"""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.device import check_finite
from latentstitch._core.moments import CrossMoments, MagnitudeError, rescaled_for_moments
from latentstitch._core.numerics import matmul, row_norms
from latentstitch._core.params import check_bool, check_choice, check_positive, check_positive_int
from latentstitch.similarity._registry import ZeroVarianceError, as_result, needs_grad, prepare_pair

CKA_KERNELS = ("linear", "rbf")


# --- feature space ---------------------------------------------------------------------------------------------


class _RowNormSums:
    """Sums of squared row norms of the shifted data, the extra statistics of debiased CKA in feature space.

    With d = a - shift_a, e = b - shift_b, q = |d|^2, r = |e|^2 (per row): ``qq = sum q^2``, ``qr = sum q r``,
    ``rr = sum r^2``, ``qa = sum q d``, ``qb = sum q e``, ``ra = sum r d``, ``rb = sum r e``. Together with the
    moments they move exactly to any other shift (``moved``), in particular to the means.
    """

    FIELDS = ("qq", "qr", "rr", "qa", "qb", "ra", "rb")

    def __init__(self, values: dict[str, torch.Tensor] | None = None):
        self.values = values

    def add(self, d: torch.Tensor, e: torch.Tensor) -> None:
        """Add a block of shifted rows ``d = a - shift_a``, ``e = b - shift_b`` (as yielded by
        ``CrossMoments.blocks``)."""
        norms = torch.stack([row_norms(d, squared=True), row_norms(e, squared=True)])
        (q, r), (qa, ra), (qb, rb) = norms.to(torch.float64), matmul(norms, d), matmul(norms, e)  # one pass each
        block = {"qq": q @ q, "qr": q @ r, "rr": r @ r, "qa": qa, "qb": qb, "ra": ra, "rb": rb}
        block.update({k: block[k].to(torch.float64) for k in ("qa", "qb", "ra", "rb")})
        self.values = block if self.values is None else {k: self.values[k] + block[k] for k in self.FIELDS}

    def moved(self, moments: CrossMoments, delta_a: torch.Tensor, delta_b: torch.Tensor) -> _RowNormSums:
        """The sums about shifts moved by ``delta_a``, ``delta_b``, from these sums and ``moments`` (both about the
        old shifts). Expands q' = |d - delta|^2 = q + alpha with alpha = -2 d.delta + |delta|^2."""
        n, v = moments.count, self.values
        side = {
            "a": (moments.sum_a, delta_a, torch.trace(moments.aa)),
            "b": (moments.sum_b, delta_b, torch.trace(moments.bb)),
        }
        # cross_delta[(w, u)] = S_wu delta_u, with S_wu = sum_i w_i u_i^T: the only d x d products needed.
        cross_delta = {
            ("a", "a"): moments.aa @ delta_a,
            ("b", "a"): moments.ab.T @ delta_a,
            ("a", "b"): moments.ab @ delta_b,
            ("b", "b"): moments.bb @ delta_b,
        }
        norm_times = {("a", "a"): v["qa"], ("a", "b"): v["qb"], ("b", "a"): v["ra"], ("b", "b"): v["rb"]}

        def alpha_sum(u: str) -> torch.Tensor:  # sum_i alpha_u,i
            total, delta, _ = side[u]
            return -2 * delta @ total + n * (delta @ delta)

        def alpha_times(u: str, w: str) -> torch.Tensor:  # sum_i alpha_u,i w_i
            delta = side[u][1]
            return -2 * cross_delta[(w, u)] + (delta @ delta) * side[w][0]

        def norm_alpha(u: str, w: str) -> torch.Tensor:  # sum_i q_u,i alpha_w,i
            delta = side[w][1]
            return -2 * delta @ norm_times[(u, w)] + (delta @ delta) * side[u][2]

        def alpha_alpha(u: str, w: str) -> torch.Tensor:  # sum_i alpha_u,i alpha_w,i
            (total_u, du, _), (total_w, dw, _) = side[u], side[w]
            return (
                4 * du @ cross_delta[(u, w)]
                - 2 * (dw @ dw) * (du @ total_u)
                - 2 * (du @ du) * (dw @ total_w)
                + n * (du @ du) * (dw @ dw)
            )

        def moved_norm_times(u: str, w: str) -> torch.Tensor:  # sum_i q'_u,i (w_i - delta_w)
            return norm_times[(u, w)] - side[u][2] * side[w][1] + alpha_times(u, w) - side[w][1] * alpha_sum(u)

        def moved_products(u: str, w: str, key: str) -> torch.Tensor:  # sum_i q'_u,i q'_w,i
            return v[key] + norm_alpha(u, w) + norm_alpha(w, u) + alpha_alpha(u, w)

        return _RowNormSums(
            {
                "qq": moved_products("a", "a", "qq"),
                "qr": moved_products("a", "b", "qr"),
                "rr": moved_products("b", "b", "rr"),
                "qa": moved_norm_times("a", "a"),
                "qb": moved_norm_times("a", "b"),
                "ra": moved_norm_times("b", "a"),
                "rb": moved_norm_times("b", "b"),
            }
        )


class CKAStatistics:
    """Sufficient statistics of linear CKA in feature space: ``CrossMoments`` (+ row-norm sums when debiased).

    Products are taken in the data's precision (float32 stays float32, see ``CrossMoments(precision="input")``) and
    accumulated in float64.
    """

    def __init__(self, debiased: bool, *, track_grad: bool = False):
        self.debiased = debiased
        self.moments = CrossMoments(
            precision="input", track_grad=track_grad, names=("x", "y"), max_order=4 if debiased else 2
        )
        self.row_norms = _RowNormSums() if debiased else None

    def update(self, x: torch.Tensor, y: torch.Tensor, *, finite_checked: bool = False) -> CKAStatistics:
        if self.row_norms is None:
            self.moments.update(x, y, finite_checked=finite_checked)
            return self
        for d, e in self.moments.blocks(x, y, finite_checked=finite_checked):
            self.row_norms.add(d, e)
        return self

    def merge(self, other: CKAStatistics) -> CKAStatistics:
        out = CKAStatistics(self.debiased, track_grad=self.moments.track_grad)
        out.moments = self.moments.merge(other.moments)
        if self.debiased:
            mine, theirs = self.row_norms.values, other.row_norms.values
            if mine is None or theirs is None:
                out.row_norms = _RowNormSums(mine if theirs is None else theirs)
            else:
                # Bring the other's sums to our shift, then add.
                moved = other.row_norms.moved(
                    other.moments,
                    self.moments.shift_a - other.moments.shift_a,
                    self.moments.shift_b - other.moments.shift_b,
                ).values
                out.row_norms = _RowNormSums({k: mine[k] + moved[k] for k in _RowNormSums.FIELDS})
        return out

    def hsic_terms(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Scaled HSIC(X, Y), HSIC(X, X), HSIC(Y, Y) (scales cancel in CKA): Frobenius inner products of the
        centred (biased) or U-centred (debiased) Gram matrices, computed from p x p and q x q moments."""
        m = self.moments
        n = m.count
        cxx, cxy, cyy = m.centered_aa(), m.centered_ab(), m.centered_bb()
        xy, xx, yy = (torch.linalg.matrix_norm(c) ** 2 for c in (cxy, cxx, cyy))
        if not self.debiased:
            return xy, xx, yy
        about_mean = self.row_norms.moved(m, m.sum_a / n, m.sum_b / n).values
        norm_x, norm_y = torch.trace(cxx), torch.trace(cyy)
        return (
            _debias(xy, about_mean["qr"], norm_x, norm_y, n),
            _debias(xx, about_mean["qq"], norm_x, norm_x, n),
            _debias(yy, about_mean["rr"], norm_y, norm_y, n),
        )

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {f"moments.{k}": v for k, v in self.moments.state_dict().items()}
        if self.row_norms is not None and self.row_norms.values is not None:
            state.update({f"row_norms.{k}": v for k, v in self.row_norms.values.items()})
        return state

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor], debiased: bool) -> CKAStatistics:
        out = cls(debiased)
        out.moments = CrossMoments.from_state_dict(
            {k.split(".", 1)[1]: v for k, v in state.items() if k.startswith("moments.")},
            precision="input",
            names=("x", "y"),
            max_order=4 if debiased else 2,
        )
        if debiased and "row_norms.qq" in state:
            out.row_norms = _RowNormSums({k: state[f"row_norms.{k}"] for k in _RowNormSums.FIELDS})
        return out


def _debias(frobenius: torch.Tensor, norms_dot: torch.Tensor, total_x: torch.Tensor, total_y: torch.Tensor, n: int):
    # Kornblith's feature-space form of n(n-3) * unbiased HSIC (Song et al. 2012), for column-centred data.
    return frobenius - n / (n - 2) * norms_dot + total_x * total_y / ((n - 1) * (n - 2))


def cka_ratio(xy: torch.Tensor, xx: torch.Tensor, yy: torch.Tensor, measure: str = "CKA") -> torch.Tensor:
    """``HSIC(X, Y) / sqrt(HSIC(X, X) HSIC(Y, Y))``; a representation with zero self-HSIC is an error, not NaN."""
    if not xx > 0:
        raise ZeroVarianceError("x", measure)
    if not yy > 0:
        raise ZeroVarianceError("y", measure)
    return xy / (torch.sqrt(xx) * torch.sqrt(yy))


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
    xt, yt = prepare_pair(x, y, min_rows=4 if debiased else 2, measure=name, finite=kernel != "linear")
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
    xt, yt = prepare_pair(x, y, min_rows=4, measure="minibatch CKA")
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
