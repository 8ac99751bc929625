"""Streaming similarity indices: ``update(x_chunk, y_chunk)`` accumulates sufficient statistics, ``compute()``
finishes with the same function as the one-shot index, so the result equals ``index(x, y)`` on the concatenated
chunks (up to float64 rounding). Accumulators ``merge`` (tree reductions across processes) and save to tensors
(``state_dict``, safetensors-ready). ``update`` accepts dask arrays: each block of rows is accumulated on a worker
and the accumulators are merged in a tree (``latentstitch.distributed``).

Every measure here reduces to moments of paired rows (``CrossMoments``): linear CKA (+ row-norm sums when
debiased), R^2 of the least-squares fit, CCA and its variants, the Procrustes shape metrics. Minibatch CKA
accumulates per-batch HSIC values instead (``StreamingMinibatchCKA``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.device import DeferredChecks, HostToDevice, check_finite
from latentstitch._core.moments import CrossMoments
from latentstitch._core.numerics import power_of_two_scale
from latentstitch._core.params import check_bool, check_choice, check_device, check_nonnegative
from latentstitch.distributed._arrays import is_dask_array, update_blocks
from latentstitch.similarity._cca import (
    REDUCTIONS,
    cca_from_moments,
    check_keep,
    check_rtol,
    pwcca_from_moments,
    svcca_from_moments,
)
from latentstitch.similarity._cka import CKAStatistics, cka_ratio, linear_hsic_terms
from latentstitch.similarity._gulp import gulp_from_moments
from latentstitch.similarity._matching import (
    PERMUTATION_SCORES,
    correlation_match_from_moments,
    permutation_from_moments,
)
from latentstitch.similarity._procrustes import angular_from_moments, procrustes_from_moments
from latentstitch.similarity._registry import prepare_pair
from latentstitch.similarity._regression import r2_from_moments
from latentstitch.similarity._subspace import eigenspace_overlap_from_moments, ensd_from_moments


class _MomentStream:
    """Base: float64 ``CrossMoments`` of the chunks seen so far, finished by ``_finish(moments)``.

    ``device``: where the statistics are accumulated. Chunks from host memory are copied there on a side stream,
    overlapping the computation on the previous chunk (``_core.device.HostToDevice``; pin the chunks' memory for the
    copies to run asynchronously). By default, the device of the first chunk.

    On a GPU no update waits for the device: the NaN/inf check of each chunk is queued there and read when the
    result is asked for (``compute``, ``merge``, ``state_dict``), and the error then names the first bad row of the
    stream (rows counted over all chunks so far). On the CPU a bad chunk is rejected by ``update`` itself.
    """

    _measure = "this index"

    def __init__(self, *, device: torch.device | str | None = None) -> None:
        self.device = check_device(device)
        self.reset()

    def reset(self) -> None:
        self.stats = CrossMoments(names=("x", "y"))
        self._dtype: torch.dtype | None = None
        self._reset_transfers()

    def _reset_transfers(self) -> None:
        self._checks = DeferredChecks()
        self._sender = None if self.device is None else HostToDevice(self.device)

    def _receive(self, x: ArrayLike, y: ArrayLike, min_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A validated chunk on the accumulation device, its NaN/inf check done (CPU) or queued (GPU)."""
        xt, yt = prepare_pair(x, y, min_rows=min_rows, measure=self._measure, finite=False)
        if self._sender is not None:
            xt, yt = self._sender.send(xt.detach(), yt.detach())
        check_finite(xt, "x", row_offset=self.count, checks=self._checks)
        check_finite(yt, "y", row_offset=self.count, checks=self._checks)
        return xt, yt

    def _resolve(self) -> None:
        """Read the queued checks (one synchronisation); raise the first failure."""
        self._checks.resolve()

    @property
    def count(self) -> int:
        return self._moments.count

    @property
    def _moments(self) -> CrossMoments:
        return self.stats

    def update(self, x: ArrayLike, y: ArrayLike):
        """Add a chunk of paired rows (same samples in x and y); returns self. Dask arrays are reduced block by
        block in a tree (``latentstitch.distributed``), on dask's current scheduler."""
        if is_dask_array(x) or is_dask_array(y):
            self.__dict__.update(update_blocks(self, x, y).__dict__)
            return self
        xt, yt = self._receive(x, y, min_rows=0)
        self._dtype = self._dtype or xt.dtype
        self.stats.update(xt.detach(), yt.detach(), finite_checked=True)
        return self

    def merge(self, other):
        """A new accumulator holding the chunks of both."""
        if type(other) is not type(self):
            raise TypeError(f"other: expected a {type(self).__name__}, got {type(other).__name__}")
        self._resolve()
        other._resolve()
        out = copy.copy(self)
        out.stats = self.stats.merge(other.stats)
        out._dtype = self._dtype or other._dtype
        out._reset_transfers()
        return out

    def compute(self) -> float:
        """The index over every chunk so far."""
        self._resolve()
        if self.count < 2:
            raise ValueError(
                f"compute: {self._measure} needs at least 2 samples; {self.count} seen so far (add rows with update)"
            )
        return float(self._finish(self.stats))

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        raise NotImplementedError

    def state_dict(self) -> dict[str, torch.Tensor]:
        self._resolve()
        return self.stats.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]):
        self.stats = CrossMoments.from_state_dict(state, names=("x", "y"))
        return self


class StreamingCKA(_MomentStream):
    """Linear CKA (biased, or debiased with ``debiased=True``) over a stream of chunks, in feature space.

    Memory O(p^2 + q^2) whatever the number of rows; equals ``cka(x, y, debiased=...)`` on the concatenated data.
    Products are taken in the data's precision within blocks of rows and accumulated in float64.

    ``device="cuda"``: chunks from (pinned) host memory are copied to the GPU while it works on the previous one,
    and no update waits for the GPU (see ``_MomentStream``).
    """

    def __init__(self, debiased: bool = False, *, device: torch.device | str | None = None):
        self.debiased = check_bool(debiased, "debiased")
        super().__init__(device=device)

    @property
    def _measure(self) -> str:
        return "debiased CKA" if self.debiased else "linear CKA"

    def reset(self) -> None:
        self.stats = CKAStatistics(self.debiased)
        self._dtype = None
        self._reset_transfers()

    @property
    def _moments(self) -> CrossMoments:
        return self.stats.moments

    def compute(self) -> float:
        self._resolve()
        minimum = 4 if self.debiased else 2
        if self.count < minimum:
            raise ValueError(
                f"compute: {self._measure} needs at least {minimum} samples; {self.count} seen so far "
                "(add rows with update)"
            )
        return float(cka_ratio(*self.stats.hsic_terms(), measure=self._measure))

    def load_state_dict(self, state: dict[str, torch.Tensor]):
        self.stats = CKAStatistics.from_state_dict(state, self.debiased)
        return self


class StreamingR2(_MomentStream):
    """R^2 of the least-squares prediction of y from x over a stream (equals ``r2_linear``)."""

    _measure = "R^2"

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return r2_from_moments(moments)


class StreamingCCA(_MomentStream):
    """Mean canonical correlation (``reduce="mean"``) or R^2_CCA (``"r2"``) over a stream (equals ``cca``)."""

    _measure = "CCA"

    def __init__(self, reduce: str = "mean", rtol: float | None = None):
        self.reduce = check_choice(reduce, "reduce", REDUCTIONS)
        self.rtol = check_rtol(rtol)
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return cca_from_moments(moments, self.reduce, self.rtol, self._dtype or torch.float64)


class StreamingSVCCA(_MomentStream):
    """SVCCA over a stream (equals ``svcca``): the principal directions come from the accumulated covariance."""

    _measure = "SVCCA"

    def __init__(self, keep: float | int = 0.99, rtol: float | None = None):
        self.keep = check_keep(keep)
        self.rtol = check_rtol(rtol)
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return svcca_from_moments(moments, self.keep, self.rtol, self._dtype or torch.float64)


class StreamingPWCCA(_MomentStream):
    """PWCCA over a stream (equals ``pwcca``)."""

    _measure = "PWCCA"

    def __init__(self, rtol: float | None = None):
        self.rtol = check_rtol(rtol)
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return pwcca_from_moments(moments, self.rtol, self._dtype or torch.float64)


_SHAPE_METRICS: dict[str, Callable[[CrossMoments], torch.Tensor]] = {
    "procrustes": procrustes_from_moments,
    "angular": angular_from_moments,
}


class StreamingProcrustes(_MomentStream):
    """Procrustes distance (``metric="procrustes"``) or angular shape metric (``"angular"``) over a stream."""

    _measure = "the Procrustes distance"

    def __init__(self, metric: str = "procrustes"):
        self.metric = check_choice(metric, "metric", tuple(_SHAPE_METRICS))
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return _SHAPE_METRICS[self.metric](moments)


def _batch_scale(t: torch.Tensor) -> torch.Tensor:
    """1 for data whose fourth powers are safe in float32 products; else the power of two bringing its largest
    magnitude into [0.5, 1) (one host synchronisation, on the first batch only)."""
    largest = t.detach().abs().amax()
    if 2.0**-28 <= float(largest) <= 2.0**28:
        return torch.ones((), dtype=torch.float64, device=t.device)
    return power_of_two_scale(largest.to(torch.float64))


class StreamingGULP(_MomentStream):
    """GULP over a stream (equals ``gulp(x, y, ridge)``)."""

    _measure = "GULP"

    def __init__(self, ridge: float = 0.0):
        self.ridge = check_nonnegative(ridge, "ridge")
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return gulp_from_moments(moments, self.ridge, self._dtype or torch.float64)


class StreamingENSD(_MomentStream):
    """ENSD, the effective number of shared dimensions, over a stream (equals ``ensd``)."""

    _measure = "ENSD"

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return ensd_from_moments(moments)


class StreamingEigenspaceOverlap(_MomentStream):
    """The eigenspace overlap score over a stream (equals ``eigenspace_overlap``; uncentred moments)."""

    _measure = "the eigenspace overlap"

    def compute(self) -> float:
        if self.count < 1:
            raise ValueError(f"compute: {self._measure} needs at least 1 sample; 0 seen so far (add rows with update)")
        return float(self._finish(self.stats))

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return eigenspace_overlap_from_moments(moments, self._dtype or torch.float64)


class StreamingCorrelationMatch(_MomentStream):
    """Hard (``soft=False``) or soft correlation match over a stream (equals ``correlation_match``)."""

    _measure = "correlation match"

    def __init__(self, soft: bool = False):
        self.soft = check_bool(soft, "soft")
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return correlation_match_from_moments(moments, self.soft)


class StreamingPermutation(_MomentStream):
    """The permutation metric (``score="angular"`` or ``"euclidean"``) over a stream (equals
    ``permutation_metric``)."""

    _measure = "the permutation metric"

    def __init__(self, score: str = "angular"):
        self.score = check_choice(score, "score", PERMUTATION_SCORES)
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return permutation_from_moments(moments, self.score)


class StreamingMinibatchCKA:
    """Minibatch CKA (Nguyen et al. 2021) fed one minibatch per ``update``: accumulates the unbiased HSIC of each
    batch (the U-centred Gram inner products, as ``efficient_CKA.MinibatchCKA``); ``compute()`` returns
    ``sum HSIC_xy / sqrt(sum HSIC_xx sum HSIC_yy)``. Each batch needs at least 4 rows. ``minibatch_cka(x, y, b)``
    equals feeding consecutive slices of b rows."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.totals: torch.Tensor | None = None  # (xy, xx, yy), float64
        self.batches = 0
        self._widths: tuple[int, int] | None = None
        self._scales: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(self, x: ArrayLike, y: ArrayLike) -> StreamingMinibatchCKA:
        """Add one minibatch; a pair of dask arrays adds each row block as one minibatch."""
        if is_dask_array(x) or is_dask_array(y):
            self.__dict__.update(update_blocks(self, x, y).__dict__)
            return self
        xt, yt = prepare_pair(x, y, min_rows=4, measure="minibatch CKA (per batch)")
        widths = (xt.shape[1], yt.shape[1])
        if self._widths is not None and widths != self._widths:
            raise ValueError(f"x, y: batch widths {widths} differ from the first batch's {self._widths}")
        self._widths = widths
        if self._scales is None:
            # Powers of two that bring the first batch into range, kept for every batch (the index is invariant to
            # one factor per side, not to one per batch).
            self._scales = tuple(_batch_scale(t) for t in (xt, yt))
        with torch.no_grad():
            terms = torch.stack(linear_hsic_terms(xt * self._scales[0], yt * self._scales[1], debiased=True))
        self.totals = terms if self.totals is None else self.totals + terms
        self.batches += 1
        return self

    def merge(self, other: StreamingMinibatchCKA) -> StreamingMinibatchCKA:
        out = StreamingMinibatchCKA()
        theirs = other.totals
        if theirs is not None and self._scales is not None and other._scales is not None:
            # Bring the other's terms to this accumulator's factors: xy scales as sx^2 sy^2, xx as sx^4, yy as sy^4.
            rx, ry = (mine / their for mine, their in zip(self._scales, other._scales, strict=True))
            theirs = theirs * torch.stack([rx**2 * ry**2, rx**4, ry**4]).to(theirs)
        parts = [t for t in (self.totals, theirs) if t is not None]
        out.totals = sum(parts[1:], parts[0]) if parts else None
        out.batches = self.batches + other.batches
        out._widths = self._widths or other._widths
        out._scales = self._scales or other._scales
        return out

    def compute(self) -> float:
        if self.totals is None:
            raise ValueError("compute: minibatch CKA has seen no batch yet (add batches with update)")
        return float(cka_ratio(*self.totals, measure="minibatch CKA"))

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {"batches": torch.tensor(self.batches)}
        if self.totals is not None:
            state["totals"] = self.totals
        if self._scales is not None:
            state["scales"] = torch.stack(self._scales)
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> StreamingMinibatchCKA:
        self.totals = state.get("totals")
        self.batches = int(state["batches"])
        scales = state.get("scales")
        self._scales = None if scales is None else (scales[0], scales[1])
        return self
