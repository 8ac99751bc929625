"""A bootstrap that streams: confidence intervals for the ``Streaming*`` measures, in one pass, on Dask too.

The multinomial bootstrap needs the whole sample to draw from. The Poisson bootstrap (Hanley & MacGibbon 2006;
Chamandy et al. 2012) instead gives every row an independent Poisson(1) count per replicate, decided the moment the
row arrives, so each replicate is one more accumulator updated with the row repeated that many times. Estimators
that leave out pairs of a sample with itself (debiased CKA) must not see a row twice: for them every row joins a
replicate with probability 1/2 instead (half-sampling). The weights are a hash of (seed, row index, replicate)
(``row_weights``), so the result does not depend on how the stream is chunked or spread over workers, and
``bootstrap_ci(..., scheme=...)`` reproduces it in memory.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, ClassVar

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.params import (
    Rule,
    check_choice,
    check_declared,
    check_positive_int,
    check_probability,
    check_seed,
    rule,
)
from latentstitch.distributed import dask_pair, is_dask_array, reduce_blocks
from latentstitch.similarity.inference._bootstrap import BootstrapCI, confidence_interval
from latentstitch.similarity.inference._resampling import row_weights
from latentstitch.similarity.measures._registry import MEASURES, prepare_pair
from latentstitch.similarity.measures._sample_size import is_trivial


def check_stream(stream: object, name: str = "stream") -> object:
    """A streaming measure: an object with ``update``, ``compute`` and ``reset`` (``StreamingCKA()``...)."""
    if not all(callable(getattr(stream, method, None)) for method in ("update", "compute", "reset")):
        raise TypeError(
            f"{name}: expected a streaming measure such as StreamingCKA() (with update, compute and reset), got "
            f"{stream!r}"
        )
    return stream


class StreamingBootstrap:
    """Poisson-bootstrap confidence interval of a streaming measure.

    Parameters
    ----------
    stream : a streaming measure (``StreamingCKA(debiased=True)``, ``StreamingR2()``, ``StreamingGULP(0.1)``...):
        a template, copied (reset) into the main accumulator and one accumulator per replicate.
    replicates : bootstrap replicates (each holds the stream's statistics: for CKA at width d, about 3 d^2 float64).
    seed : seeds the Poisson counts (with the global row index).
    level : confidence level of ``compute()``.
    interval : ``"percentile"`` or ``"basic"`` (BCa needs a jackknife over the whole sample).
    scheme : ``"auto"`` (``"half"`` for debiased CKA and minibatch CKA, else ``"poisson"``), ``"poisson"`` or
        ``"half"`` (see ``bootstrap_ci``).

    ``update(x, y, start=None)`` adds a chunk whose first row has global index ``start`` (default: the rows seen so
    far; give it when chunks reach several accumulators that are merged later, so that every row keeps its own
    counts). Dask arrays are reduced block by block on the workers. ``merge`` combines two accumulators;
    ``compute()`` returns a ``BootstrapCI`` (``value`` from the un-resampled stream).
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "stream": rule(check_stream),
        "replicates": rule(check_positive_int, minimum=2),
        "seed": rule(check_seed),
        "level": rule(check_probability, low_open=True, high_open=True),
        "interval": rule(check_choice, choices=("percentile", "basic")),
        "scheme": rule(check_choice, choices=("auto", "poisson", "half")),
    }

    def __init__(
        self,
        stream: Any,
        replicates: int = 200,
        seed: int = 0,
        *,
        level: float = 0.95,
        interval: str = "percentile",
        scheme: str = "auto",
    ):
        self.stream, self.replicates, self.seed = stream, replicates, seed
        self.level, self.interval, self.scheme = level, interval, scheme
        check_declared(self)
        leaves_out_self_pairs = getattr(stream, "debiased", False) or type(stream).__name__ == "StreamingMinibatchCKA"
        if scheme == "auto":
            scheme = "half" if leaves_out_self_pairs else "poisson"
        elif scheme == "poisson" and leaves_out_self_pairs:
            raise ValueError(
                "scheme: this stream's estimator leaves out pairs of a sample with itself, so a row counted twice "
                "would bias it; use scheme='half' (or 'auto')"
            )
        self.scheme = scheme
        self.reset()

    def reset(self) -> None:
        self.main = self._fresh()
        self.copies = [self._fresh() for _ in range(self.replicates)]
        self.rows = 0

    def _fresh(self) -> Any:
        fresh = copy.deepcopy(self.stream)
        fresh.reset()
        return fresh

    def update(self, x: ArrayLike, y: ArrayLike, *, start: int | None = None) -> StreamingBootstrap:
        if is_dask_array(x) or is_dask_array(y):
            return self._update_dask(x, y)
        xt, yt = prepare_pair(x, y, min_rows=0, measure="the streaming bootstrap")
        start = self.rows if start is None else check_positive_int(start, "start", minimum=0)
        count = xt.shape[0]
        weights = torch.from_numpy(row_weights(self.seed, start, start + count, self.replicates, self.scheme))
        self.main.update(xt, yt)
        rows = torch.arange(count)
        for replicate, accumulator in enumerate(self.copies):
            index = torch.repeat_interleave(rows, weights[:, replicate]).to(xt.device)
            if index.numel():
                accumulator.update(xt[index], yt[index])
        self.rows = max(self.rows, start + count)
        return self

    def _update_dask(self, x: Any, y: Any) -> StreamingBootstrap:
        import dask.array as da

        x, y = dask_pair(x, y)
        rows = da.arange(self.rows, self.rows + x.shape[0], chunks=(x.chunks[0],))
        empty = copy.copy(self)
        empty.reset()
        merged = self.merge(reduce_blocks(functools.partial(_update_block, empty), x, y, rows))
        self.__dict__.update(merged.__dict__)
        return self

    def merge(self, other: StreamingBootstrap) -> StreamingBootstrap:
        key = (self.replicates, self.seed, self.scheme)
        if not isinstance(other, StreamingBootstrap) or (other.replicates, other.seed, other.scheme) != key:
            raise TypeError("other: expected a StreamingBootstrap with the same replicates, seed and scheme")
        out = copy.copy(self)
        out.main = self.main.merge(other.main)
        out.copies = [mine.merge(theirs) for mine, theirs in zip(self.copies, other.copies, strict=True)]
        out.rows = max(self.rows, other.rows)
        return out

    def replicate_values(self) -> np.ndarray:
        return np.array([accumulator.compute() for accumulator in self.copies])

    def compute(self) -> BootstrapCI:
        value = float(self.main.compute())
        replicates = self.replicate_values()
        low, high = confidence_interval(value, replicates, self.level, self.interval)
        return BootstrapCI(
            measure=type(self.stream).__name__,
            value=value,
            low=low,
            high=high,
            level=self.level,
            interval=self.interval,
            replicates=replicates,
            std_error=float(replicates.std(ddof=1)),
            bias=float(replicates.mean() - value),
            samples=self.main.count,
            trivial=self._trivial(),
            scheme=self.scheme,
        )

    def _trivial(self) -> bool:
        """Whether a measure this stream computes is trivial at the sample size and widths seen (``is_trivial``)."""
        moments = getattr(self.main, "_moments", None)  # (minibatch CKA keeps no moments)
        if moments is None or moments.shift_a is None or getattr(self.stream, "ridge", 0) > 0:
            return False
        n, p, q = moments.count, moments.shift_a.shape[0], moments.shift_b.shape[0]
        name = type(self.stream).__name__
        return any(is_trivial(spec, n, p, q) for spec in MEASURES.values() if spec.streaming == name)


def _update_block(empty: StreamingBootstrap, x: np.ndarray, y: np.ndarray, rows: np.ndarray) -> StreamingBootstrap:
    block = copy.deepcopy(empty)
    return block.update(x, y, start=int(rows[0])) if rows.shape[0] else block
