"""The statistics of every layer pair of two models at once: ``LayerMoments``.

For layers ``a_1..a_L`` of one model and ``b_1..b_K`` of another, seen on the same rows, every moment-based index of
a pair ``(a_i, b_j)`` is a function of ``A_i^T A_i``, ``A_i^T B_j`` and ``B_j^T B_j`` (centred) and the count. So
one accumulator holds each layer's own second moments (``sum_i d_i^2``) and the cross moments of the two models'
concatenated layers (``(sum_i d_i) x (sum_j d_j)``, which hold every pair's ``A_i^T B_j``): never N x d, and each
product is taken once per batch whatever the number of pairs. The cross moments are a ``CrossMoments``; the layers'
own moments are taken from the same shifted blocks it yields, so all are about the same shift (the first batch's
mean: exact centring, no cancellation for activations of large mean) and a pair's statistics are a plain
``CrossMoments`` (``pair``), finished by the one-shot measure's own ``*_from_moments`` function.

For the closed-form permutation test of linear CKA per pair (``layers/_significance``) each layer also keeps, about
the same shift, ``sum_i |y_i|^4`` and ``sum_i |y_i|^2 y_i`` (y: a shifted row; moved exactly to the mean at the end
with the second moments: the exact mean and variance of the null), and all accumulators share one uniform sample of
``sample_rows`` rows (bottom-k of seeded random keys: mergeable), from which the sums over row pairs of the
skewness are estimated (exact while every row is in the sample).

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
from latentstitch._core.params import check_int, check_seed

SIDES = ("a", "b")
SAMPLE_ROWS = 1024  # rows kept for the skewness of the closed-form test: exact up to this many rows


class LayerMoments:
    """Count, sums and second moments of every layer of two models over the same rows, and of every layer pair.

    ``update(acts_a, acts_b)`` adds a batch: two mappings from layer names to (n, d) activations of the same n rows
    (the same names and widths in every batch). ``merge`` combines two accumulators (partitions of the data, e.g. on
    several machines); ``pair(i, j)`` gives the ``CrossMoments`` of layer i of the first model and layer j of the
    second. ``precision`` is ``CrossMoments``'s (``"float64"``, or ``"input"``: float32 products within a block of
    rows for float32 / bfloat16 activations, summed in float64).
    """

    def __init__(self, *, precision: str = "float64", sample_rows: int = SAMPLE_ROWS, seed: int = 0) -> None:
        self.cross = CrossMoments(products=("ab",), precision=precision, names=("model_a", "model_b"))
        self.names: dict[str, list[str]] = {"a": [], "b": []}
        self.widths: dict[str, list[int]] = {"a": [], "b": []}
        self.own: dict[str, list[torch.Tensor]] = {"a": [], "b": []}
        # Per layer, about the shift: sum |y|^4 (scalar) and sum |y|^2 y (vector); None when loaded from an old state.
        self.fourth: dict[str, list[torch.Tensor]] | None = {"a": [], "b": []}
        self.third: dict[str, list[torch.Tensor]] | None = {"a": [], "b": []}
        self.sample_rows = check_int(sample_rows, "sample_rows", minimum=0)
        self.seed = check_seed(seed)
        self._generator = torch.Generator().manual_seed(self.seed)
        self.sample_keys: torch.Tensor | None = None  # the sampled rows' random keys (the smallest seen) ...
        self.sample: dict[str, torch.Tensor] = {}  # ... and their activations, every layer side by side

    @property
    def count(self) -> int:
        return self.cross.count

    def column_slices(self, side: str) -> list[slice]:
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
        slices = {"a": self.column_slices("a"), "b": self.column_slices("b")}
        for shifted_a, shifted_b in self.cross.blocks(a, b, finite_checked=True):
            for side, block in (("a", shifted_a), ("b", shifted_b)):
                for index, columns in enumerate(slices[side]):
                    part = block[:, columns]
                    product = matmul(part.T, part).to(torch.float64)
                    wide = part.to(torch.float64)
                    norms = (wide * wide).sum(dim=1)
                    sums = (product, norms @ norms, norms @ wide)
                    stores = (self.own[side], *((s or {}).get(side) for s in (self.fourth, self.third)))
                    for store, value in zip(stores, sums, strict=True):
                        if store is None:
                            continue
                        if index < len(store):
                            store[index].add_(value)
                        else:
                            store.append(value)
        self._sample(a, b)
        return self

    def _sample(self, a: torch.Tensor, b: torch.Tensor) -> None:
        """Keep the rows of the ``sample_rows`` smallest random keys seen (a uniform sample without replacement)."""
        if not self.sample_rows:
            return
        keys = torch.rand(a.shape[0], generator=self._generator, dtype=torch.float64)
        rows = {"a": a.detach(), "b": b.detach()}
        stored = {side: t.to(torch.promote_types(t.dtype, torch.float32)) for side, t in rows.items()}
        self._keep(keys, stored)

    def _keep(self, keys: torch.Tensor, rows: dict[str, torch.Tensor]) -> None:
        if self.sample_keys is None:
            self.sample_keys, self.sample = keys[:0], {side: t[:0].clone() for side, t in rows.items()}
        room = self.sample_rows - self.sample_keys.shape[0]
        if room > 0:  # not full yet: append
            take = slice(0, min(room, keys.shape[0]))
            self.sample_keys = torch.cat([self.sample_keys, keys[take]])
            self.sample = {s: torch.cat([self.sample[s], rows[s][take].to(self.sample[s])]) for s in SIDES}
            keys, rows = keys[take.stop :], {s: t[take.stop :] for s, t in rows.items()}
        if not keys.shape[0]:
            return
        candidates = torch.nonzero(keys < self.sample_keys.max()).flatten()
        if not candidates.shape[0]:
            return
        merged = torch.cat([self.sample_keys, keys[candidates]])
        kept = torch.topk(merged, self.sample_rows, largest=False).indices
        incoming = kept[kept >= self.sample_rows] - self.sample_rows
        dropped = torch.ones(self.sample_rows, dtype=torch.bool)
        dropped[kept[kept < self.sample_rows]] = False
        slots = torch.nonzero(dropped).flatten()
        self.sample_keys[slots] = keys[candidates[incoming]]
        for side in SIDES:
            target = self.sample[side]
            target[slots.to(target.device)] = rows[side][candidates[incoming].to(rows[side].device)].to(target)

    def layer(self, side: str, index: int) -> CrossMoments:
        """The moments of one layer alone (``a`` statistics of a ``CrossMoments``), about the common shift."""
        columns = self.column_slices(side)[index]
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
        rows, columns = self.column_slices("a")[i], self.column_slices("b")[j]
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
        out = LayerMoments(precision=self.cross.precision, sample_rows=self.sample_rows, seed=self.seed)
        out.names = {side: list(self.names[side]) for side in SIDES}
        out.widths = {side: list(self.widths[side]) for side in SIDES}
        out.cross = self.cross.merge(other.cross)
        for side in SIDES:
            # Each layer's own moments move to this accumulator's shift with CrossMoments.merge (exact).
            out.own[side] = [self.layer(side, k).merge(other.layer(side, k)).aa for k in range(len(self.names[side]))]
        if self.fourth is None or other.fourth is None:
            out.fourth = out.third = None
        else:  # both moved to this accumulator's shift (exact: they need only the second moments to move)
            for side in SIDES:
                for k in range(len(self.names[side])):
                    mine = self.fourth[side][k], self.third[side][k]
                    theirs = other.higher(side, k, self.layer(side, k).shift_a)
                    out.fourth[side].append(mine[0] + theirs[0])
                    out.third[side].append(mine[1] + theirs[1])
        for part in (self, other):
            if part.sample_keys is not None:
                out._keep(part.sample_keys.clone(), {s: t.clone() for s, t in part.sample.items()})
        return out

    def higher(self, side: str, index: int, shift: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(sum_i |x_i - s|^4, sum_i |x_i - s|^2 (x_i - s))`` of one layer about ``s`` (default: its mean).

        From the sums about the accumulator's shift t (y = x - t, e = s - t): ``|y - e|^2 = |y|^2 - 2 y.e + |e|^2``,
        expanded, needs only sum y, sum y y^T, sum |y|^2 y and sum |y|^4: exact, no third-order tensor."""
        if self.fourth is None:
            raise ValueError("moments: loaded from a state without the fourth-order sums; no closed-form test")
        layer = self.layer(side, index)
        n, total, m = layer.count, layer.sum_a, layer.aa
        e = total / n if shift is None else shift.to(layer.shift_a) - layer.shift_a
        fourth, third = self.fourth[side][index], self.third[side][index]
        r, trace, me = e @ e, torch.trace(m), m @ e
        moved4 = fourth - 4 * (e @ third) + 4 * (e @ me) + 2 * r * trace - 4 * r * (e @ total) + n * r * r
        moved3 = third - 2 * me - e * trace + r * total + 2 * e * (e @ total) - n * r * e
        return moved4, moved3

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Tensors only (safetensors-ready); the layer names are ``names`` (keep them beside, e.g. as metadata)."""
        state = {f"cross.{k}": v for k, v in self.cross.state_dict().items()}
        for side in SIDES:
            state.update({f"own_{side}.{k}": v.clone() for k, v in enumerate(self.own[side])})
            state[f"widths_{side}"] = torch.tensor(self.widths[side], dtype=torch.int64)
            if self.fourth is not None:
                state.update({f"fourth_{side}.{k}": v.clone() for k, v in enumerate(self.fourth[side])})
                state.update({f"third_{side}.{k}": v.clone() for k, v in enumerate(self.third[side])})
            if self.sample_keys is not None:
                state[f"sample_{side}"] = self.sample[side].clone()
        if self.sample_keys is not None:
            state["sample_keys"] = self.sample_keys.clone()
        return state

    @classmethod
    def from_state_dict(
        cls,
        state: Mapping[str, torch.Tensor],
        names: Mapping[str, list[str]],
        *,
        precision: str = "float64",
        sample_rows: int = SAMPLE_ROWS,
        seed: int = 0,
    ) -> LayerMoments:
        """The accumulator of ``state_dict()``; a state without the fourth-order sums (saved before they were kept)
        loads without the closed-form test."""
        out = cls(precision=precision, sample_rows=sample_rows, seed=seed)
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
            if out.fourth is not None and f"fourth_{side}.0" in state:
                for store, key in ((out.fourth, "fourth"), (out.third, "third")):
                    store[side] = [state[f"{key}_{side}.{k}"].clone() for k in range(len(out.widths[side]))]
            else:
                out.fourth = out.third = None
        if "sample_keys" in state:
            rows = {side: state[f"sample_{side}"] for side in SIDES}
            out._keep(state["sample_keys"].to(torch.float64).clone(), {s: t.clone() for s, t in rows.items()})
        return out


def _copy(moments: LayerMoments) -> LayerMoments:
    precision = moments.cross.precision
    if not moments.count:
        return LayerMoments(precision=precision, sample_rows=moments.sample_rows, seed=moments.seed)
    return LayerMoments.from_state_dict(
        moments.state_dict(), moments.names, precision=precision, sample_rows=moments.sample_rows, seed=moments.seed
    )
