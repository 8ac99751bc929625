"""Closed-form permutation tests of the kernel-alignment measures: no permutation is drawn.

Linear CKA is the RV coefficient: ``tr(Wx Wy) / sqrt(tr Wx^2 tr Wy^2)`` with ``W = Xc Xc^T`` the double-centred Gram
matrices. Permuting y's rows permutes Wy's rows and columns; the denominator does not change, so the null of CKA is
the null of the Mantel statistic ``tr(Wx P Wy P^T)`` scaled, whose exact moments ``_permutation_moments`` gives.
Debiased CKA is the same with U-centred Gram matrices (zero diagonal, zero row sums: the permutation mean is exactly
0), RBF CKA with the centred (or U-centred) RBF Gram matrices.

What is exact and what it costs (n samples, d = p + q features):

- linear and debiased CKA work in feature space and never form an n x n matrix: the value and the exact mean and
  variance come from the p x p, q x q, p x q moments (what ``cka`` computes anyway, O(n d^2)) and the squared row
  norms (O(n d)).
- the third moment (the skewness of the Pearson type III fit) also needs ``U = sum_ij A_ij^3``, ``R = sum_i
  A_ii (A^2)_ii`` and, for the U-centred matrices, ``tr A^3``: sums over n^2 entries. They are computed exactly
  from every row of A (O(n^2 d)) when ``n <= EXACT_ROWS``, otherwise estimated without bias from m rows drawn with
  ``seed`` (m = clamp(d / 4, 128, SAMPLED_ROWS), O(m n d): a quarter of a Gram product per side), half of them in
  proportion to |x_i|^3 (``sampled_rows``: heavy-tailed rows carry most of these sums; uniform rows miss them).
  The rows are products in the data's precision (float32 stays float32, as in ``cka``), reduced per row and
  accumulated in float64. The mean and variance stay exact, the skewness is an estimate (``ClosedForm.exact``
  says which). Every other sum (``tr A``, ``tr A^2``, the biased ``tr A^3`` as ``tr C^3``, ``sum a_i^2``,
  ``sum a_i^3``, ``a^T A a``) is exact in feature space; the U-centred ``tr A^3`` is estimated from the same rows
  at O(d^2) a row.
- the value itself comes from the same moments: one pass over the data, as ``cka``; the closed form adds a centred
  copy of each side and the sampled rows (``benchmarks/permutation_null.py --only closed-form``).
- RBF CKA forms its n x n Gram matrices, as the measure itself does.

Other measures have no closed-form null here: the fitted ones (R^2, the CCA family, Procrustes, GULP...) and the
neighbourhood ones are not Mantel statistics; RSA correlates the off-diagonal entries (not row-centred), and distance
correlation is the square root of a Mantel ratio, whose moments are not those of the ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentstitch._core.device import check_finite
from latentstitch._core.moments import rescaled_for_moments
from latentstitch._core.numerics import matmul, power_of_two_scale, row_norms
from latentstitch.similarity.inference._permutation_moments import GramInvariants, mantel_moments, pearson3_p_value
from latentstitch.similarity.measures._cka import center_gram, gram_rbf
from latentstitch.similarity.measures._cka_statistics import CKAStatistics, cka_ratio, debiased_hsic
from latentstitch.similarity.measures._registry import MeasureSpec

EXACT_ROWS = 2048  # the skewness's n^2 sums are exact up to this many samples ...
SAMPLED_ROWS = 256  # ... and estimated from at most this many sampled rows beyond (a quarter of the width, >= 128)
_BLOCK_ELEMENTS = 1 << 23  # rows of A in one block of the sweep: 64 MiB of float64
SIZE_POWER = 1.5  # half the sampled rows are drawn in proportion to |row|^(2 SIZE_POWER) (see sampled_rows)


def has_closed_form(spec: MeasureSpec, options: dict[str, Any]) -> bool:
    """Whether ``closed_form_test`` handles this measure with these options."""
    merged = {**spec.options, **options}
    if spec.name not in ("linear_cka", "debiased_cka", "rbf_cka"):
        return False
    return set(merged) <= {"kernel", "debiased", "bandwidth", "method"} and merged.get("kernel", "linear") in (
        "linear",
        "rbf",
    )


@dataclass(frozen=True)
class ClosedForm:
    """The measure's value and its permutation null in closed form, in the measure's units: ``mean``, ``std``
    exact; ``skewness`` exact when ``exact`` (else estimated from ``rows`` sampled rows); ``z`` the standardised
    value; ``p_value`` the Pearson type III upper tail."""

    value: float
    mean: float
    std: float
    skewness: float
    z: float
    p_value: float
    exact: bool
    rows: int


# --- the centred matrices, as operators ------------------------------------------------------------------------
#
# ``rows(index)`` gives rows of the matrix in the data's precision (float32 data: float32 products, as ``cka`` takes
# them); every sum over them is reduced per row in that precision and accumulated across rows in float64.


class _FeatureGram:
    """``A = Xc Xc^T - c H`` with ``c = tr(Xc Xc^T) / (n - 1)`` (trace 0) from centred data, never formed; ``cov``
    is ``Xc^T Xc`` (float64)."""

    def __init__(self, xc: torch.Tensor, cov: torch.Tensor):
        self.xc, self.n = xc, xc.shape[0]
        n, total = self.n, float(torch.trace(cov))
        self.c = c = total / (n - 1)
        norms = row_norms(xc, squared=True).to(torch.float64)
        self.diag = norms - c * (1 - 1 / n)
        self.sizes = norms**SIZE_POWER
        norm2 = float((cov * cov).sum())
        self.trace2 = norm2 - total**2 / (n - 1)
        cube = float(torch.trace(cov @ cov @ cov))
        self.trace3 = cube - 3 * c * norm2 + 3 * c**2 * total - c**3 * (n - 1)

    def rows(self, index: torch.Tensor) -> torch.Tensor:
        block = matmul(self.xc[index], self.xc.T).add_(self.c / self.n)
        block[torch.arange(index.shape[0]), index] -= self.c
        return block

    def apply(self, v: torch.Tensor) -> torch.Tensor:
        product = matmul(self.xc, matmul(self.xc.T, v.to(self.xc.dtype))).to(torch.float64)
        return product - self.c * (v - v.mean(dim=0, keepdim=True))


class _UCentredFeatureGram:
    """The U-centred Gram matrix ``Xc Xc^T + u 1^T + 1 u^T - diag(g)`` (zero diagonal, zero row sums), never formed;
    ``u = w / (n - 2) - tr / (2 (n - 1)(n - 2))`` with w the squared row norms, ``g = w + 2 u``.

    Its ``tr A^3`` is estimated from the sampled rows as the rest of the n^2 sums, at O(d^2) a row: with ``r_i`` row i
    of A, ``(A^3)_ii = r_i^T A r_i = |Xc^T r_i|^2 - sum_j g_j r_ij^2`` (the ``u`` terms vanish on zero row sums) and
    ``Xc^T r_i = C x_i + Xc^T u - g_i x_i`` (``Xc^T 1 = 0``), C = Xc^T Xc."""

    trace3 = None

    def __init__(self, xc: torch.Tensor, cov: torch.Tensor):
        self.xc, self.n = xc, xc.shape[0]
        n, total = self.n, torch.trace(cov)
        norms = row_norms(xc, squared=True).to(torch.float64)
        self.u = norms / (n - 2) - float(total) / (2 * (n - 1) * (n - 2))
        self.g = norms + 2 * self.u
        self.diag = torch.zeros_like(norms)
        self.sizes = norms**SIZE_POWER
        self.trace2 = float(debiased_hsic((cov * cov).sum(), norms @ norms, total, total, n))
        self._cov, self._u, self._g = (t.to(xc.dtype) for t in (cov, self.u, self.g))
        self._xu = matmul(self._u[None, :], xc)[0]

    def rows(self, index: torch.Tensor) -> torch.Tensor:
        block = matmul(self.xc[index], self.xc.T).add_(self._u[None, :]).add_(self._u[index, None])
        block[torch.arange(index.shape[0]), index] = 0.0
        return block

    def cube_diagonal(self, index: torch.Tensor, rows: torch.Tensor, squares: torch.Tensor) -> torch.Tensor:
        """``(A^3)_ii`` for the rows ``index`` (``rows``: those rows of A, ``squares``: their squares)."""
        xi = self.xc[index]
        projected = matmul(xi, self._cov) + self._xu - self._g[index, None] * xi
        weighted = matmul(squares, self._g[:, None])[:, 0]
        return row_norms(projected, squared=True).to(torch.float64) - weighted.to(torch.float64)

    def apply(self, v: torch.Tensor) -> torch.Tensor:
        product = matmul(self.xc, matmul(self.xc.T, v.to(self.xc.dtype))).to(torch.float64)
        return product + self.u[:, None] * v.sum(dim=0) + (self.u @ v)[None, :] - self.g[:, None] * v


class _ExplicitGram:
    """A formed n x n centred (or U-centred) matrix, shifted to trace 0 when its diagonal is not zero."""

    trace3 = None

    def __init__(self, matrix: torch.Tensor):
        self.n = n = matrix.shape[0]
        matrix = matrix.to(torch.float64)
        c = float(torch.trace(matrix)) / (n - 1)
        if c != 0.0:
            matrix = matrix - c * (torch.eye(n, dtype=matrix.dtype, device=matrix.device) - 1.0 / n)
        self.matrix = matrix
        self.diag = torch.diagonal(matrix).clone()
        self.sizes = (matrix * matrix).sum(dim=1) ** SIZE_POWER
        self.trace2 = float((matrix * matrix).sum())

    def rows(self, index: torch.Tensor) -> torch.Tensor:
        return self.matrix[index]

    def cube_diagonal(self, index: torch.Tensor, rows: torch.Tensor, squares: torch.Tensor) -> torch.Tensor:
        return (rows * (self.matrix @ rows.T).T).sum(dim=1)

    def apply(self, v: torch.Tensor) -> torch.Tensor:
        return self.matrix @ v


def gram_invariants(op: Any, rows: tuple[torch.Tensor, torch.Tensor] | None = None) -> GramInvariants:
    """The invariants of ``op``'s matrix; the n^2 sums over every row (``rows`` None: exact) or estimated without
    bias from sampled rows ``(index, weights)`` (``sampled_rows``: each row's share times its weight); the
    diagonal's share is always exact."""
    n, a = op.n, op.diag
    if rows is None:
        index, weights = torch.arange(n, device=a.device), torch.ones(n, dtype=torch.float64, device=a.device)
    else:
        index, weights = (t.to(a.device) for t in rows)
    block = max(1, min(index.shape[0], _BLOCK_ELEMENTS // max(n, 1)))
    cubes = squares = trace3 = 0.0
    for start in range(0, index.shape[0], block):
        part, weight = index[start : start + block], weights[start : start + block]
        r = op.rows(part)
        power = r * r  # one temporary: the squares, then the cubes
        row_squares = power.sum(dim=1).to(torch.float64)
        if op.trace3 is None:
            trace3 += float((weight * op.cube_diagonal(part, r, power)).sum())
        row_cubes = power.mul_(r).sum(dim=1).to(torch.float64)
        diagonal = a[part]
        cubes += float((weight * (row_cubes - diagonal**3)).sum())  # off the diagonal
        squares += float((weight * diagonal * (row_squares - diagonal**2)).sum())
    diag3 = float((a**3).sum())
    return GramInvariants(
        n=n,
        trace=0.0,
        trace2=op.trace2,
        diag2=float((a * a).sum()),
        trace3=op.trace3 if op.trace3 is not None else trace3,
        diag3=diag3,
        cubes=diag3 + cubes,
        diag_form=float(a @ op.apply(a[:, None])[:, 0]),
        diag_square=diag3 + squares,
    )


def sample_size(n: int, width: int) -> int | None:
    """None (every row: exact) up to EXACT_ROWS samples; else ``clamp(width / 4, 128, SAMPLED_ROWS)`` rows: the sweep
    costs m n d per side next to the n d^2 of the moments. With rows drawn by size (``sampled_rows``), 128 rows
    estimate the skewness of heavy-tailed data within a few percent, moving log p by < 0.05 up to z = 4 for linear
    CKA (about 0.17 for debiased), far inside the Monte Carlo error of 1,000 drawn permutations (0.3 at p = 0.01)."""
    return None if n <= EXACT_ROWS else min(n, SAMPLED_ROWS, max(128, width // 4))


def sampled_rows(op: Any, count: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` rows drawn with replacement, row i with probability ``p_i = (1/n + s_i / sum s) / 2`` (s: the
    operator's row sizes, |x_i|^3 for the linear kernel: a row's share of the cubes and squares grows with it, and
    heavy-tailed rows carry most of it), and their weights ``1 / (count p_i)`` (Hansen-Hurwitz: unbiased; the
    uniform half bounds every weight by 2n / count)."""
    sizes = op.sizes.detach().cpu().numpy()
    total = sizes.sum()
    p = np.full(op.n, 1.0 / op.n) if not total > 0 else 0.5 / op.n + 0.5 * sizes / total
    chosen = np.sort(rng.choice(op.n, count, replace=True, p=p / p.sum()))
    return torch.from_numpy(chosen), torch.from_numpy(1.0 / (count * p[chosen]))


_UNSCALED = 2.0**8  # data of largest magnitude within this factor of 1: Gram cubes stay in float32's range as is
_NEAR_ONE = 2.0**20  # ... within this factor: scaled by a power of two with the centring (one pass)


def _scaled(t: torch.Tensor) -> tuple[torch.Tensor, float]:
    """``(data, s)``: the closed form's sums are cubes of Gram entries, which float32 holds only for data of
    moderate magnitude, so the centred data are ``s (data - mean)`` with s a power of two (exact): 1 for data whose
    largest magnitude is within 2^8 of 1, the power that brings it into [0.5, 1) otherwise. Data beyond 2^20 are
    rescaled here already (a copy; s then 1), so that their second moments are in range too."""
    low, high = torch.aminmax(t)
    largest = torch.maximum(-low, high)
    if 1 / _UNSCALED <= float(largest) <= _UNSCALED:
        return t, 1.0
    s = float(power_of_two_scale(largest))
    if 1 / _NEAR_ONE <= s <= _NEAR_ONE:
        return t, s
    return t * s, 1.0


def _centred(t: torch.Tensor, mean: torch.Tensor, s: float) -> torch.Tensor:
    """``s (t - mean)`` in t's precision (float32 stays float32): ``mean`` is the exact float64 mean. On the CPU
    through numpy (2-3x faster than torch's broadcast subtraction here)."""
    dtype = torch.float64 if t.dtype == torch.float64 else torch.float32
    t, shift = t.to(dtype), mean.to(dtype)
    if t.device.type == "cpu":
        out = torch.from_numpy(np.subtract(t.numpy(), shift.numpy()))
    else:
        out = t - shift
    return (out.mul_(s) if s != 1.0 else out).contiguous()


def _operators(spec: MeasureSpec, x: torch.Tensor, y: torch.Tensor, options: dict[str, Any]):
    """(value, x's operator, y's operator, denominator, offset): the value is ``(T + offset) / denominator``
    with T the Mantel statistic of the trace-zero operators and offset ``tr A0 tr B0 / (n - 1)``. Linear kernels:
    the value comes from the same moments (one pass over the data, as ``cka``) that give the operators."""
    merged = {**spec.options, **options}
    debiased = bool(merged.get("debiased", False))
    n = x.shape[0]
    if merged.get("kernel", "linear") == "rbf":
        bandwidth = merged.get("bandwidth", 1.0)
        kx = center_gram(gram_rbf(rescaled_for_moments(x), bandwidth).to(torch.float64), debiased)
        ky = center_gram(gram_rbf(rescaled_for_moments(y), bandwidth).to(torch.float64), debiased)
        xy, xx, yy = (kx * ky).sum(), (kx * kx).sum(), (ky * ky).sum()
        value = float(cka_ratio(xy, xx, yy, spec.name))
        offset = float(torch.trace(kx) * torch.trace(ky)) / (n - 1)
        return value, _ExplicitGram(kx), _ExplicitGram(ky), float(torch.sqrt(xx * yy)), offset
    (x, sx), (y, sy) = _scaled(x), _scaled(y)
    statistics = CKAStatistics(debiased).update(x, y, finite_checked=True)
    xy, xx, yy = statistics.hsic_terms()
    if not all(bool(torch.isfinite(t)) for t in (xy, xx, yy)):  # NaN/inf in the data (named by row) or overflow
        check_finite(x, "x")
        check_finite(y, "y")
        raise ValueError("x, y: the HSIC sums overflowed; the values span too many magnitudes")
    value = float(cka_ratio(xy, xx, yy, spec.name))
    m = statistics.moments
    cxx, cyy = m.centered_aa() * sx**2, m.centered_bb() * sy**2
    gram = _UCentredFeatureGram if debiased else _FeatureGram
    offset = 0.0 if debiased else float(torch.trace(cxx) * torch.trace(cyy)) / (n - 1)
    op_x, op_y = gram(_centred(x, m.mean_a, sx), cxx), gram(_centred(y, m.mean_b, sy), cyy)
    denominator = float(torch.sqrt(xx) * torch.sqrt(yy)) * (sx * sy) ** 2
    return value, op_x, op_y, denominator, offset


def closed_form_test(
    spec: MeasureSpec, x: torch.Tensor, y: torch.Tensor, options: dict[str, Any], seed: int = 0
) -> ClosedForm:
    """The closed-form permutation test of ``spec`` (``has_closed_form``) on validated tensors with n >= 6."""
    with torch.no_grad():
        value, op_x, op_y, denominator, offset = _operators(spec, x.detach(), y.detach(), options)
        count = sample_size(x.shape[0], max(x.shape[1], y.shape[1]))
        rng = np.random.default_rng(seed)
        rows_x, rows_y = (None if count is None else sampled_rows(op, count, rng) for op in (op_x, op_y))
        invariants = gram_invariants(op_x, rows_x), gram_invariants(op_y, rows_y)
    exact, rows = count is None, x.shape[0] if count is None else count
    return closed_form_from_invariants(value, *invariants, denominator, offset, exact=exact, rows=rows)


def closed_form_from_invariants(
    value: float,
    x: GramInvariants,
    y: GramInvariants,
    denominator: float,
    offset: float,
    *,
    exact: bool,
    rows: int,
) -> ClosedForm:
    """The test of a value ``(T + offset) / denominator`` with T the Mantel statistic of the trace-zero matrices
    whose invariants are ``x``, ``y`` (as ``closed_form_test`` computes them from data; ``layer_similarity`` from
    streamed sums): the exact mean and variance, the Pearson type III p-value."""
    moments = mantel_moments(x, y)
    mean = offset / denominator
    std = math.sqrt(max(moments.variance, 0.0)) / denominator
    difference = value - mean
    z = difference / std if std > 0 else (0.0 if difference == 0 else math.copysign(math.inf, difference))
    skewness = moments.skewness
    return ClosedForm(
        value=value,
        mean=mean,
        std=std,
        skewness=skewness,
        z=z,
        p_value=pearson3_p_value(z, skewness),
        exact=exact,
        rows=rows,
    )
