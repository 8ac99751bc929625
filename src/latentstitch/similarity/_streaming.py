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

from latentstitch._moments import CrossMoments
from latentstitch._validation import ArrayLike, check_choice
from latentstitch.distributed._arrays import is_dask_array, update_blocks
from latentstitch.similarity._cca import REDUCTIONS, cca_from_moments, pwcca_from_moments, svcca_from_moments
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
    """Base: float64 ``CrossMoments`` of the chunks seen so far, finished by ``_finish(moments)``."""

    _measure = "this index"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.stats = CrossMoments()
        self._dtype: torch.dtype | None = None

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
        xt, yt = prepare_pair(x, y, min_rows=0, measure=self._measure)
        self._dtype = self._dtype or xt.dtype
        self.stats.update(xt.detach(), yt.detach(), finite_checked=True)
        return self

    def merge(self, other):
        """A new accumulator holding the chunks of both."""
        if type(other) is not type(self):
            raise TypeError(f"other: expected a {type(self).__name__}, got {type(other).__name__}")
        out = copy.copy(self)
        out.stats = self.stats.merge(other.stats)
        out._dtype = self._dtype or other._dtype
        return out

    def compute(self) -> float:
        """The index over every chunk so far."""
        if self.count < 2:
            raise ValueError(f"{self._measure} needs at least 2 samples; {self.count} seen so far")
        return float(self._finish(self.stats))

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        raise NotImplementedError

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.stats.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]):
        self.stats = CrossMoments.from_state_dict(state)
        return self


class StreamingCKA(_MomentStream):
    """Linear CKA (biased, or debiased with ``debiased=True``) over a stream of chunks, in feature space.

    Memory O(p^2 + q^2) whatever the number of rows; equals ``cka(x, y, debiased=...)`` on the concatenated data.
    Products are taken in the data's precision within blocks of rows and accumulated in float64.
    """

    def __init__(self, debiased: bool = False):
        self.debiased = debiased
        super().__init__()

    @property
    def _measure(self) -> str:
        return "debiased CKA" if self.debiased else "linear CKA"

    def reset(self) -> None:
        self.stats = CKAStatistics(self.debiased)
        self._dtype = None

    @property
    def _moments(self) -> CrossMoments:
        return self.stats.moments

    def compute(self) -> float:
        minimum = 4 if self.debiased else 2
        if self.count < minimum:
            raise ValueError(f"{self._measure} needs at least {minimum} samples; {self.count} seen so far")
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
        self.rtol = rtol
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return cca_from_moments(moments, self.reduce, self.rtol, self._dtype or torch.float64)


class StreamingSVCCA(_MomentStream):
    """SVCCA over a stream (equals ``svcca``): the principal directions come from the accumulated covariance."""

    _measure = "SVCCA"

    def __init__(self, keep: float | int = 0.99, rtol: float | None = None):
        self.keep = keep
        self.rtol = rtol
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return svcca_from_moments(moments, self.keep, self.rtol, self._dtype or torch.float64)


class StreamingPWCCA(_MomentStream):
    """PWCCA over a stream (equals ``pwcca``)."""

    _measure = "PWCCA"

    def __init__(self, rtol: float | None = None):
        self.rtol = rtol
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


class StreamingGULP(_MomentStream):
    """GULP over a stream (equals ``gulp(x, y, ridge)``)."""

    _measure = "GULP"

    def __init__(self, ridge: float = 0.0):
        self.ridge = ridge
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
            raise ValueError(f"{self._measure} needs at least 1 sample; 0 seen so far")
        return float(self._finish(self.stats))

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return eigenspace_overlap_from_moments(moments, self._dtype or torch.float64)


class StreamingCorrelationMatch(_MomentStream):
    """Hard (``soft=False``) or soft correlation match over a stream (equals ``correlation_match``)."""

    _measure = "correlation match"

    def __init__(self, soft: bool = False):
        self.soft = soft
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

    def update(self, x: ArrayLike, y: ArrayLike) -> StreamingMinibatchCKA:
        """Add one minibatch; a pair of dask arrays adds each row block as one minibatch."""
        if is_dask_array(x) or is_dask_array(y):
            self.__dict__.update(update_blocks(self, x, y).__dict__)
            return self
        xt, yt = prepare_pair(x, y, min_rows=4, measure="minibatch CKA (per batch)")
        with torch.no_grad():
            terms = torch.stack(linear_hsic_terms(xt, yt, debiased=True))
        self.totals = terms if self.totals is None else self.totals + terms
        self.batches += 1
        return self

    def merge(self, other: StreamingMinibatchCKA) -> StreamingMinibatchCKA:
        out = StreamingMinibatchCKA()
        parts = [t for t in (self.totals, other.totals) if t is not None]
        out.totals = sum(parts[1:], parts[0]) if parts else None
        out.batches = self.batches + other.batches
        return out

    def compute(self) -> float:
        if self.totals is None:
            raise ValueError("minibatch CKA: no batch seen yet")
        return float(cka_ratio(*self.totals, measure="minibatch CKA"))

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {"batches": torch.tensor(self.batches)}
        if self.totals is not None:
            state["totals"] = self.totals
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> StreamingMinibatchCKA:
        self.totals = state.get("totals")
        self.batches = int(state["batches"])
        return self
