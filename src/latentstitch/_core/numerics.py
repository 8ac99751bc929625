"""Where the heavy linear algebra runs, and in what pieces.

The math of latentstitch is written in torch. One exception is made for speed: a matrix product on the CPU that
needs no gradient is computed by numpy's BLAS. Torch's CPU wheels bundle Intel MKL, whose SGEMM on AMD processors
measured 1.5x slower than numpy's OpenBLAS on the same data (benchmarks/relative_projection.py prints both). The
result is the same product; set ``LATENTSTITCH_CPU_GEMM=torch`` to keep every product in torch. Row norms on the
CPU go through numpy's ``einsum`` for the same reason (1.7x faster than ``torch.linalg.vector_norm`` here).

Chunked computations ask ``chunk_rows`` how many rows to take at a time: cache-sized pieces on the CPU, and on a
GPU as many rows as the free device memory allows, so that a call launches a few large kernels rather than
hundreds of small ones.

Scale-safe arithmetic lives here too: the range in which plain row norms are exact (``safe_norm_range``), exact
power-of-two rescaling (``power_of_two_scale``) and the row norms and unit rows that hold at any magnitude
(``rescaled_row_norms``, ``safe_row_norms``, ``unit_rows``). These are the only row-norm implementations of the
package: ``row_norms`` is the fast plain one, the others add exactness at extreme magnitudes on top of it.
"""

from __future__ import annotations

import math
import os

import numpy as np
import torch

from latentstitch._core.device import reading_is_free
from latentstitch._core.errors import ZeroNormError

# --- scale-safe arithmetic ---------------------------------------------------------------------------------------


def safe_norm_range(dtype: torch.dtype, width: int) -> tuple[float, float]:
    """Row norms ``sqrt(sum x_i^2)`` computed plainly in ``dtype`` are exact to rounding inside ``(low, high)``.

    Above ``high`` the sum of squares overflows; below ``low`` the squares that underflow (each under the
    smallest normal number) can add up to more than one rounding unit of the sum, over ``width`` terms.
    """
    info = torch.finfo(dtype)
    return math.sqrt(width * info.tiny / info.eps), math.sqrt(info.max) / 2


def power_of_two_scale(magnitude: torch.Tensor) -> torch.Tensor:
    """``2^-e`` with ``magnitude = m 2^e``, ``m`` in [0.5, 1): multiplying by it is exact and brings the largest
    magnitude into [0.5, 1). Zero (or non-finite) magnitudes give 1. Elementwise, on the device (no sync)."""
    _, exponent = torch.frexp(magnitude)
    usable = torch.isfinite(magnitude) & (magnitude > 0)
    return torch.where(usable, torch.ldexp(torch.ones_like(magnitude), -exponent), torch.ones_like(magnitude))


def rescaled_row_norms(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Row norms of a 2-D tensor whatever its magnitudes, as BLAS ``nrm2`` computes them: each row is first scaled
    by the power of two that brings its largest entry into [0.5, 1), so no square overflows or underflows.

    Returns ``(scaled_rows, scaled_norms, scales)``, float64 for float32 and narrower inputs, (n, d), (n, 1), (n, 1):
    the row norm is ``scaled_norms / scales`` and the unit row ``scaled_rows / scaled_norms``. Zero rows have norm
    0 (and scale 1). Differentiable; needs finite input.
    """
    work = t if t.dtype == torch.float64 else t.to(torch.float64)
    scales = power_of_two_scale(work.detach().abs().amax(dim=1, keepdim=True))
    scaled = work * scales
    return scaled, torch.linalg.vector_norm(scaled, dim=1, keepdim=True), scales


_NUMPY_GEMM = os.environ.get("LATENTSTITCH_CPU_GEMM", "numpy").lower() != "torch"
_NUMPY_DTYPES = (torch.float32, torch.float64)


def _quiet() -> np.errstate:
    return np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore")


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` for 2-D tensors, routed to numpy's BLAS on the CPU when no gradient is needed.

    ``out``: a contiguous tensor of the result's shape and dtype to write into (no gradient), e.g. a slice of rows
    of a larger output, which saves allocating and copying the result.
    """
    numpy_path = (
        _NUMPY_GEMM
        and a.device.type == "cpu"
        and b.device.type == "cpu"
        and a.dtype == b.dtype
        and a.dtype in _NUMPY_DTYPES
        and not (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad))
    )
    if out is not None:
        if numpy_path and out.is_contiguous() and out.dtype == a.dtype and out.device.type == "cpu":
            with _quiet():  # NaN/inf are the callers' to report (they check the results), as in torch
                np.matmul(a.numpy(), b.numpy(), out=out.numpy())
        else:
            torch.matmul(a, b, out=out)
        return out
    if numpy_path:
        with _quiet():
            return torch.from_numpy(np.matmul(a.numpy(), b.numpy()))
    return a @ b


def svd(m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Thin SVD ``(u, s, vh)`` of a 2-D tensor, by numpy's LAPACK on the CPU when no gradient is needed (gesdd:
    1.2x faster than torch's here on 768 x 768 float64), else ``torch.linalg.svd``. Where gesdd's divide and conquer
    does not converge on a finite matrix (it happens, rarely, on real cross-covariances: a 1280-d EfficientNet pair
    here), the slower QR-iteration driver (gesvd) computes it instead."""
    if (
        _NUMPY_GEMM
        and m.device.type == "cpu"
        and m.dtype in _NUMPY_DTYPES
        and not (torch.is_grad_enabled() and m.requires_grad)
    ):
        array = m.detach().numpy()
        try:
            return tuple(torch.from_numpy(f) for f in np.linalg.svd(array, full_matrices=False))
        except np.linalg.LinAlgError:
            if not np.isfinite(array).all():
                raise
            return _gesvd(array)
    try:
        return torch.linalg.svd(m, full_matrices=False)
    except torch.linalg.LinAlgError:
        if m.device.type != "cpu" or not bool(torch.isfinite(m).all()) or (torch.is_grad_enabled() and m.requires_grad):
            raise
        return tuple(f.to(m.dtype) for f in _gesvd(m.detach().numpy()))


def _gesvd(array: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Thin SVD by LAPACK's gesvd (QR iteration: slower than gesdd, and converges where it does not)."""
    from scipy.linalg import svd as scipy_svd

    factors = scipy_svd(array, full_matrices=False, lapack_driver="gesvd", check_finite=False)
    return tuple(torch.from_numpy(np.ascontiguousarray(f)) for f in factors)


def lower_median(t: torch.Tensor) -> torch.Tensor:
    """``t.median()``: the lower of the two middle values of all elements (NaN when one is NaN), as a 0-d tensor. On
    the CPU, found by selection (``np.partition``, O(n)) instead of torch's sort: the same element, a quarter of the
    time on a million float64 costs."""
    if t.device.type != "cpu" or t.dtype not in _NUMPY_DTYPES or t.numel() == 0 or t.requires_grad:
        return t.median()
    flat = t.reshape(-1).numpy()
    if np.isnan(flat).any():
        return t.median()
    middle = (flat.size - 1) // 2
    return torch.as_tensor(np.partition(flat, middle)[middle], dtype=t.dtype)


def eigh(m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (ascending) and eigenvectors of a symmetric 2-D tensor; float64 on the CPU by numpy's LAPACK when
    no gradient is needed (1.25x faster than torch's here on 768 x 768; torch's is the faster in float32), else
    ``torch.linalg.eigh``."""
    if (
        _NUMPY_GEMM
        and m.device.type == "cpu"
        and m.dtype == torch.float64
        and not (torch.is_grad_enabled() and m.requires_grad)
    ):
        return tuple(torch.from_numpy(f) for f in np.linalg.eigh(m.detach().numpy()))
    return torch.linalg.eigh(m)


def row_norms(t: torch.Tensor, *, squared: bool = False) -> torch.Tensor:
    """Euclidean norm (or, with ``squared``, its square) of every row of a 2-D tensor, shape (n,): float32 for
    float32 and half-precision rows (summed in float32), float64 for float64. Plain ``sqrt(sum x^2)``: callers that
    need exactness at extreme magnitudes check the range (``latentstitch.relative._similarities``). Differentiable."""
    if t.dtype in (torch.float16, torch.bfloat16):
        norms = torch.linalg.vector_norm(t, dim=1, dtype=torch.float32)
    elif (
        _NUMPY_GEMM
        and t.device.type == "cpu"
        and t.dtype in _NUMPY_DTYPES
        and not (torch.is_grad_enabled() and t.requires_grad)
    ):
        rows = t.detach().numpy()
        with _quiet():
            sums = np.einsum("ij,ij->i", rows, rows)
            return torch.from_numpy(sums if squared else np.sqrt(sums))
    else:
        norms = torch.linalg.vector_norm(t, dim=1)
    return norms.square() if squared else norms


# --- row norms, exact at any magnitude ---------------------------------------------------------------------------
#
# ``sqrt(sum x_i^2)`` overflows when entries reach ~1e19 in float32 (~1e154 in float64) and loses the squares that
# underflow when they are below ~1e-19 (1e-154): a plain norm turns 1e20-sized vectors into zeros and reports
# 1e-30-sized ones as zero vectors. The fast path computes plain norms and a flag saying whether every norm lies in
# the range where that is exact; rows outside it take the careful path, which first scales each row by a power of
# two (as BLAS nrm2 does). Inside ``relative_projection`` the flag is handed over (``report_flag``) instead of being
# read, so no chunk waits for the device; the projection reads the flags once and redoes the failing chunks.


def plain_norms_exact(norms: torch.Tensor, width: int, eps: float | None) -> torch.Tensor:
    """Whether plain ``norms`` (computed in their own dtype over ``width`` terms) are all exact, finite and nonzero
    (or, with ``eps``, exact or certainly below ``eps``)."""
    low, high = safe_norm_range(norms.dtype, width)
    below = norms < high  # false for NaN and inf
    if eps is not None and eps >= low:
        return below.all()  # a norm under low is under eps: it is clamped to eps whatever its rounding
    return (below & (norms > low)).all()


def fast_row_norms(t: torch.Tensor, eps: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Fast path: ``max(|t_i|, eps)`` as an (n, 1) column in float32 (float64 for float64 data), and the 0-d
    validity flag of ``plain_norms_exact``. Half-precision rows are summed in float32. Callers divide by the norms (one
    rounding, where multiplying by reciprocals would make two)."""
    norms = row_norms(t)
    flag = plain_norms_exact(norms, t.shape[1], eps)
    if eps is not None:
        norms = norms.clamp_min(eps)
    return norms.unsqueeze(1), flag


def unit_rows(t: torch.Tensor, name: str, eps: float | None = None) -> torch.Tensor:
    """``t_i / |t_i|`` for every row (``t_i / max(|t_i|, eps)`` with ``eps``), in ``t``'s dtype, differentiable.

    Exact at any magnitude (rows are rescaled by a power of two first when their norm would overflow or underflow).
    A zero row raises ``ZeroNormError`` naming ``name`` and the row, unless ``eps`` is given.
    """
    if t.shape[0] == 0:
        return t
    norms, flag = fast_row_norms(t, eps)
    if bool(flag):
        return (t / norms).to(t.dtype)
    scaled, norms, scales = rescaled_row_norms(t)
    if eps is None:
        raise_on_zero_row(norms, name)
        return (scaled / norms).to(t.dtype)
    return (scaled / torch.maximum(norms, eps * scales)).to(t.dtype)  # max(|t_i|, eps), in scaled units


def safe_row_norms(t: torch.Tensor, name: str, eps: float | None) -> torch.Tensor:
    """``|t_i|`` as an (n, 1) column (clamped to ``eps`` when given; a zero row raises ``ZeroNormError`` otherwise),
    exact at any magnitude the result can represent. With ``eps`` on an accelerator nothing waits for the device:
    every row is scaled by a power of two before squaring (a few more elementwise passes instead of a sync)."""
    if eps is not None and not reading_is_free(t.device) and t.shape[0]:
        scales = power_of_two_scale(t.detach().abs().amax(dim=1, keepdim=True))
        norms = torch.linalg.vector_norm(
            t * scales, dim=1, keepdim=True, dtype=torch.promote_types(t.dtype, torch.float32)
        )
        return (norms / scales).clamp_min(eps).to(t.dtype)
    norms, flag = fast_row_norms(t, eps)
    if t.shape[0] == 0 or bool(flag):
        return norms.to(t.dtype)
    _, norms, scales = rescaled_row_norms(t)
    if eps is None:
        raise_on_zero_row(norms, name)
    true = norms / scales
    return (true if eps is None else true.clamp_min(eps)).to(t.dtype)


def raise_on_zero_row(norms: torch.Tensor, name: str) -> None:
    zero = norms[:, 0] == 0
    if bool(zero.any()):
        raise ZeroNormError(name, int(zero.nonzero()[0, 0]))


def percentile_bootstrap_mean(
    values: np.ndarray, rng: np.random.Generator, draws: int, level: float
) -> tuple[float, float]:
    """Percentile-bootstrap interval at ``level`` of the mean of 1-D ``values`` (at least one), from ``draws``
    resamples of them with replacement."""
    means = values[rng.integers(0, len(values), size=(draws, len(values)))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)
