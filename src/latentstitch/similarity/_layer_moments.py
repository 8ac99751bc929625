"""The statistics of every layer pair of two models at once: ``LayerMoments``.

For layers ``a_1..a_L`` of one model and ``b_1..b_K`` of another, seen on the same rows, every moment-based index of
a pair ``(a_i, b_j)`` is a function of ``A_i^T A_i``, ``A_i^T B_j`` and ``B_j^T B_j`` (centred) and the count. So
one accumulator holds each layer's own second moments (``sum_i d_i^2``) and the cross moments of the two models'
concatenated layers (``(sum_i d_i) x (sum_j d_j)``, which hold every pair's ``A_i^T B_j``): never N x d, and each
product is taken once per batch whatever the number of pairs. The cross moments are a ``CrossMoments``; the layers'
own moments are taken from the same shifted blocks it yields, so all are about the same shift (the first batch's
mean: exact centring, no cancellation for activations of large mean) and a pair's statistics are a plain
``CrossMoments`` (``pair``), finished by the one-shot measure's own ``*_from_moments`` function.

Precision: products of a block of rows in float64 by default; with ``precision="input"`` in float32 for float32 /
bfloat16 / float16 activations (float64 for float64 ones, and for activations beyond float32's safe range, see
``CrossMoments``), summed across blocks in float64.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import torch

from latentstitch._core.moments import CrossMoments
from latentstitch._core.numerics import matmul

SIDES = ("a", "b")


class LayerMoments:
    """Count, sums and second moments of every layer of two models over the same rows, and of every layer pair.

    ``update(acts_a, acts_b)`` adds a batch: two mappings from layer names to (n, d) activations of the same n rows
    (the same names and widths in every batch). ``merge`` combines two accumulators (partitions of the data, e.g. on
    several machines); ``pair(i, j)`` gives the ``CrossMoments`` of layer i of the first model and layer j of the
    second. ``precision`` is ``CrossMoments``'s (``"float64"``, or ``"input"``: float32 products within a block of
    rows for float32 / bfloat16 activations, summed in float64).
    """

    def __init__(self, *, precision: str = "float64") -> None:
        self.cross = CrossMoments(products=("ab",), precision=precision, names=("model_a", "model_b"))
        self.names: dict[str, list[str]] = {"a": [], "b": []}
        self.widths: dict[str, list[int]] = {"a": [], "b": []}
        self.own: dict[str, list[torch.Tensor]] = {"a": [], "b": []}

    @property
    def count(self) -> int:
        return self.cross.count

    def _slices(self, side: str) -> list[slice]:
        ends = torch.tensor(self.widths[side]).cumsum(0).tolist()
        return [slice(end - width, end) for end, width in zip(ends, self.widths[side], strict=True)]

    def _stack(self, side: str, acts: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The layers' activations side by side, (n, sum of widths); checks names, shapes and finiteness."""
        argument = f"model_{side}"
        if not isinstance(acts, Mapping) or not acts:
            raise TypeError(f"{argument}: expected a mapping from layer names to (n, d) activations, got {acts!r}")
        names, widths = list(acts), []
        for name, value in acts.items():
            if not isinstance(value, torch.Tensor) or value.ndim != 2:
                shape = tuple(value.shape) if hasattr(value, "shape") else type(value).__name__
                raise ValueError(f"{argument}: layer {name!r} gave {shape}; expected (rows, features) activations")
            widths.append(value.shape[1])
        if self.names[side] and (names != self.names[side] or widths != self.widths[side]):
            raise ValueError(
                f"{argument}: this batch has layers {dict(zip(names, widths, strict=True))}, the first had "
                f"{dict(zip(self.names[side], self.widths[side], strict=True))}"
            )
        values = list(acts.values())
        dtype = functools.reduce(torch.promote_types, [v.dtype for v in values])
        stacked = torch.cat([v.detach().to(dtype) for v in values], dim=1)
        if not bool(torch.isfinite(stacked).all()):
            bad = next(n for n, v in acts.items() if not bool(torch.isfinite(v).all()))
            raise ValueError(
                f"{argument}: layer {bad!r} has NaN or inf activations in a batch (rows {self.count} onwards); the "
                "model overflowed (run it in float32 or bfloat16 rather than float16) or its inputs hold NaN"
            )
        self.names[side], self.widths[side] = names, widths
        return stacked

    def update(self, acts_a: Mapping[str, torch.Tensor], acts_b: Mapping[str, torch.Tensor]) -> LayerMoments:
        """Add a batch of rows seen by both models; returns self."""
        a, b = self._stack("a", acts_a), self._stack("b", acts_b)
        if a.shape[0] != b.shape[0]:
            raise ValueError(
                f"model_a, model_b: {a.shape[0]} rows from the first model but {b.shape[0]} from the second; each "
                "batch must give both models the same samples (per-token rows need the same tokenisation)"
            )
        slices = {"a": self._slices("a"), "b": self._slices("b")}
        for shifted_a, shifted_b in self.cross.blocks(a, b, finite_checked=True):
            for side, block in (("a", shifted_a), ("b", shifted_b)):
                for index, columns in enumerate(slices[side]):
                    part = block[:, columns]
                    product = matmul(part.T, part).to(torch.float64)
                    if index < len(self.own[side]):
                        self.own[side][index].add_(product)
                    else:
                        self.own[side].append(product)
        return self

    def layer(self, side: str, index: int) -> CrossMoments:
        """The moments of one layer alone (``a`` statistics of a ``CrossMoments``), about the common shift."""
        columns = self._slices(side)[index]
        shift = self.cross.shift_a if side == "a" else self.cross.shift_b
        total = self.cross.sum_a if side == "a" else self.cross.sum_b
        state = {
            "count": torch.tensor(self.count),
            "shift_a": shift[columns],
            "sum_a": total[columns],
            "aa": self.own[side][index],
        }
        return CrossMoments.from_state_dict(state, products=("aa",))

    def pair(self, i: int, j: int) -> CrossMoments:
        """The moments of layer ``i`` of the first model and layer ``j`` of the second, as one ``CrossMoments``."""
        if self.count == 0:
            raise ValueError("no rows seen yet: call update with a batch first")
        rows, columns = self._slices("a")[i], self._slices("b")[j]
        m = self.cross
        state = {
            "count": torch.tensor(self.count),
            "shift_a": m.shift_a[rows],
            "shift_b": m.shift_b[columns],
            "sum_a": m.sum_a[rows],
            "sum_b": m.sum_b[columns],
            "aa": self.own["a"][i],
            "ab": m.ab[rows, columns],
            "bb": self.own["b"][j],
        }
        return CrossMoments.from_state_dict(state, names=(self.names["a"][i], self.names["b"][j]))

    def merge(self, other: LayerMoments) -> LayerMoments:
        """A new accumulator holding the rows of both (the same layers in both)."""
        if other.count == 0 or self.count == 0:
            return _copy(self if other.count == 0 else other)
        for side in SIDES:
            if other.names[side] != self.names[side] or other.widths[side] != self.widths[side]:
                raise ValueError(f"other: holds layers {other.names[side]} of model_{side}, this {self.names[side]}")
        out = LayerMoments(precision=self.cross.precision)
        out.names = {side: list(self.names[side]) for side in SIDES}
        out.widths = {side: list(self.widths[side]) for side in SIDES}
        out.cross = self.cross.merge(other.cross)
        for side in SIDES:
            # Each layer's own moments move to this accumulator's shift with CrossMoments.merge (exact).
            out.own[side] = [self.layer(side, k).merge(other.layer(side, k)).aa for k in range(len(self.names[side]))]
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Tensors only (safetensors-ready); the layer names are ``names`` (keep them beside, e.g. as metadata)."""
        state = {f"cross.{k}": v for k, v in self.cross.state_dict().items()}
        for side in SIDES:
            state.update({f"own_{side}.{k}": v.clone() for k, v in enumerate(self.own[side])})
            state[f"widths_{side}"] = torch.tensor(self.widths[side], dtype=torch.int64)
        return state

    @classmethod
    def from_state_dict(
        cls, state: Mapping[str, torch.Tensor], names: Mapping[str, list[str]], *, precision: str = "float64"
    ) -> LayerMoments:
        out = cls(precision=precision)
        cross = {k.split(".", 1)[1]: v for k, v in state.items() if k.startswith("cross.")}
        out.cross = CrossMoments.from_state_dict(
            cross, products=("ab",), precision=precision, names=("model_a", "model_b")
        )
        for side in SIDES:
            out.widths[side] = [int(w) for w in state[f"widths_{side}"].tolist()]
            out.names[side] = list(names[side])
            if len(out.names[side]) != len(out.widths[side]):
                raise ValueError(
                    f"names: {len(out.names[side])} names for {len(out.widths[side])} layers of model_{side}"
                )
            out.own[side] = [state[f"own_{side}.{k}"].clone() for k in range(len(out.widths[side]))]
        return out


def _copy(moments: LayerMoments) -> LayerMoments:
    precision = moments.cross.precision
    if not moments.count:
        return LayerMoments(precision=precision)
    return LayerMoments.from_state_dict(moments.state_dict(), moments.names, precision=precision)
