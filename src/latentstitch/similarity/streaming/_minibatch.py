"""Minibatch CKA over a stream: one minibatch per ``update``, the unbiased HSIC terms of each batch summed (Nguyen et
al. 2021, ``efficient_CKA.MinibatchCKA``); ``minibatch_cka(x, y, b)`` equals feeding consecutive slices of b rows."""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.numerics import power_of_two_scale
from latentstitch._core.params import check_state
from latentstitch.distributed import is_dask_array, update_blocks
from latentstitch.similarity.measures._cka import linear_hsic_terms
from latentstitch.similarity.measures._cka_statistics import cka_ratio
from latentstitch.similarity.measures._registry import prepare_pair


def _batch_scale(t: torch.Tensor) -> torch.Tensor:
    """1 for data whose fourth powers are safe in float32 products; else the power of two bringing its largest
    magnitude into [0.5, 1) (one host synchronisation, on the first batch only)."""
    largest = t.detach().abs().amax()
    if 2.0**-28 <= float(largest) <= 2.0**28:
        return torch.ones((), dtype=torch.float64, device=t.device)
    return power_of_two_scale(largest.to(torch.float64))


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
        check_state(state, ("batches",), ("totals", "scales"))
        self.totals = state.get("totals")
        self.batches = int(state["batches"])
        scales = state.get("scales")
        self._scales = None if scales is None else (scales[0], scales[1])
        return self
