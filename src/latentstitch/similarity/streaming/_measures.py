"""Streaming similarity indices: ``update(x_chunk, y_chunk)`` accumulates sufficient statistics, ``compute()``
finishes with the same function as the one-shot index, so the result equals ``index(x, y)`` on the concatenated
chunks (up to float64 rounding). Accumulators ``merge`` (tree reductions across processes) and save to tensors
(``state_dict``, safetensors-ready). ``update`` accepts dask arrays: each block of rows is accumulated on a worker
and the accumulators are merged in a tree (``latentstitch.distributed``).

Every measure here reduces to moments of paired rows (``CrossMoments``): linear CKA (+ row-norm sums when
debiased), R^2 of the least-squares fit, CCA and its variants, the Procrustes shape metrics. Minibatch CKA
accumulates per-batch HSIC values instead (``StreamingMinibatchCKA``, in ``streaming/_minibatch``). The
accumulation, device transfers, checks and merging are ``MomentStream``'s (``_moment_stream``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch

from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import Rule, check_bool, check_choice, check_nonnegative, rule
from latentstitch.similarity.measures._cca import (
    REDUCTIONS,
    cca_from_moments,
    check_keep,
    check_rtol,
    pwcca_from_moments,
    svcca_from_moments,
)
from latentstitch.similarity.measures._cka_statistics import CKAStatistics, cka_ratio
from latentstitch.similarity.measures._gulp import gulp_from_moments
from latentstitch.similarity.measures._matching import (
    PERMUTATION_SCORES,
    correlation_match_from_moments,
    permutation_from_moments,
)
from latentstitch.similarity.measures._procrustes import angular_from_moments, procrustes_from_moments
from latentstitch.similarity.measures._regression import r2_from_moments
from latentstitch.similarity.measures._subspace import eigenspace_overlap_from_moments, ensd_from_moments
from latentstitch.similarity.streaming._moment_stream import MomentStream


class StreamingCKA(MomentStream):
    """Linear CKA (biased, or debiased with ``debiased=True``) over a stream of chunks, in feature space.

    Memory O(p^2 + q^2) whatever the number of rows; equals ``cka(x, y, debiased=...)`` on the concatenated data.
    Products are taken in the data's precision within blocks of rows and accumulated in float64.

    ``device="cuda"``: chunks from (pinned) host memory are copied to the GPU while it works on the previous one,
    and no update waits for the GPU (see ``MomentStream``).
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "debiased": rule(check_bool),
        **MomentStream._parameter_constraints,
    }

    def __init__(self, debiased: bool = False, *, device: torch.device | str | None = None):
        self.debiased = debiased
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


class StreamingR2(MomentStream):
    """R^2 of the least-squares prediction of y from x over a stream (equals ``r2_linear``)."""

    _measure = "R^2"

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return r2_from_moments(moments)


class StreamingCCA(MomentStream):
    """Mean canonical correlation (``reduce="mean"``) or R^2_CCA (``"r2"``) over a stream (equals ``cca``)."""

    _measure = "CCA"

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "reduce": rule(check_choice, choices=REDUCTIONS),
        "rtol": rule(check_rtol),
        **MomentStream._parameter_constraints,
    }

    def __init__(self, reduce: str = "mean", rtol: float | None = None):
        self.reduce, self.rtol = reduce, rtol
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return cca_from_moments(moments, self.reduce, self.rtol, self._dtype or torch.float64)


class StreamingSVCCA(MomentStream):
    """SVCCA over a stream (equals ``svcca``): the principal directions come from the accumulated covariance."""

    _measure = "SVCCA"

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "keep": rule(check_keep),
        "rtol": rule(check_rtol),
        **MomentStream._parameter_constraints,
    }

    def __init__(self, keep: float | int = 0.99, rtol: float | None = None):
        self.keep, self.rtol = keep, rtol
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return svcca_from_moments(moments, self.keep, self.rtol, self._dtype or torch.float64)


class StreamingPWCCA(MomentStream):
    """PWCCA over a stream (equals ``pwcca``)."""

    _measure = "PWCCA"

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "rtol": rule(check_rtol),
        **MomentStream._parameter_constraints,
    }

    def __init__(self, rtol: float | None = None):
        self.rtol = rtol
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return pwcca_from_moments(moments, self.rtol, self._dtype or torch.float64)


_SHAPE_METRICS: dict[str, Callable[[CrossMoments], torch.Tensor]] = {
    "procrustes": procrustes_from_moments,
    "angular": angular_from_moments,
}


class StreamingProcrustes(MomentStream):
    """Procrustes distance (``metric="procrustes"``) or angular shape metric (``"angular"``) over a stream."""

    _measure = "the Procrustes distance"

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "metric": rule(check_choice, choices=tuple(_SHAPE_METRICS)),
        **MomentStream._parameter_constraints,
    }

    def __init__(self, metric: str = "procrustes"):
        self.metric = metric
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return _SHAPE_METRICS[self.metric](moments)


class StreamingGULP(MomentStream):
    """GULP over a stream (equals ``gulp(x, y, ridge)``)."""

    _measure = "GULP"

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "ridge": rule(check_nonnegative),
        **MomentStream._parameter_constraints,
    }

    def __init__(self, ridge: float = 0.0):
        self.ridge = ridge
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return gulp_from_moments(moments, self.ridge, self._dtype or torch.float64)


class StreamingENSD(MomentStream):
    """ENSD, the effective number of shared dimensions, over a stream (equals ``ensd``)."""

    _measure = "ENSD"

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return ensd_from_moments(moments)


class StreamingEigenspaceOverlap(MomentStream):
    """The eigenspace overlap score over a stream (equals ``eigenspace_overlap``; uncentred moments)."""

    _measure = "the eigenspace overlap"

    def compute(self) -> float:
        if self.count < 1:
            raise ValueError(f"compute: {self._measure} needs at least 1 sample; 0 seen so far (add rows with update)")
        return float(self._finish(self.stats))

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return eigenspace_overlap_from_moments(moments, self._dtype or torch.float64)


class StreamingCorrelationMatch(MomentStream):
    """Hard (``soft=False``) or soft correlation match over a stream (equals ``correlation_match``)."""

    _measure = "correlation match"

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "soft": rule(check_bool),
        **MomentStream._parameter_constraints,
    }

    def __init__(self, soft: bool = False):
        self.soft = soft
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return correlation_match_from_moments(moments, self.soft)


class StreamingPermutation(MomentStream):
    """The permutation metric (``score="angular"`` or ``"euclidean"``) over a stream (equals
    ``permutation_metric``)."""

    _measure = "the permutation metric"

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "score": rule(check_choice, choices=PERMUTATION_SCORES),
        **MomentStream._parameter_constraints,
    }

    def __init__(self, score: str = "angular"):
        self.score = score
        super().__init__()

    def _finish(self, moments: CrossMoments) -> torch.Tensor:
        return permutation_from_moments(moments, self.score)
