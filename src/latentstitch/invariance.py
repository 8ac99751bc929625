"""The vocabulary of transformations that latent spaces are compared under, and random instances of each.

Every similarity function (relative representations) and every similarity index (``latentstitch.similarity``)
states which of these transformations it is invariant to, using the names below. A transformation acts on rows:
``x -> x @ matrix + shift``, applied identically to every representation it is meant to act on (samples and
anchors alike). ``random_transform`` draws one, so users and tests can check an invariance on their own data.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike, as_float_tensor, wrap_like
from latentstitch._core.params import check_choice, check_positive_int, check_seed

ORTHOGONAL = "orthogonal"
"""Rotations and reflections: ``x -> x Q`` with ``Q^T Q = I``."""
ISOTROPIC_SCALE = "isotropic_scale"
"""Multiplication by one positive number."""
TRANSLATION = "translation"
"""A constant shift added to every vector: ``x -> x + b``."""
PERMUTATION = "permutation"
"""A reordering of the coordinates (neurons)."""
AXIS_SCALE = "axis_scale"
"""A different positive factor per coordinate: ``x -> x D``, D positive diagonal."""
AXIS_REFLECTION = "axis_reflection"
"""Sign flips of individual coordinates: ``x -> x S``, S diagonal with entries +-1."""
INVERTIBLE_LINEAR = "invertible_linear"
"""Any invertible linear map ``x -> x M``."""

ALL = (ORTHOGONAL, ISOTROPIC_SCALE, TRANSLATION, PERMUTATION, AXIS_SCALE, AXIS_REFLECTION, INVERTIBLE_LINEAR)

# Each kind's special cases: a permutation or a sign flip is an orthogonal map, every linear kind is an invertible
# linear map, an isotropic scale is an axis scale with equal factors.
_SPECIAL_CASES = {
    INVERTIBLE_LINEAR: (ORTHOGONAL, ISOTROPIC_SCALE, AXIS_SCALE, PERMUTATION, AXIS_REFLECTION),
    ORTHOGONAL: (PERMUTATION, AXIS_REFLECTION),
    AXIS_SCALE: (ISOTROPIC_SCALE,),
}


def closure(kinds: Iterable[str]) -> frozenset[str]:
    """The kinds plus all their special cases: invariance to orthogonal maps implies invariance to
    permutations and sign flips, and so on. Claimed invariances are stored closed, so a query such as
    ``PERMUTATION in spec.invariances`` answers correctly."""
    out: set[str] = set()
    pending = list(kinds)
    while pending:
        kind = check_choice(pending.pop(), "invariance", ALL)
        if kind not in out:
            out.add(kind)
            pending.extend(_SPECIAL_CASES.get(kind, ()))
    return frozenset(out)


@dataclass(frozen=True)
class Transform:
    """An affine map acting on rows, ``x -> x @ matrix + shift``."""

    kind: str
    matrix: np.ndarray
    shift: np.ndarray

    def __call__(self, x: ArrayLike) -> ArrayLike:
        t = as_float_tensor(x, "x", ndim=2)
        if t.shape[1] != self.matrix.shape[0]:
            raise ValueError(
                f"x: has {t.shape[1]} features but this {self.kind} transform acts on {self.matrix.shape[0]}"
            )
        m = torch.as_tensor(self.matrix, dtype=t.dtype, device=t.device)
        b = torch.as_tensor(self.shift, dtype=t.dtype, device=t.device)
        return wrap_like(t @ m + b, x)


def random_transform(kind: str, dim: int, seed: int | np.random.Generator = 0) -> Transform:
    """Draw a random, well-conditioned instance of a transformation of the given kind on ``dim`` coordinates.

    Scales are drawn log-uniformly in [0.2, 5]; invertible linear maps have singular values in [0.5, 2].
    """
    check_choice(kind, "kind", ALL)
    dim = check_positive_int(dim, "dim")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(check_seed(seed))
    eye = np.eye(dim)
    shift = np.zeros(dim)
    if kind == ORTHOGONAL:
        matrix = _random_orthogonal(dim, rng)
    elif kind == ISOTROPIC_SCALE:
        matrix = eye * np.exp(rng.uniform(np.log(0.2), np.log(5.0)))
    elif kind == TRANSLATION:
        matrix = eye
        shift = rng.normal(scale=3.0, size=dim)
    elif kind == PERMUTATION:
        matrix = eye[rng.permutation(dim)]
    elif kind == AXIS_SCALE:
        matrix = np.diag(np.exp(rng.uniform(np.log(0.2), np.log(5.0), size=dim)))
    elif kind == AXIS_REFLECTION:
        matrix = np.diag(rng.choice([-1.0, 1.0], size=dim))
    else:  # INVERTIBLE_LINEAR
        singular = rng.uniform(0.5, 2.0, size=dim)
        matrix = _random_orthogonal(dim, rng) @ np.diag(singular) @ _random_orthogonal(dim, rng)
    return Transform(kind, matrix, shift)


def _random_orthogonal(dim: int, rng: np.random.Generator) -> np.ndarray:
    # QR of a Gaussian matrix with the signs of R's diagonal fixed is Haar-distributed (Mezzadri 2007).
    q, r = np.linalg.qr(rng.normal(size=(dim, dim)))
    return q * np.sign(np.diag(r))
