"""The base of the moment-based streaming measures: float64 ``CrossMoments`` of the chunks seen so far, copied to
the accumulation device on a side stream, checked for NaN/inf without waiting for the device, merged across
accumulators, reduced block by block on Dask, saved to tensors. Each measure (``_measures``) finishes the moments with
the one-shot index's own function."""

from __future__ import annotations

import copy
from typing import ClassVar

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.device import DeferredChecks, HostToDevice, check_finite
from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import Rule, check_declared, check_device, rule
from latentstitch.distributed import is_dask_array, update_blocks
from latentstitch.similarity.measures._registry import prepare_pair


class MomentStream:
    """Base: float64 ``CrossMoments`` of the chunks seen so far, finished by ``_finish(moments)``.

    ``device``: where the statistics are accumulated. Chunks from host memory are copied there on a side stream,
    overlapping the computation on the previous chunk (``_core.device.HostToDevice``; pin the chunks' memory for the
    copies to run asynchronously). By default, the device of the first chunk.

    On a GPU no update waits for the device: the NaN/inf check of each chunk is queued there and read when the
    result is asked for (``compute``, ``merge``, ``state_dict``), and the error then names the first bad row of the
    stream (rows counted over all chunks so far). On the CPU a bad chunk is rejected by ``update`` itself.
    """

    _measure = "this index"
    #: each constructor parameter's rule (``latentstitch._core.params``), applied by ``__init__``
    _parameter_constraints: ClassVar[dict[str, Rule]] = {"device": rule(check_device)}

    def __init__(self, *, device: torch.device | str | None = None) -> None:
        self.device = device
        check_declared(self)
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
