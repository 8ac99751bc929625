"""The initialisations of a stitching layer, one small function per mode, chosen from a table.

``initial_layer`` reads what ``StitchedModel.initialize`` was given: a name (``INITS``), a direct-matching estimator
(fitted, or fitted here on ``data``) or a ready ``nn.Module``; it returns the layer and the estimator it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from sklearn.base import BaseEstimator
from torch import nn

from latentstitch._core.params import check_choice
from latentstitch.stitching._base import AffineMap
from latentstitch.stitching._data import iter_batches
from latentstitch.stitching._direct import fit_direct
from latentstitch.stitching._hooks import capture, to_model
from latentstitch.stitching._layers import LowRankStitch, affine_map, layer_from_map, low_rank_from_map
from latentstitch.stitching._least_squares import LeastSquares
from latentstitch.stitching._reduced_rank import ReducedRank

#: Initialisations by name: the least-squares fit on data, PyTorch's default layer init (orthogonal factors for a
#: low-rank layer, as the reference code), or the identity map.
INITS = ("least_squares", "random", "identity")


@dataclass(frozen=True)
class InitRequest:
    """What every initialisation may read: the stitched network (``model_a``, ``layer_a``...; duck-typed), the data
    or an example batch giving the widths, and the options of ``StitchedModel.initialize`` (checked already)."""

    stitched: Any
    data: Any = None
    example: Any = None
    rank: int | None = None
    seed: int = 0
    batch_size: int = 256


Initialised = tuple[nn.Module, Any]  # the layer, and the direct-matching estimator it came from (or None)


def initial_layer(stitcher: Any, request: InitRequest) -> Initialised:
    """The stitching layer ``stitcher`` describes (see ``StitchedModel.initialize``)."""
    if isinstance(stitcher, str):
        return _BY_NAME[check_choice(stitcher, "stitcher", INITS)](request)
    for kind, initialise in _BY_TYPE:
        if isinstance(stitcher, kind):
            return initialise(stitcher, request)
    raise TypeError(
        f"stitcher: expected one of {INITS}, an estimator of latentstitch.stitching or an nn.Module, got "
        f"{type(stitcher).__name__}"
    )


# --- by type ---------------------------------------------------------------------------------------------------------


def _ready_module(layer: nn.Module, request: InitRequest) -> Initialised:
    if request.rank is not None:
        raise ValueError("rank: give either a ready stitching layer or a rank, not both")
    return layer, None


def _from_estimator(estimator: Any, request: InitRequest) -> Initialised:
    """The map of a fitted estimator (an unfitted one is first fitted on ``data``, streamed): the direct-matching
    initialisation; a ``LowRankStitch`` from its SVD with ``rank``."""
    stitched = request.stitched
    if not hasattr(estimator, "coef_"):
        if request.data is None:
            raise ValueError(f"data: needed to fit the unfitted {type(estimator).__name__}")
        fit_direct(
            estimator,
            stitched.model_a,
            stitched.model_b,
            stitched.layer_a,
            stitched.layer_b,
            request.data,
            batch_size=request.batch_size,
        )
    if not isinstance(estimator, AffineMap):
        raise TypeError(f"stitcher: expected an estimator of latentstitch.stitching, got {type(estimator)}")
    layer = estimator.to_torch(dtype=torch.float64)
    if request.rank is not None:
        coef, intercept = affine_map(layer)
        return low_rank_from_map(coef, intercept, request.rank).float(), estimator
    return layer.float(), estimator


_BY_TYPE: tuple[tuple[type, Callable[[Any, InitRequest], Initialised]], ...] = (
    (nn.Module, _ready_module),
    (BaseEstimator, _from_estimator),
)


# --- by name -------------------------------------------------------------------------------------------------------


def _least_squares(request: InitRequest) -> Initialised:
    """``LeastSquares()`` fitted on ``data`` (the paper's initialisation); ``ReducedRank(rank)`` with ``rank``, the
    least-squares optimum of that rank."""
    return _from_estimator(LeastSquares() if request.rank is None else ReducedRank(request.rank), request)


def _random(request: InitRequest) -> Initialised:
    """PyTorch's default initialisation of the layer, seeded; orthogonal factors for a ``LowRankStitch``."""
    p, q, feature_maps = _widths(request, "random")
    with _seeded(request.seed):
        if request.rank is not None:
            return LowRankStitch(p, q, request.rank), None
        return (nn.Conv2d(p, q, kernel_size=1) if feature_maps else nn.Linear(p, q)), None


def _identity(request: InitRequest) -> Initialised:
    """The identity map, zero-padded or truncated when the widths differ."""
    p, q, feature_maps = _widths(request, "identity")
    with _seeded(request.seed):
        if request.rank is not None:
            raise ValueError("rank: the identity has no unique low-rank version; use another init")
        return layer_from_map(torch.eye(p, q), torch.zeros(q), feature_maps), None


_BY_NAME: dict[str, Callable[[InitRequest], Initialised]] = {
    "least_squares": _least_squares,
    "random": _random,
    "identity": _identity,
}


def _widths(request: InitRequest, kind: str) -> tuple[int, int, bool]:
    """``(p, q, feature_maps)``: the widths of A's ``layer_a`` and B's ``layer_b`` on an example batch (two inputs of
    ``example`` or of ``data``'s first batch), and whether they are (N, C, H, W) feature maps."""
    stitched, example = request.stitched, request.example
    if example is None:
        if request.data is None:
            raise ValueError(f"example: an input batch (or data) is needed to size a {kind!r} stitching layer")
        example = next(iter_batches(request.data, request.batch_size))[0]
    example = torch.as_tensor(example)[:2]
    with torch.no_grad():
        a = capture(stitched.model_a, to_model(stitched.model_a, example), [stitched.layer_a])[stitched.layer_a]
        b = capture(stitched.model_b, to_model(stitched.model_b, example), [stitched.layer_b])[stitched.layer_b]
    if a.ndim != b.ndim:
        raise ValueError(
            f"layer_a, layer_b: model_a's {stitched.layer_a!r} outputs {tuple(a.shape)} but model_b's "
            f"{stitched.layer_b!r} outputs {tuple(b.shape)}: different layouts cannot be stitched per feature."
            + stitched.shape_listing(example)
        )
    p = a.shape[1] if a.ndim == 4 else a.shape[-1]
    q = b.shape[1] if b.ndim == 4 else b.shape[-1]
    return p, q, a.ndim == 4


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """torch's global generator seeded with ``seed`` for the block, then restored (a new layer's default init draws
    from it)."""
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)
