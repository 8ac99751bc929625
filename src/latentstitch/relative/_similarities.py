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

from latentstitch._backend import matmul, row_norms
from latentstitch._validation import (
    RowError,
    check_bool,
    check_kwargs,
    check_positive,
    power_of_two_scale,
    reading_is_free,
    report_flag,
    rescaled_row_norms,
    safe_norm_range,
)
from latentstitch.invariance import (
    AXIS_REFLECTION,
    INVERTIBLE_LINEAR,
    ISOTROPIC_SCALE,
    ORTHOGONAL,
    PERMUTATION,
    TRANSLATION,
    closure,
)


class ZeroNormError(RowError):
    """A zero vector was given to a similarity that divides by the norm (cosine, angular)."""

    def describe(self) -> str:
        return (
            f"{self.name}: row {self.row} has zero norm, so its cosine similarity is undefined; remove it, or pass "
            "eps=<small positive number> to map zero vectors to zero similarities"
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


# --- row norms, exact at any magnitude ---------------------------------------------------------------------------
#
# ``sqrt(sum x_i^2)`` overflows when entries reach ~1e19 in float32 (~1e154 in float64) and loses the squares that
# underflow when they are below ~1e-19 (1e-154): a plain norm turns 1e20-sized vectors into zeros and reports
# 1e-30-sized ones as zero vectors. The fast path computes plain norms and a flag saying whether every norm lies in
# the range where that is exact; rows outside it take the careful path, which first scales each row by a power of
# two (as BLAS nrm2 does). Inside ``relative_projection`` the flag is handed over (``report_flag``) instead of being
# read, so no chunk waits for the device; the projection reads the flags once and redoes the failing chunks.


def _norm_flag(norms: torch.Tensor, width: int, eps: float | None) -> torch.Tensor:
    """Whether plain ``norms`` (computed in their own dtype over ``width`` terms) are all exact, finite and nonzero
    (or, with ``eps``, exact or certainly below ``eps``)."""
    low, high = safe_norm_range(norms.dtype, width)
    below = norms < high  # false for NaN and inf
    if eps is not None and eps >= low:
        return below.all()  # a norm under low is under eps: it is clamped to eps whatever its rounding
    return (below & (norms > low)).all()


def _fast_norms(t: torch.Tensor, eps: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Fast path: ``max(|t_i|, eps)`` as an (n, 1) column in float32 (float64 for float64 data), and the 0-d
    validity flag of ``_norm_flag``. Half-precision rows are summed in float32. Callers divide by the norms (one
    rounding, where multiplying by reciprocals would make two)."""
    norms = row_norms(t)
    flag = _norm_flag(norms, t.shape[1], eps)
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
    norms, flag = _fast_norms(t, eps)
    if bool(flag):
        return (t / norms).to(t.dtype)
    scaled, norms, scales = rescaled_row_norms(t)
    if eps is None:
        _raise_on_zero(norms, name)
        return (scaled / norms).to(t.dtype)
    return (scaled / torch.maximum(norms, eps * scales)).to(t.dtype)  # max(|t_i|, eps), in scaled units


def _row_norms(t: torch.Tensor, name: str, eps: float | None) -> torch.Tensor:
    """``|t_i|`` as an (n, 1) column (clamped to ``eps`` when given; a zero row raises ``ZeroNormError`` otherwise),
    exact at any magnitude the result can represent. With ``eps`` on an accelerator nothing waits for the device:
    every row is scaled by a power of two before squaring (a few more elementwise passes instead of a sync)."""
    if eps is not None and not reading_is_free(t.device) and t.shape[0]:
        scales = power_of_two_scale(t.detach().abs().amax(dim=1, keepdim=True))
        norms = torch.linalg.vector_norm(
            t * scales, dim=1, keepdim=True, dtype=torch.promote_types(t.dtype, torch.float32)
        )
        return (norms / scales).clamp_min(eps).to(t.dtype)
    norms, flag = _fast_norms(t, eps)
    if t.shape[0] == 0 or bool(flag):
        return norms.to(t.dtype)
    _, norms, scales = rescaled_row_norms(t)
    if eps is None:
        _raise_on_zero(norms, name)
    true = norms / scales
    return (true if eps is None else true.clamp_min(eps)).to(t.dtype)


def _raise_on_zero(norms: torch.Tensor, name: str) -> None:
    zero = norms[:, 0] == 0
    if bool(zero.any()):
        raise ZeroNormError(name, int(zero.nonzero()[0, 0]))


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
    norms, flag = _fast_norms(x, eps)
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
