"""One fold of the bridge's cross-validation, with the decompositions every linear route shares.

Per fold and per scaling (raw vectors, or each side standard-scaled with the training rows' statistics as
``LatentTranslator`` does), the centred training source is decomposed once, ``Xc = U diag(sqrt(e)) V^T`` (from the
eigendecomposition of the smaller of ``Xc^T Xc`` and ``Xc Xc^T``), and ``A = V^T Xc^T Yc`` is formed once. Then

- ridge at every penalty r (fractions of the mean eigenvalue, ``ridge_units="relative"``) costs one diagonal scale:
  ``pred(r) = Xq V diag(1 / (e + r trace / p)) A + mean_y`` (the ridge path, no inner cross-validation);
- Procrustes is the polar factor of ``Xc^T Yc = V A``, i.e. of the small matrix ``A``: ``W = V P Q^T`` from
  ``A = P S Q^T``;
- reduced rank (rank k, light ridge) keeps the top k right singular vectors of the fitted values
  ``diag(sqrt(e) / (e + r)) A``: every rank from one decomposition.

Each returns the bridged held-out queries in the target's units, exactly what the route's estimator fitted on the
fold's training rows returns (``tests/bridge/test_bridge_fast_paths.py``). Where Procrustes' map is not unique (no
more training anchors than features), the polar factor of ``A`` is the minimum-norm optimum, which maps the directions
no anchor spans to zero: the bridge's Procrustes routes fit exactly that (``Procrustes(unspanned="zero")``). An
arbitrary orthogonal completion (the estimator's default) scored far worse on a real pair (a head's agreement 0.13 vs
0.34 at 100 anchors for 512 features): a new point's unspanned component lands in arbitrary target directions.

Precision: the moments and decompositions run in the data's own precision (float32 embeddings: float32, about twice
as fast; float64 data: float64), within float32 rounding of the estimator for float32 data. The one exception is
Procrustes' polar factor, always float64: it comes from the eigendecomposition of ``A A^T``, whose squared spread
float32 resolves only down to about 1e-3 of the largest singular value, and an orthogonal map must keep the weak
directions as exactly as the strong ones (it is applied to the queries without forming ``Q^T``; on the CPU
numpy's LAPACK and BLAS run it, ``_core.numerics.eigh`` and ``matmul``).

Relative routes read the all-anchor products of ``_relative_folds``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from latentstitch._core.numerics import eigh, matmul
from latentstitch.relative import SPREAD_FLOOR, floored_spread

#: Ridge penalties tried on the ridge path, in relative units (fractions of the mean eigenvalue of the training
#: Gram matrix): a decade apart.
RIDGES = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
#: Ranks tried by the low-rank route (those below min(p, q, training anchors), and that minimum itself when it is not
#: above the largest), and its light ridge.
RANKS = (4, 8, 16, 32, 64, 128, 256)
LOW_RANK_RIDGE = 1e-3

Candidate = tuple[dict[str, Any], torch.Tensor]  # (route parameters, bridged queries or similarity rows)


@dataclass
class Basis:
    mean_x: torch.Tensor
    scale_x: torch.Tensor
    mean_y: torch.Tensor
    scale_y: torch.Tensor
    eigenvalues: torch.Tensor | None  # (m,); None in a frame without decomposition
    a: torch.Tensor  # (m, q): V^T Xc^T Yc (target centred, not scaled)
    queries: torch.Tensor  # (n_q, m): scaled, centred queries in the basis V
    trace: float
    features: int
    trace_y: float  # the target's centred sum of squares over the training rows
    polar: dict[bool, Any] = field(default_factory=dict)  # Polar per target scaling


@dataclass
class PartMoments:
    """Per fold of the anchors (a *part*), sums and second moments about the all-anchor means (float64): a training
    set's Gram and cross products are the sum over its parts, so the products cost one pass over the anchors in all,
    not one per fold."""

    source: torch.Tensor
    target: torch.Tensor
    parts: list[np.ndarray]

    def __post_init__(self) -> None:
        self.shift_x, self.shift_y = self.source.mean(dim=0), self.target.mean(dim=0)
        self.stats = []
        for rows in self.parts:
            index = torch.as_tensor(rows, device=self.source.device)
            x, y = self.source[index] - self.shift_x, self.target[index] - self.shift_y
            self.stats.append((len(rows), x.sum(0), y.sum(0), matmul(x.T, x), matmul(x.T, y), y.pow(2).sum(0)))

    def training(self, k: int) -> tuple[torch.Tensor, ...]:
        """Mean of x and y, centred Gram of x, centred cross product, per-feature sum of squares of centred y."""
        rest = [st for j, st in enumerate(self.stats) if j != k]
        n = sum(st[0] for st in rest)
        sx, sy, xx, xy, yy = (sum(st[i] for st in rest) for i in range(1, 6))
        mx, my = sx / n, sy / n
        return (
            mx + self.shift_x,
            my + self.shift_y,
            xx - n * torch.outer(mx, mx),
            xy - n * torch.outer(mx, my),
            (yy - n * my**2),
        )


@dataclass
class Fold:
    """One fold: the training rows, the scored held-out rows (``queries``), the data in float64, the fit's relative
    cache and, for a fold of the plain k-fold split (``part`` = k), the anchors' part moments."""

    source: torch.Tensor
    target: torch.Tensor
    train: np.ndarray
    queries: np.ndarray
    relative: Any  # RelativeCache of the fit
    moments: PartMoments | None = None
    part: int | None = None
    _bases: dict[Any, Basis] = field(default_factory=dict)

    def basis(self, standardize: bool) -> Basis:
        """The eigendecomposition basis (ridge path, low rank)."""
        if standardize not in self._bases:
            self._bases[standardize] = _basis(self, standardize)
        return self._bases[standardize]

    def frame(self, standardize: bool) -> Basis:
        """Coordinates where ``a`` is the centred cross product ``Xc^T Yc`` (Procrustes): the basis when there are
        fewer anchors than features, else the features themselves (no decomposition needed)."""
        if standardize in self._bases or len(self.train) < self.source.shape[1]:
            return self.basis(standardize)
        key = ("frame", standardize)
        if key not in self._bases:
            self._bases[key] = _basis(self, standardize, decompose=False)
        return self._bases[key]


def _scales(variance: torch.Tensor, standardize: bool) -> torch.Tensor:
    return floored_spread(variance.clamp(min=0).sqrt(), SPREAD_FLOOR) if standardize else torch.ones_like(variance)


def _basis(fold: Fold, standardize: bool, decompose: bool = True) -> Basis:
    n, p = len(fold.train), fold.source.shape[1]
    if fold.moments is not None and fold.part is not None and n >= p:
        mean_x, mean_y, xx, xy, yy = fold.moments.training(fold.part)
        scale_x, scale_y = _scales(xx.diagonal() / n, standardize), _scales(yy / n, standardize)
        trace, trace_y = float((xx.diagonal() / scale_x**2).sum()), float(yy.sum())
        if not decompose:
            queries = (fold.source[torch.as_tensor(fold.queries, device=xx.device)] - mean_x) / scale_x
            a = xy / scale_x[:, None]
            return Basis(mean_x, scale_x, mean_y, scale_y, None, a, queries, trace, p, trace_y)
        e, v = torch.linalg.eigh(xx / torch.outer(scale_x, scale_x))
        e = e.clamp(min=0)
        a = v.T @ (xy / scale_x[:, None])
    else:
        index = torch.as_tensor(fold.train, device=fold.source.device)
        x, y = fold.source[index], fold.target[index]
        mean_x, mean_y = x.mean(dim=0), y.mean(dim=0)
        xc, yc = x - mean_x, y - mean_y
        scale_x, scale_y = _scales(xc.pow(2).mean(dim=0), standardize), _scales(yc.pow(2).mean(dim=0), standardize)
        xc = xc / scale_x
        trace, trace_y = float(xc.pow(2).sum()), float(yc.pow(2).sum())
        if n >= p:
            e, v = torch.linalg.eigh(matmul(xc.T, xc))
            e = e.clamp(min=0)
            a = v.T @ matmul(xc.T, yc)
        else:  # fewer rows than features: the n x n kernel, V = Xc^T U / sqrt(e) on its non-null directions
            e, u = torch.linalg.eigh(matmul(xc, xc.T))
            keep = e > n * torch.finfo(e.dtype).eps * max(float(e.max()), 0.0)
            e, u = e[keep], u[:, keep]
            a = e.sqrt()[:, None] * (u.T @ yc)
            # the queries in the basis V = Xc^T U / sqrt(e), without forming V (p x n)
            z = (fold.source[torch.as_tensor(fold.queries, device=xc.device)] - mean_x) / scale_x
            return Basis(mean_x, scale_x, mean_y, scale_y, e, a, ((z @ xc.T) @ u) / e.sqrt(), trace, p, trace_y)
    queries = ((fold.source[torch.as_tensor(fold.queries, device=v.device)] - mean_x) / scale_x) @ v
    return Basis(mean_x, scale_x, mean_y, scale_y, e, a, queries, trace, p, trace_y)


def ridge_candidates(fold: Fold, standardize: bool, ridges=RIDGES) -> list[Candidate]:
    """Ridge least squares at every penalty (``LeastSquares(ridge=r, ridge_units="relative")``, standard-scaled
    sides like ``LatentTranslator`` with ``standardize``)."""
    b = fold.basis(standardize)
    out = []
    for r in ridges:
        penalty = r * b.trace / b.features
        weights = 1.0 / (b.eigenvalues + penalty)
        out.append(({"ridge": float(r)}, (b.queries * weights) @ b.a + b.mean_y))
    return out


def thin_svd(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``P``, singular values, ``Q^T`` of a small matrix ``a`` (m, q) without its null directions, from the
    eigendecomposition of the smaller of ``a a^T`` and ``a^T a``."""
    m, q = a.shape
    gram = matmul(a, a.T) if m <= q else matmul(a.T, a)
    s2, vectors = eigh(gram)
    s2, vectors = s2.flip(0), vectors.flip(1)
    keep = s2 > max(m, q) * torch.finfo(s2.dtype).eps * max(float(s2.max()), 0.0)
    s = s2[keep].sqrt()
    if m <= q:
        p = vectors[:, keep]
        return p, s, (p.T @ a) / s[:, None]
    qt = vectors[:, keep].T
    return (a @ qt.T) / s, s, qt


def top_right_vectors(a: torch.Tensor, k: int, iterations: int = 3, oversample: int = 16) -> torch.Tensor:
    """(k, q) top right singular vectors of ``a`` (m, q) by seeded randomised subspace iteration (exact when
    ``k + oversample`` reaches min(m, q))."""
    width = min(k + oversample, *a.shape)
    if width == min(a.shape):
        return thin_svd(a)[2][:k]
    generator = torch.Generator(device=a.device).manual_seed(0)
    basis = torch.randn(a.shape[1], width, generator=generator, device=a.device, dtype=a.dtype)
    for _ in range(iterations):
        basis = torch.linalg.qr(a.T @ (a @ basis)).Q
    _, _, qt = thin_svd(a @ basis)
    return (qt @ basis.T)[:k]


@dataclass
class Polar:
    """The polar factor ``W = P Q^T`` of a small cross product ``a`` (m, q) = ``P diag(s) Q^T``, kept as the
    eigenvectors of the smaller of ``a a^T`` and ``a^T a`` (float64 whatever the data's precision: float32 would cut
    their squared spread off near 1e-3 of the largest singular value, dropping the weak directions an orthogonal map
    must keep). ``W`` itself is never formed: ``apply`` maps a few query rows through it, ``z W = z P diag(1/s) P^T
    a`` (or ``z a Q diag(1/s) Q^T``), which is cheaper than the m x m x q product that forms ``Q^T``."""

    a: torch.Tensor  # float64
    vectors: torch.Tensor  # P (m <= q) or Q (m > q), without the null directions
    s: torch.Tensor
    left: bool

    @classmethod
    def of(cls, a: torch.Tensor) -> Polar:
        a = a.to(torch.float64)
        m, q = a.shape
        left = m <= q
        s2, vectors = eigh(matmul(a, a.T) if left else matmul(a.T, a))
        keep = s2 > max(m, q) * torch.finfo(s2.dtype).eps * max(float(s2.max()), 0.0)
        return cls(a, vectors[:, keep], s2[keep].sqrt(), left)

    def apply(self, z: torch.Tensor) -> torch.Tensor:
        """``z @ W`` (n, q) for rows ``z`` (n, m), in ``z``'s precision."""
        z64, v = z.to(torch.float64).contiguous(), self.vectors
        if self.left:
            out = matmul(matmul(matmul(z64, v) / self.s, v.T), self.a)
        else:
            out = matmul(matmul(matmul(z64, self.a), v) / self.s, v.T)
        return out.to(z.dtype)


def _polar(b: Basis, scaled_target: bool) -> Polar:
    if scaled_target not in b.polar:
        b.polar[scaled_target] = Polar.of(b.a / b.scale_y if scaled_target else b.a)
    return b.polar[scaled_target]


def procrustes_candidates(fold: Fold, scaled: bool | str) -> list[Candidate]:
    """``scaled=False``: ``LatentTranslator(Procrustes())`` (standard-scaled sides, orthogonal map);
    ``scaled=True``: ``Procrustes(center=True, scale=True)`` on the raw vectors; ``scaled="norm"``: the same with
    ``scale="norm"`` (the same polar factor, the target's spread kept); all ``unspanned="zero"``."""
    b = fold.frame(not scaled)
    polar = _polar(b, scaled_target=not scaled)
    rotated = polar.apply(b.queries)
    if scaled == "norm":
        return [({}, rotated * (b.trace_y / b.trace) ** 0.5 + b.mean_y)]
    if scaled:
        return [({}, rotated * (float(polar.s.sum()) / b.trace) + b.mean_y)]
    return [({}, rotated * b.scale_y + b.mean_y)]


def low_rank_candidates(fold: Fold, ranks=RANKS, ridge: float = LOW_RANK_RIDGE) -> list[Candidate]:
    """``ReducedRank(rank=k, ridge=ridge, ridge_units="relative")`` on the raw vectors, for every usable rank."""
    b = fold.basis(False)
    weights = 1.0 / (b.eigenvalues + ridge * b.trace / b.features)
    fitted = (b.eigenvalues.sqrt() * weights)[:, None] * b.a  # its Gram is the fitted values' Gram
    limit = min(fitted.shape[0], b.features, b.a.shape[1])
    usable = [k for k in ranks if k < limit] + ([limit] if limit <= max(ranks) else [])
    qt = top_right_vectors(fitted, max(usable))
    full = (b.queries * weights) @ b.a  # (n_q, q) before truncation
    projected = full @ qt.T  # coordinates on the components, by decreasing singular value
    return [({"rank": int(k)}, projected[:, :k] @ qt[:k] + b.mean_y) for k in usable]
