"""The registry of similarity functions used by relative representations.

A similarity function compares a chunk of samples ``x`` (n, d) with the anchors (m, d) and returns an (n, m)
matrix. Registering one is one decorated function::

    @register_similarity("my_sim", kind="similarity", value_range=(-1, 1), invariances={ORTHOGONAL})
    def my_sim(x, anchors):
        return ...

An optional ``prepare`` function turns the anchors into whatever the function needs once per call (normalised
anchors, a pseudo-inverse), so work on the anchors is not repeated for every chunk of samples.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from latentstitch._core.device import report_flag
from latentstitch._core.numerics import fast_row_norms, matmul, power_of_two_scale, unit_rows
from latentstitch._core.params import check_bool, check_kwargs, check_positive
from latentstitch.invariance import (
    AXIS_REFLECTION,
    INVERTIBLE_LINEAR,
    ISOTROPIC_SCALE,
    ORTHOGONAL,
    PERMUTATION,
    TRANSLATION,
    closure,
)


@dataclass(frozen=True)
class SimilaritySpec:
    """A registered similarity function and its documented properties.

    kind: ``"similarity"`` (larger = closer), ``"distance"`` (larger = farther) or ``"coordinates"``.
    value_range: the closed range of the outputs.
    invariances: transformations (``latentstitch.invariance`` names) that, applied to both samples and anchors,
        leave the output unchanged; stored with their special cases (``invariance.closure``).
    """

    name: str
    function: Callable[..., torch.Tensor]
    prepare: Callable[..., Any]
    kind: str
    value_range: tuple[float, float]
    invariances: frozenset[str] = field(default_factory=frozenset)
    writes_out: bool = False  # the function takes ``out=``: a preallocated (n, m) tensor to write into

    @property
    def doc(self) -> str:
        return (self.function.__doc__ or "").strip()

    @property
    def option_names(self) -> tuple[str, ...]:
        """The keyword options the function takes (besides the samples, the anchors and ``out``)."""
        parameters = list(inspect.signature(self.function).parameters)
        return tuple(name for name in parameters[2:] if name != "out")

    def check_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """Refuse options this similarity does not take, and invalid values of those it does, naming them."""
        check_kwargs(options, self.option_names, f"the {self.name!r} similarity")
        for name, value in options.items():
            check = OPTION_CHECKS.get(name)
            if check is not None:
                check(value, name)
        return options


SIMILARITIES: dict[str, SimilaritySpec] = {}


def _optional_positive(value: Any, name: str) -> None:
    if value is not None:
        check_positive(value, name)


#: Validators of the options similarity functions share (a new option with its own range adds an entry here).
OPTION_CHECKS: dict[str, Callable[[Any, str], Any]] = {"eps": _optional_positive, "scaled": check_bool}


def _identity_prepare(anchors: torch.Tensor, **_: Any) -> torch.Tensor:
    return anchors


def register_similarity(
    name: str,
    *,
    kind: str = "similarity",
    value_range: tuple[float, float],
    invariances: Iterable[str] = (),
    prepare: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., torch.Tensor]], Callable[..., torch.Tensor]]:
    """Decorator adding a similarity function ``f(x, anchors, **options) -> (n, m)`` to the registry under ``name``.

    A function that also takes ``out=`` (a preallocated (n, m) tensor, a slice of rows of the final output) and
    writes its result there lets ``relative_projection`` skip a copy per chunk; ``cosine`` does.
    """
    if kind not in ("similarity", "distance", "coordinates"):
        raise ValueError(f"kind: expected 'similarity', 'distance' or 'coordinates', got {kind!r}")

    def decorate(function: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        if name in SIMILARITIES:
            raise ValueError(f"a similarity named {name!r} is already registered")
        writes_out = "out" in inspect.signature(function).parameters
        SIMILARITIES[name] = SimilaritySpec(
            name, function, prepare or _identity_prepare, kind, value_range, closure(invariances), writes_out
        )
        return function

    return decorate


def get_similarity(name: str) -> SimilaritySpec:
    try:
        return SIMILARITIES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"similarity: unknown similarity {name!r}; registered: {', '.join(sorted(SIMILARITIES))}"
        ) from None


def _normalized_anchors(anchors: torch.Tensor, eps: float | None = None) -> torch.Tensor:
    return unit_rows(anchors, "anchors", eps)


@register_similarity(
    "cosine",
    value_range=(-1.0, 1.0),
    invariances={ORTHOGONAL, ISOTROPIC_SCALE},
    prepare=_normalized_anchors,
)
def cosine(
    x: torch.Tensor, anchors: torch.Tensor, eps: float | None = None, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Cosine similarity ``<x, a> / (|x| |a|)``, in [-1, 1]: the relative representation of Moschella et al.

    Invariant to rotations, reflections and isotropic rescaling applied to samples and anchors together; with
    ``center=True`` also to translations. Zero vectors raise an error unless ``eps`` is given, in which case
    norms are clamped to at least ``eps`` (a zero vector then has similarity 0 to every anchor). Exact at any
    magnitude: vectors of 1e-30 or 1e20 (float32) are compared as well as unit ones.

    Precision: float32 and float64 are computed in their own precision. bfloat16 inputs are multiplied natively
    (on a GPU the matrix product accumulates in float32) and each row is then divided by its norm, computed in
    float32; float16 rows are normalised in float32 before the product, so that no intermediate exceeds float16's
    range.
    """
    norms, flag = fast_row_norms(x, eps)
    if not report_flag(flag) and not bool(flag):
        # Some norm is outside the range plain arithmetic is exact in, or zero: the careful path.
        return _clamped(matmul(unit_rows(x, "x", eps), anchors.T, out=out))
    if x.dtype == torch.float16:
        # Normalise first, in float32: products of raw float16 rows can exceed 65504.
        return _clamped(matmul((x / norms).to(x.dtype), anchors.T, out=out))
    if x.dtype == torch.bfloat16 or anchors.shape[0] <= x.shape[1]:
        # Divide the (n, m) output rather than the (n, d) input: no normalised copy of x, and for bfloat16 a
        # single rounding of the float32 accumulation, then one of the division.
        out = matmul(x, anchors.T, out=out)
        out = out / norms if out.requires_grad else out.div_(norms)
        return _clamped(out)
    return _clamped(matmul(x / norms, anchors.T, out=out))


def _clamped(out: torch.Tensor) -> torch.Tensor:
    # Rounding can put |cos| a few ulps above 1; clamp so downstream arccos/log never see NaN.
    return out.clamp(-1.0, 1.0) if out.requires_grad else out.clamp_(-1.0, 1.0)


@register_similarity(
    "angular",
    value_range=(0.0, 1.0),
    invariances={ORTHOGONAL, ISOTROPIC_SCALE},
    prepare=_normalized_anchors,
)
def angular(x: torch.Tensor, anchors: torch.Tensor, eps: float | None = None) -> torch.Tensor:
    """Angular similarity ``1 - arccos(cos(x, a)) / pi``, in [0, 1] (1 = same direction, 0 = opposite).

    Same invariances as cosine. The cosine is clamped to +-(1 - machine epsilon) before ``arccos``, so the
    gradient stays finite for (anti)parallel vectors, where the true derivative of ``arccos`` is infinite.
    """
    cos = cosine(x, anchors, eps)
    limit = 1.0 - torch.finfo(cos.dtype).eps
    return 1.0 - torch.arccos(cos.clamp(-limit, limit)) / math.pi


@register_similarity("dot", value_range=(-math.inf, math.inf), invariances={ORTHOGONAL})
def dot(x: torch.Tensor, anchors: torch.Tensor, scaled: bool = False) -> torch.Tensor:
    """Inner product ``<x, a>``, or ``<x, a> / sqrt(d)`` with ``scaled=True`` (attention-style scaling).

    Invariant to orthogonal maps only: rescaling changes it quadratically.
    """
    out = matmul(x, anchors.T)
    return out / math.sqrt(x.shape[1]) if scaled else out


@register_similarity(
    "euclidean",
    kind="distance",
    value_range=(0.0, math.inf),
    invariances={ORTHOGONAL, TRANSLATION},
)
def euclidean(x: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """Euclidean distance ``|x - a|_2`` (a distance: larger means farther), in [0, inf).

    Invariant to rigid motions (rotations, reflections, translations); not to rescaling.
    """
    if x.numel() == 0:
        return x.new_zeros((x.shape[0], anchors.shape[0]))
    # Scale both sides by the power of two that brings the largest coordinate into [0.5, 1): squared differences
    # then neither overflow (1e20-sized float32 points) nor underflow (1e-30-sized ones). Exact, and no sync.
    low_x, high_x = torch.aminmax(x.detach())
    low_a, high_a = torch.aminmax(anchors.detach())
    scale = power_of_two_scale(torch.stack([-low_x, high_x, -low_a, high_a]).amax())
    # compute_mode: the exact difference-based path, not the |x|^2 + |a|^2 - 2<x, a> shortcut, which loses
    # all precision for nearby points in float32.
    return _half_safe(torch.cdist, x * scale, anchors * scale, compute_mode="donot_use_mm_for_euclid_dist") / scale


@register_similarity(
    "l1",
    kind="distance",
    value_range=(0.0, math.inf),
    invariances={TRANSLATION, PERMUTATION, AXIS_REFLECTION},
)
def l1(x: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """Manhattan distance ``sum_k |x_k - a_k|`` (a distance), in [0, inf).

    Invariant to translations, coordinate permutations and sign flips of coordinates; not to rotations.
    """
    return _half_safe(torch.cdist, x, anchors, p=1.0)


@register_similarity(
    "linf",
    kind="distance",
    value_range=(0.0, math.inf),
    invariances={TRANSLATION, PERMUTATION, AXIS_REFLECTION},
)
def linf(x: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """Chebyshev distance ``max_k |x_k - a_k|`` (a distance), in [0, inf).

    Invariant to translations, coordinate permutations and sign flips of coordinates; not to rotations.
    """
    return _half_safe(torch.cdist, x, anchors, p=math.inf)


def _half_safe(distance: Callable[..., torch.Tensor], x: torch.Tensor, anchors: torch.Tensor, **options: Any):
    """``distance(x, anchors)``, computed in float32 for half-precision inputs on the CPU (which torch's cdist does
    not implement) and returned in the inputs' dtype."""
    if x.dtype in (torch.float16, torch.bfloat16) and x.device.type == "cpu":
        return distance(x.float(), anchors.float(), **options).to(x.dtype)
    return distance(x, anchors, **options)


def _basis_change_prepare(anchors: torch.Tensor) -> torch.Tensor:
    m, d = anchors.shape
    # The pseudo-inverse in float64: anchors are few, and float32 loses the small singular directions.
    a64 = anchors.double()
    singular = torch.linalg.svdvals(a64.detach())
    tol = singular.max() * max(m, d) * torch.finfo(anchors.dtype).eps
    rank = int((singular > tol).sum())
    if rank < d:
        warnings.warn(
            f"anchors: rank {rank} < {d} features, so basis_change coordinates are those of the projection "
            "onto the anchors' span and are invariant only to orthogonal maps, not to all invertible ones; "
            f"use at least {d} linearly independent anchors",
            stacklevel=4,
        )
    return torch.linalg.pinv(a64, atol=float(tol)).to(anchors.dtype)


@register_similarity(
    "basis_change",
    kind="coordinates",
    value_range=(-math.inf, math.inf),
    invariances={INVERTIBLE_LINEAR},
    prepare=_basis_change_prepare,
)
def basis_change(x: torch.Tensor, anchors_pinv: torch.Tensor) -> torch.Tensor:
    """Least-squares coordinates ``c`` of each sample in the anchor basis: ``c = argmin |x - c A|`` (minimum
    norm when there are more anchors than features), ``c = x pinv(A)``.

    Invariant to every invertible linear map applied to samples and anchors together, provided the anchors span
    the feature space (at least d linearly independent anchors; a warning is raised otherwise).
    """
    return matmul(x, anchors_pinv)
