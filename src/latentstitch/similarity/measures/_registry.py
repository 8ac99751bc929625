"""The registry of similarity indices: each measure with its documented properties.

``compare`` and ``pairwise`` look measures up here by name, and users read the metadata here: whether larger means
more similar, the range, symmetry, which transformations leave the value unchanged, whether the torch path is
differentiable. Adding a measure is one call::

    register_measure("my_index", my_index, kind="similarity", value_range=(0, 1), symmetric=True,
                     invariances={ORTHOGONAL}, differentiable=True, centering="columns centred")

This module also holds the input/output conventions every measure shares (``prepare_pair``, ``as_result``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import as_float_tensor, check_same_rows, flatten_samples, match_reference
from latentstitch._core.moments import CrossMoments, MagnitudeError, rescaled_for_moments
from latentstitch._core.params import check_choice, check_int


@dataclass(frozen=True)
class MeasureSpec:
    """A registered similarity index and its documented properties.

    kind: ``"similarity"`` (larger = more alike) or ``"distance"`` (larger = farther apart).
    value_range: the closed range of the value.
    symmetric: whether ``f(x, y) == f(y, x)``.
    invariances_x, invariances_y: transformations (``latentstitch.invariance`` names) that leave the value unchanged
        when applied to ``x`` (resp. ``y``) alone; ``invariances`` is what holds for both arguments. For
        ``same_space`` measures (rows of x and y live in one space and are compared coordinate by coordinate) the
        transformation is applied to x and y together.
    differentiable: whether the torch path carries gradients (usable as a loss).
    centering: the centring convention, in words.
    min_samples: the fewest rows the estimator is defined for.
    streaming: the name of the streaming class computing the same value chunk by chunk, if any.
    trivial_when_n_le_d: the value reaches its "identical" end (or, for GULP and the eigenspace overlap, a value set
        by the widths alone) whatever the data once the samples are no more than the features of a side (N <= d):
        fitted measures (R^2 of a linear regression, the CCA family, GULP without ridge) can then match any two
        representations exactly. Such a value says nothing; compare N with d before reading it
        (``is_trivial`` does, and ``compare``, ``permutation_test`` and ``bootstrap_ci`` flag it in their results).
    trivial_samples: the value is the same on any data with this many samples or fewer (0: never). With 2 samples,
        centring leaves one direction per side, so every centred Gram matrix, distance matrix or correlation is the
        same up to scale and sign: CKA, Procrustes, distance correlation, PNKA, ENSD and correlation matching read
        "identical" whatever the data. ``is_trivial`` applies it, and the measure warns (``SmallSampleWarning``).
    resampling: how the samples of a bootstrap may be drawn. ``"with_replacement"``: the classic bootstrap (a row
        drawn twice is just a heavier sample). ``"without_replacement"``: the estimator leaves out pairs of a sample
        with itself (unbiased HSIC: debiased and minibatch CKA), so a row drawn twice would count as two distinct
        samples that agree perfectly and bias it; replicates are half-samples instead. ``"none"``: the value depends
        on n itself and on who is whose neighbour (k-NN measures): no bootstrap over samples.
    row_options: options that hold one row per sample (e.g. deconfounded CKA's ``confounder``): they follow x's rows
        (a permutation test permutes y only; a bootstrap resamples them with x and y).
    similarity_repository: the same measure's identifiers in nacloos/similarity-repository's standardised naming
        (``similarity.make("measure/<repository>/<identifier>")``), where one exists, to cross-walk results.
    """

    name: str
    function: Callable[..., Any]
    kind: str
    value_range: tuple[float, float]
    symmetric: bool
    invariances_x: frozenset[str]
    invariances_y: frozenset[str]
    differentiable: bool
    centering: str
    min_samples: int = 2
    same_space: bool = False
    streaming: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    trivial_when_n_le_d: bool = False
    resampling: str = "with_replacement"
    row_options: tuple[str, ...] = ()
    trivial_samples: int = 0
    similarity_repository: tuple[str, ...] = ()

    @property
    def invariances(self) -> frozenset[str]:
        return self.invariances_x & self.invariances_y

    def __call__(self, x: Any, y: Any, **options: Any) -> Any:
        return self.function(x, y, **{**self.options, **options})


MEASURES: dict[str, MeasureSpec] = {}
RESAMPLING = ("with_replacement", "without_replacement", "none")


def register_measure(
    name: str,
    function: Callable[..., Any],
    *,
    kind: str,
    value_range: tuple[float, float],
    symmetric: bool,
    invariances: Iterable[str],
    differentiable: bool,
    centering: str,
    invariances_x: Iterable[str] = (),
    invariances_y: Iterable[str] = (),
    min_samples: int = 2,
    same_space: bool = False,
    streaming: str | None = None,
    options: dict[str, Any] | None = None,
    trivial_when_n_le_d: bool = False,
    resampling: str = "with_replacement",
    row_options: Iterable[str] = (),
    similarity_repository: Iterable[str] = (),
    trivial_samples: int = 0,
) -> MeasureSpec:
    """Add a measure under ``name``. ``invariances`` hold for both arguments; ``invariances_x``/``invariances_y``
    list the extra ones that hold for one argument only. ``options`` are keyword arguments bound to ``function``
    (so ``"debiased_cka"`` is ``cka`` with ``debiased=True``)."""
    if kind not in ("similarity", "distance"):
        raise ValueError(f"kind: expected 'similarity' or 'distance', got {kind!r}")
    if name in MEASURES:
        raise ValueError(f"a measure named {name!r} is already registered")
    both = frozenset(invariances)
    spec = MeasureSpec(
        name=name,
        function=function,
        kind=kind,
        value_range=value_range,
        symmetric=symmetric,
        invariances_x=both | frozenset(invariances_x),
        invariances_y=both | frozenset(invariances_y),
        differentiable=differentiable,
        centering=centering,
        min_samples=min_samples,
        same_space=same_space,
        streaming=streaming,
        options=dict(options or {}),
        trivial_when_n_le_d=trivial_when_n_le_d,
        resampling=check_choice(resampling, "resampling", RESAMPLING),
        row_options=tuple(row_options),
        similarity_repository=tuple(similarity_repository),
        trivial_samples=check_int(trivial_samples, "trivial_samples", minimum=0),
    )
    MEASURES[name] = spec
    return spec


def get_measure(name: str) -> MeasureSpec:
    try:
        return MEASURES[name]
    except KeyError:
        raise ValueError(f"measure: unknown measure {name!r}; registered: {', '.join(sorted(MEASURES))}") from None


# --- shared input/output conventions ---------------------------------------------------------------------------


def as_rows(x: object, name: str, finite: bool = True) -> torch.Tensor:
    """Activations as one row per sample: (n, ...) is flattened to (n, prod(...)); NaN/inf rejected."""
    t = as_float_tensor(x, name, finite=finite)
    if t.ndim < 2:
        raise ValueError(
            f"{name}: expected (n_samples, n_features) or (n_samples, ...) activations, got shape {tuple(t.shape)}"
        )
    return flatten_samples(t)


def prepare_pair(
    x: object,
    y: object,
    *,
    min_rows: int,
    measure: str,
    finite: bool = True,
    scale_free: bool = False,
    varying: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate a pair of representations of the same samples; ``y`` follows ``x``'s dtype and device.
    ``finite=False`` leaves the NaN/inf check to the caller. ``varying=True``, for measures undefined on a
    representation whose rows are all equal (0/0 after centring, or neighbours that are all ties): such a side is
    refused with a ``ZeroVarianceError`` naming it (``check_varying``), whatever the row order. ``scale_free=True``,
    for measures invariant to isotropic scaling of each side: each side is multiplied by the power of two that
    brings its largest magnitude into [0.5, 1) (exact), so that products and squares of data near the ends of the
    dtype's range neither overflow nor underflow."""
    xt, yt = as_rows(x, "x", finite), as_rows(y, "y", finite)
    check_same_rows(xt, yt, "x", "y")
    yt = match_reference(yt, xt, "y", "x")
    if xt.shape[0] < min_rows:
        raise ValueError(f"x, y: {measure} needs at least {min_rows} samples (rows), got {xt.shape[0]}")
    if varying:
        check_varying(xt, "x", measure)
        check_varying(yt, "y", measure)
    if scale_free and xt.numel() and yt.numel():
        xt, yt = rescaled_for_moments(xt), rescaled_for_moments(yt)
    return xt, yt


def check_varying(t: torch.Tensor, name: str, measure: str) -> None:
    """Refuse a representation whose rows are all equal (a constant layer, dead units, a collapsed encoder).

    Tested exactly, row against row, not on the centred data: centring a constant in floating point leaves
    rounding residues of either sign, which would turn 0/0 into an arbitrary value (or an order-dependent one).
    """
    if t.shape[0] > 1 and torch.equal(t, t[:1].expand_as(t)):
        raise ZeroVarianceError(name, measure)


def check_same_space(xt: torch.Tensor, yt: torch.Tensor, measure: str) -> None:
    if xt.shape[1] != yt.shape[1]:
        raise ValueError(
            f"x, y: {measure} compares rows of x and y in one space, so they need the same number of features; "
            f"got {xt.shape[1]} and {yt.shape[1]} (compare relative representations with shared anchors)"
        )


def needs_grad(*tensors: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def moments_of(x: torch.Tensor, y: torch.Tensor) -> CrossMoments:
    """Float64 moments of a validated pair (one ``update``), tracking gradients when the inputs need them.

    For measures invariant to rescaling each side (R^2, CCA, the shape metrics): float64 data too large or too
    small for float64 squares are first brought into range by a power of two per side."""
    track = needs_grad(x, y)
    try:
        return CrossMoments(track_grad=track, names=("x", "y")).update(x, y, finite_checked=True)
    except MagnitudeError:
        x, y = rescaled_for_moments(x), rescaled_for_moments(y)
        return CrossMoments(track_grad=track, names=("x", "y")).update(x, y, finite_checked=True)


def as_result(value: torch.Tensor | float, like: object, reference: torch.Tensor) -> float | torch.Tensor:
    """A float for numpy inputs; a 0-d tensor of the input's dtype and device (keeping the graph) for torch ones."""
    if isinstance(like, np.ndarray) or not isinstance(like, torch.Tensor):
        return float(value)
    if not isinstance(value, torch.Tensor):
        value = torch.tensor(value, dtype=torch.float64)
    return value.to(device=reference.device, dtype=reference.dtype)


class ZeroVarianceError(ValueError):
    """A representation whose rows are all equal was given to an index that is undefined for it."""

    def __init__(self, name: str, measure: str):
        super().__init__(
            f"{name}: has zero variance (all rows are equal after centring), so {measure} is undefined; "
            "check that the representation is not constant (e.g. dead units, a collapsed layer)"
        )
