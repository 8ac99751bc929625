"""Small pieces every alignment method shares: input checks, unit rows, orthogonal maps, neighbour means."""

from __future__ import annotations

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike, as_float_tensor, to_numpy
from latentstitch._core.knn import top_k
from latentstitch._core.numerics import matmul, svd, unit_rows
from latentstitch._core.params import check_seed

__all__ = ["as_pairs", "mean_of_neighbours", "orthogonal_factor", "space", "unit_rows"]


def space(x: ArrayLike, name: str, *, min_rows: int = 2) -> torch.Tensor:
    """A checked (n, d) embedding table (numpy or torch), viewed as a tensor."""
    return as_float_tensor(x, name, ndim=2, min_rows=min_rows)


def check_rotation_shape(fitted) -> None:
    """A loaded map's ``rotation_`` is ``(n_features_in_, n_features_out_)``, or a ``ValueError`` says what it is."""
    if tuple(fitted.rotation_.shape) != (fitted.n_features_in_, fitted.n_features_out_):
        raise ValueError(
            f"rotation_ has shape {tuple(fitted.rotation_.shape)} but the map is "
            f"{fitted.n_features_in_} -> {fitted.n_features_out_}"
        )


def orthogonal_factor(cross: torch.Tensor) -> torch.Tensor:
    """The orthogonal map R (p, q) maximising ``trace(R^T cross)``: ``U V^T`` from the thin SVD ``cross = U S V^T``.

    Orthonormal rows when p <= q, orthonormal columns when p > q: the Procrustes solution of two zero-padded
    spaces (``latentstitch.stitching.Procrustes`` computes the same from streamed statistics).
    """
    u, _, vh = svd(cross)
    return matmul(u, vh)


def orthogonal_on_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The orthogonal factor of ``a.T @ b`` for (m, p) and (m, q) rows; with fewer rows than widths, through the
    (m, m) core of the two row spaces' QR factors (exact on the span of a's rows, which is all a ranking needs,
    at O(m^2 (p + q)) instead of an SVD of (p, q))."""
    m = a.shape[0]
    if m >= min(a.shape[1], b.shape[1]):
        return orthogonal_factor(matmul(a.T, b))
    basis_a, upper_a = torch.linalg.qr(a.T)
    basis_b, upper_b = torch.linalg.qr(b.T)
    return matmul(matmul(basis_a, orthogonal_factor(matmul(upper_a, upper_b.T))), basis_b.T)


def random_orthogonal(p: int, q: int, rng: np.random.Generator, like: torch.Tensor) -> torch.Tensor:
    """A Haar-random (p, q) map with orthonormal rows or columns (QR of a Gaussian, signs fixed by R's diagonal)."""
    gaussian = torch.as_tensor(rng.standard_normal((max(p, q), min(p, q))), dtype=like.dtype, device=like.device)
    factor, upper = torch.linalg.qr(gaussian)
    factor = factor * torch.sign(torch.diagonal(upper))[None]
    return factor if p >= q else factor.T


def mean_of_neighbours(
    queries: torch.Tensor, index: torch.Tensor, k: int, values: torch.Tensor | None = None
) -> torch.Tensor:
    """For each query row, the mean over its ``k`` most similar index rows (inner product; pass unit rows for
    cosine) of ``values`` (default: the index rows themselves). Chunked: memory O(chunk x n_index)."""
    neighbours = top_k(queries, index, min(k, index.shape[0]))
    table = index if values is None else values
    return torch.nn.functional.embedding_bag(neighbours, table, mode="mean")  # no (queries, k, d) gather


def as_pairs(pairs: object, name: str, n_source: int, n_target: int) -> np.ndarray:
    """Index pairs ``(i_source, i_target)`` as an (m, 2) int64 array, checked against both tables' sizes."""
    if isinstance(pairs, torch.Tensor):
        pairs = to_numpy(pairs, name)
    array = np.asarray(pairs)
    if array.ndim != 2 or array.shape[1] != 2 or array.shape[0] < 1:
        raise ValueError(f"{name}: expected (m, 2) index pairs (source row, target row), got shape {array.shape}")
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected integer row indices, got dtype {array.dtype}")
    for column, (side, size) in enumerate((("source", n_source), ("target", n_target))):
        bad = (array[:, column] < 0) | (array[:, column] >= size)
        if bad.any():
            raise ValueError(
                f"{name}: {side} index {int(array[bad.argmax(), column])} is out of range for {size} {side} rows"
            )
    return array.astype(np.int64)


def check_fraction(value: object, name: str) -> float:
    """A number in (0, 1]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a number in (0, 1], got {type(value).__name__}")
    if not (np.isfinite(value) and 0 < value <= 1):
        raise ValueError(f"{name}: expected a number in (0, 1], got {value}")
    return float(value)


def check_positive(value: object, name: str) -> float:
    """A finite real number > 0."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a number > 0, got {type(value).__name__}")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name}: expected a finite number > 0, got {value}")
    return float(value)


def seeded(seed: object) -> int:
    """A seed (``random_state``): an integer in [0, 2**32 - 1]."""
    return check_seed(seed, "random_state")


def gram_agreement(a: torch.Tensor, b: torch.Tensor) -> float:
    """Pearson correlation of the off-diagonal entries of the cosine Gram matrices of two row-aligned tables.

    1 when the two tables agree on every angle between their rows (the assumption of relative representations),
    near 0 when their rows are unrelated. Needs at least 3 rows.
    """
    ua, ub = unit_rows(a.double(), "a"), unit_rows(b.double(), "b")
    ga, gb = matmul(ua, ua.T), matmul(ub, ub.T)
    mask = ~torch.eye(ga.shape[0], dtype=torch.bool, device=ga.device)
    va, vb = ga[mask], gb[mask]
    va, vb = va - va.mean(), vb - vb.mean()
    denominator = torch.linalg.vector_norm(va) * torch.linalg.vector_norm(vb)
    return float((va @ vb) / denominator) if denominator > 0 else 0.0
