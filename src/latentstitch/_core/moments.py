"""Running sufficient statistics of paired representations, the shared core of every streaming computation.

Least-squares stitching, linear CKA in feature space, R^2 of a linear fit and CCA all depend on paired samples
``(a_i, b_i)`` only through the count, the sums and the second moments ``A^T A``, ``A^T B``, ``B^T B``.
``CrossMoments`` accumulates them chunk by chunk in float64, so a fit or a measure over a stream of chunks equals
the one-shot value, and two accumulators merge (``merge``), so the reduction can run as a tree on a
distributed engine.

Numerics: moments are accumulated about a *shift* (the mean of the first block of rows), not about zero, so
centring later does not suffer catastrophic cancellation when the mean is large compared with the spread. Chunks are
processed in blocks of rows, so the memory used beyond the running sums is one block, whatever the chunk size.
A consumer that needs only some of the second moments names them in ``products`` and skips the others' cost;
``precision="input"`` takes each block's products in float32 for float32 data (2-3x faster) and accumulates across
blocks in float64.

Magnitudes: squares of float32 values overflow float32 above ~1e19 and underflow below ~1e-19 (float64: 1e154,
1e-154). The first block's largest magnitude is checked once per accumulator: float32 products of data outside
[2^-40, 2^40] are taken in float64 instead (where any float32 value squares safely); float64 data outside
[2^-480, 2^480] raise ``MagnitudeError`` naming the argument (there is no wider precision), which scale-invariant
callers answer by rescaling the data by a power of two (``rescaled_for_moments``). Consumers of fourth-order
statistics (debiased CKA) ask for ``max_order=4``: windows [2^-28, 2^28] and [2^-240, 2^240]. Statistics that
overflow later (a chunk far larger than the first) make ``finite()`` false, and callers raise ``overflow_error``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows
from latentstitch._core.numerics import matmul, power_of_two_scale
from latentstitch._core.params import check_choice, check_state

# Elements per block of rows (per side): 8 Mi values keep a block's temporaries at 32 MiB in float32, whatever the
# number of rows, while each block product runs at full BLAS speed (benchmarks/similarity_cka.py: smaller blocks
# cost a few percent).
_BLOCK_ELEMENTS = 1 << 23

SECOND_MOMENTS = ("aa", "ab", "bb")
PRODUCTS = (*SECOND_MOMENTS, "aa_diag", "bb_diag")  # *_diag: per-feature sums of squares alone
PRECISIONS = ("float64", "input")
_SUMS = ("sum_a", "sum_b", "aa_diag", "bb_diag", "aa", "ab", "bb")
# Largest magnitudes M (as powers of two) whose products up to the given order, summed over any realistic number of
# rows, stay finite and far above underflow in the product precision: M^order * 2^40 < max, M^order > tiny / eps.
# Order 4: debiased CKA's sums of squared row norms (taken in float64 from float32 norms: order 3 in float32).
_WINDOW_EXPONENT = {(torch.float32, 2): 40, (torch.float32, 4): 28, (torch.float64, 2): 480, (torch.float64, 4): 240}


class MagnitudeError(ValueError):
    """Values too large or too small for their second moments to be computed in float64."""

    def __init__(self, name: str, largest: float):
        self.name, self.largest = name, largest
        direction = "overflow" if largest > 1 else "underflow"
        super().__init__(
            f"{name}: values of magnitude {largest:.3g} make its float64 second moments {direction} (float64 squares "
            f"magnitudes between about 1e-154 and 1e154); rescale {name} by a constant first, e.g. divide it by "
            f"{largest:.1e} (the same constant for every chunk)"
        )


def overflow_error(names: tuple[str, str]) -> ValueError:
    """The error for accumulated statistics that became NaN or inf from finite data."""
    return ValueError(
        f"{names[0]}, {names[1]}: the accumulated second moments overflowed: a later chunk holds values many orders "
        "of magnitude larger than the first chunk's; rescale the data by a constant, or pass float64 chunks"
    )


def rescaled_for_moments(t: torch.Tensor) -> torch.Tensor:
    """``t`` times the power of two that brings its largest magnitude into [0.5, 1) (exact): what a caller that is
    invariant to isotropic scaling does with data ``MagnitudeError`` rejected."""
    low, high = torch.aminmax(t.detach())
    return t * power_of_two_scale(torch.maximum(-low, high))


_FIELDS = ("shift_a", "shift_b", *_SUMS)


class CrossMoments:
    """Count, sums and second moments of paired rows ``a`` (n, p) and ``b`` (n, q), accumulated in float64.

    ``update(a, b)`` adds a chunk; ``merge(other)`` combines two accumulators. Results (``mean_a``,
    ``centered_ab()``...) are float64 tensors on the device of the first chunk. If ``b`` is omitted in every
    update, only the ``a`` statistics are kept.

    Parameters
    ----------
    products : tuple of {"aa", "ab", "bb", "aa_diag", "bb_diag"}
        Second moments to accumulate: the full products ``aa``, ``ab``, ``bb`` by default. ``aa_diag`` / ``bb_diag``
        keep only the per-feature sums of squares (``centered_aa_diag()``...), which ``aa`` / ``bb`` also provide.
        Counts and sums are always kept; asking for a statistic that was skipped raises an error.
    precision : {"float64", "input"}
        Precision of each block's products. ``"float64"`` (default) converts every block to float64 first.
        ``"input"`` multiplies in the data's own precision (float32 stays float32; float16/bfloat16 are promoted to
        float32) and only accumulates the block results in float64: 2-3x faster for float32 data, at the cost of
        float32 rounding within one block of rows (relative error ~1e-6 on the moments).
    track_grad : bool
        Keep the autograd graph of the inputs, so that anything computed from the moments is differentiable with
        respect to them (used by differentiable similarity indices). Off by default: inputs are detached.
    shift : bool
        Accumulate about the first block's mean (default), so that centring later is exact. ``False`` accumulates
        the raw products about zero and keeps no column sums, which saves a shifted copy and a pass over every
        block: for consumers of the raw moments only (``raw_ab()``...); the means and centred statistics are then
        unavailable.
    names : (str, str)
        The arguments' names used in error messages.
    max_order : {2, 4}
        The highest order of products of the data the consumer accumulates from the yielded blocks (``blocks``):
        it narrows the range of magnitudes taken in the data's precision (see the module's notes).
    """

    def __init__(
        self,
        *,
        products: tuple[str, ...] = SECOND_MOMENTS,
        precision: str = "float64",
        track_grad: bool = False,
        shift: bool = True,
        names: tuple[str, str] = ("a", "b"),
        max_order: int = 2,
    ) -> None:
        if isinstance(products, str):
            raise TypeError(f"products: expected a tuple of names from {PRODUCTS}, got the string {products!r}")
        self.products = tuple(check_choice(p, "products", PRODUCTS) for p in products)
        self.precision = check_choice(precision, "precision", PRECISIONS)
        self.track_grad = track_grad
        self.shift = shift
        self.names = names
        self.max_order = check_choice(max_order, "max_order", (2, 4))
        self.count = 0
        self.shift_a: torch.Tensor | None = None
        self.shift_b: torch.Tensor | None = None
        self.sum_a: torch.Tensor | None = None  # sum of (a - shift_a)
        self.sum_b: torch.Tensor | None = None
        self.aa_diag: torch.Tensor | None = None  # per-feature sum of (a - shift_a)^2, kept only without aa
        self.bb_diag: torch.Tensor | None = None
        self.aa: torch.Tensor | None = None  # sum of (a - shift_a)^T (a - shift_a)
        self.ab: torch.Tensor | None = None
        self.bb: torch.Tensor | None = None

    @property
    def paired(self) -> bool:
        return self.shift_b is not None

    def update(self, a: ArrayLike, b: ArrayLike | None = None, *, finite_checked: bool = False) -> CrossMoments:
        """Add a chunk of rows. ``finite_checked``: the caller has already rejected NaN/inf in ``a`` and ``b``
        (skips one pass over the data)."""
        for _ in self.blocks(a, b, finite_checked=finite_checked):
            pass
        return self

    def blocks(
        self, a: ArrayLike, b: ArrayLike | None = None, *, finite_checked: bool = False
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor | None]]:
        """``update`` block by block: after each block of rows is accumulated, yield its shifted rows
        ``(a - shift_a, b - shift_b)`` (in the product precision), for callers that need more statistics of the
        same rows (e.g. row norms) without a second pass."""
        name_a, name_b = self.names
        at = as_float_tensor(a, name_a, ndim=2, finite=not finite_checked)
        bt = None if b is None else as_float_tensor(b, name_b, ndim=2, finite=not finite_checked)
        if not self.track_grad:
            at = at.detach()
            bt = None if bt is None else bt.detach()
        if bt is not None:
            check_same_rows(at, bt, name_a, name_b)
        if self.count and (bt is not None) != self.paired:
            raise ValueError("b: give it in every update or in none")
        if at.shape[0] == 0:
            return
        if self.shift_a is not None and (
            at.shape[1] != self.shift_a.shape[0] or (bt is not None and bt.shape[1] != self.shift_b.shape[0])
        ):
            raise ValueError(
                f"a, b: chunk widths {at.shape[1]}, {None if bt is None else bt.shape[1]} differ from the "
                f"first chunk's {self.shift_a.shape[0]}, {None if self.shift_b is None else self.shift_b.shape[0]}"
            )
        rows = self.block_rows(at.shape[1] if bt is None else max(at.shape[1], bt.shape[1]), at.device)
        for start in range(0, at.shape[0], rows):
            yield self._add_block(at[start : start + rows], None if bt is None else bt[start : start + rows])

    @staticmethod
    def block_rows(width: int, device: torch.device | None = None) -> int:
        """Rows per block for data ``width`` features wide (the unit of work and of temporary memory). On a GPU
        blocks are 16x larger: there, the per-block kernel launches cost more than the memory."""
        elements = _BLOCK_ELEMENTS * (16 if device is not None and device.type != "cpu" else 1)
        return max(64, elements // max(width, 1))

    def product_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The precision the products of data of ``dtype`` are taken in."""
        if self.precision == "float64" or dtype == torch.float64:
            return torch.float64
        return torch.float32

    def _check_magnitude(self, a: torch.Tensor, b: torch.Tensor | None) -> None:
        """Once per accumulator, on its first block: make sure squares of the data neither overflow nor underflow in
        the product precision. Float32 products of out-of-range data become float64 ones; float64 data out of
        range raise ``MagnitudeError``. One host synchronisation, skipped when float64 products hold any value of
        narrower data."""
        work = self.product_dtype(a.dtype)
        if work == torch.float64 and a.dtype != torch.float64:
            return
        exponent = _WINDOW_EXPONENT[(work, self.max_order)]
        low, high = 2.0**-exponent, 2.0**exponent
        sides = [(a, self.names[0]), *([] if b is None else [(b, self.names[1])])]
        extremes = torch.stack([v for t, _ in sides for v in torch.aminmax(t.detach())]).abs().to(torch.float64)
        largest = extremes.reshape(-1, 2).amax(dim=1).tolist()
        for (_, name), value in zip(sides, largest, strict=True):
            if not math.isfinite(value) or value == 0 or low <= value <= high:
                continue  # NaN/inf data: the statistics become non-finite and the caller names the row
            if work != torch.float64:
                self.precision = "float64"  # float32 data: float64 products square any value safely
                return
            raise MagnitudeError(name, value)

    def _add_block(self, a: torch.Tensor, b: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        first = self.shift_a is None
        if first:
            self._check_magnitude(a, b)
        work = self.product_dtype(a.dtype)
        # A converted block is a fresh copy: shift it in place rather than making another.
        in_place = a.dtype != work and not self.track_grad
        a = a.to(work)
        b_in_place = b is not None and (b.dtype != work or b.device != a.device) and not self.track_grad
        b = None if b is None else b.to(device=a.device, dtype=work)
        if first:
            (self.shift_a, sum_a), (self.shift_b, sum_b) = self._shift(a), self._shift(b)
        da = _shifted(a, self.shift_a, self.shift, in_place)
        self.count += a.shape[0]
        # Column sums of one block are taken in the product precision (they are small: the rows are shifted); the
        # first block's are known from its mean.
        if self.shift:
            self._accumulate("sum_a", sum_a if first else da.sum(dim=0))
        # a.T @ a of one buffer is a symmetric rank-k update (half the work) in numpy's BLAS, which _backend uses
        if "aa" in self.products:
            self._accumulate("aa", matmul(da.T, da))
        elif "aa_diag" in self.products:
            self._accumulate("aa_diag", (da * da).sum(dim=0))
        db = None
        if b is not None:
            db = _shifted(b, self.shift_b, self.shift, b_in_place)
            if self.shift:
                self._accumulate("sum_b", sum_b if first else db.sum(dim=0))
            if "ab" in self.products:
                self._accumulate("ab", matmul(da.T, db))
            if "bb" in self.products:
                self._accumulate("bb", matmul(db.T, db))
            elif "bb_diag" in self.products:
                self._accumulate("bb_diag", (db * db).sum(dim=0))
        return da, db

    def _accumulate(self, field: str, value: torch.Tensor) -> None:
        total = getattr(self, field)
        if total is None:
            setattr(self, field, value.to(torch.float64))
        elif self.track_grad:
            # Out of place: the running totals are nodes of the autograd graph.
            setattr(self, field, total + value)
        else:
            total.add_(value)  # float32 blocks are promoted to float64 inside the kernel, no temporary

    def _shift(self, block: torch.Tensor | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The shift (the first block's mean) and the first block's column sums about it.

        The shift is a constant (never part of the autograd graph): any value near the mean keeps centring exact.
        With float32 products it is rounded to float32, so that subtracting it in float32 is exact, and the block's
        sums about it are ``rows * (mean - shift)``. With ``track_grad`` the sums are computed from the data, so
        that they carry the gradient.
        """
        if block is None:
            return None, None
        if not self.shift:
            return block.new_zeros(block.shape[1], dtype=torch.float64), None
        mean = block.detach().mean(dim=0).to(torch.float64)
        shift = mean.float().double() if self.precision == "input" else mean
        if self.track_grad:
            return shift, (block - shift.to(block.dtype)).sum(dim=0)
        return shift, block.shape[0] * (mean - shift)

    def merge(self, other: CrossMoments) -> CrossMoments:
        """A new accumulator holding the statistics of both (``self`` and ``other`` are unchanged)."""
        if other.count == 0:
            return self.copy()
        if self.count == 0:
            return other.copy()
        if other.paired != self.paired:
            raise ValueError("other: cannot merge paired and unpaired statistics")
        if self._kept() != other._kept():
            raise ValueError(f"other: holds products {other._kept()}, this accumulator {self._kept()}")
        if other.shift != self.shift:
            raise ValueError("other: cannot merge statistics about the mean with raw ones about zero (shift=False)")
        merged = self.copy()
        moved = other._reshifted(self.shift_a, self.shift_b) if self.shift else other  # raw: both about zero
        merged.count += moved.count
        for field in _SUMS:
            mine = getattr(merged, field)
            if mine is not None:
                setattr(merged, field, mine + getattr(moved, field).to(mine.device))
        return merged

    def _kept(self) -> tuple[str, ...]:
        return tuple(f for f in PRODUCTS if getattr(self, f) is not None)

    def _options(self) -> dict[str, object]:
        return {
            "products": self.products,
            "precision": self.precision,
            "track_grad": self.track_grad,
            "shift": self.shift,
            "names": self.names,
            "max_order": self.max_order,
        }

    def finite(self) -> torch.Tensor:
        """A 0-d boolean tensor: whether every accumulated statistic is finite (reading it is one sync). False
        after NaN/inf data that was not checked, or after values that overflowed the products."""
        kept = [getattr(self, f) for f in _SUMS if getattr(self, f) is not None]
        if not kept:
            return torch.tensor(True)
        return torch.stack([torch.isfinite(v).all() for v in kept]).all()

    def _reshifted(self, shift_a: torch.Tensor, shift_b: torch.Tensor | None) -> CrossMoments:
        # Moments about s' = s + delta from moments about s:
        #   sum(x - s') = S1 - n delta;  sum (x-s')(y-t')^T = S_xy - S1x dy^T - dx S1y^T + n dx dy^T
        out = CrossMoments(**self._options())
        out.count = n = self.count
        da = shift_a.to(self.shift_a.device) - self.shift_a
        out.shift_a, out.sum_a = shift_a, self.sum_a - n * da
        if self.aa_diag is not None:
            out.aa_diag = self.aa_diag - 2 * self.sum_a * da + n * da * da
        if self.aa is not None:
            out.aa = self.aa - torch.outer(self.sum_a, da) - torch.outer(da, self.sum_a) + n * torch.outer(da, da)
        if self.paired:
            db = shift_b.to(self.shift_b.device) - self.shift_b
            out.shift_b, out.sum_b = shift_b, self.sum_b - n * db
            if self.bb_diag is not None:
                out.bb_diag = self.bb_diag - 2 * self.sum_b * db + n * db * db
            if self.ab is not None:
                out.ab = self.ab - torch.outer(self.sum_a, db) - torch.outer(da, self.sum_b) + n * torch.outer(da, db)
            if self.bb is not None:
                out.bb = self.bb - torch.outer(self.sum_b, db) - torch.outer(db, self.sum_b) + n * torch.outer(db, db)
        return out

    def copy(self) -> CrossMoments:
        out = CrossMoments(**self._options())
        out.count = self.count
        for field in _FIELDS:
            value = getattr(self, field)
            setattr(out, field, None if value is None else value.clone())
        return out

    # --- results -------------------------------------------------------------------------------------------
    def _require(self, minimum: int = 1, product: str | None = None, *, sums: bool = False) -> None:
        if self.count < minimum:
            raise ValueError(f"needs at least {minimum} samples, got {self.count}")
        if product is not None and getattr(self, product) is None:
            raise ValueError(f"{product}: not accumulated (this accumulator keeps products {self._kept()})")
        if sums and not self.shift:
            raise ValueError("means and centred statistics: not kept by raw statistics about zero (shift=False)")

    @property
    def mean_a(self) -> torch.Tensor:
        self._require(sums=True)
        return self.shift_a + self.sum_a / self.count

    @property
    def mean_b(self) -> torch.Tensor:
        self._require(sums=True)
        return self.shift_b + self.sum_b / self.count

    def centered_aa(self) -> torch.Tensor:
        """``sum_i (a_i - mean_a)(a_i - mean_a)^T`` (scatter matrix, not divided by n)."""
        self._require(product="aa", sums=True)
        return torch.addr(self.aa, self.sum_a, self.sum_a, alpha=-1.0 / self.count)

    def centered_ab(self) -> torch.Tensor:
        self._require(product="ab", sums=True)
        return torch.addr(self.ab, self.sum_a, self.sum_b, alpha=-1.0 / self.count)

    def centered_bb(self) -> torch.Tensor:
        self._require(product="bb", sums=True)
        return torch.addr(self.bb, self.sum_b, self.sum_b, alpha=-1.0 / self.count)

    def raw_aa(self) -> torch.Tensor:
        """``sum_i a_i a_i^T`` (about zero, uncentred)."""
        self._require(product="aa")
        if not self.shift:
            return self.aa
        s = self.shift_a
        return self.aa + torch.outer(self.sum_a, s) + torch.outer(s, self.sum_a) + self.count * torch.outer(s, s)

    def raw_ab(self) -> torch.Tensor:
        self._require(product="ab")
        if not self.shift:
            return self.ab
        sa, sb = self.shift_a, self.shift_b
        return self.ab + torch.outer(self.sum_a, sb) + torch.outer(sa, self.sum_b) + self.count * torch.outer(sa, sb)

    def raw_bb(self) -> torch.Tensor:
        self._require(product="bb")
        if not self.shift:
            return self.bb
        s = self.shift_b
        return self.bb + torch.outer(self.sum_b, s) + torch.outer(s, self.sum_b) + self.count * torch.outer(s, s)

    def _squares(self, side: str) -> torch.Tensor:
        """Per-feature sums of squares about the shift, from the full product if kept."""
        full = getattr(self, side + side)
        if full is not None:
            return full.diagonal()
        self._require(product=f"{side}{side}_diag")
        return getattr(self, f"{side}{side}_diag")

    def centered_aa_diag(self) -> torch.Tensor:
        """``sum_i (a_i - mean_a)^2`` per feature: the diagonal of ``centered_aa()`` (needs ``aa`` or ``aa_diag``)."""
        self._require(sums=True)
        return self._squares("a") - self.sum_a**2 / self.count

    def centered_bb_diag(self) -> torch.Tensor:
        self._require(sums=True)
        return self._squares("b") - self.sum_b**2 / self.count

    def raw_aa_diag(self) -> torch.Tensor:
        """``sum_i a_i^2`` per feature (about zero)."""
        self._require()
        if not self.shift:
            return self._squares("a")
        return self._squares("a") + 2 * self.sum_a * self.shift_a + self.count * self.shift_a**2

    def raw_bb_diag(self) -> torch.Tensor:
        self._require()
        if not self.shift:
            return self._squares("b")
        return self._squares("b") + 2 * self.sum_b * self.shift_b + self.count * self.shift_b**2

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Tensors only (safetensors-ready); ``from_state_dict`` restores."""
        state = {"count": torch.tensor(self.count, dtype=torch.int64)}
        for field in _FIELDS:
            value = getattr(self, field)
            if value is not None:
                state[field] = value.detach().clone()  # a snapshot: later updates add in place
        return state

    #: The keys of ``state_dict()``: ``count`` always, the others where accumulated.
    STATE_KEYS = ("count", *_FIELDS)

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor], **options: object) -> CrossMoments:
        """Restore a ``state_dict``; ``options`` are the constructor's (``precision``, ``track_grad``; ``products``
        defaults to the products present in ``state``). Its keys are checked (``check_state``)."""
        check_state(state, ("count",), _FIELDS)
        options.setdefault("products", tuple(p for p in PRODUCTS if p in state) or SECOND_MOMENTS)
        options.setdefault("shift", "sum_a" in state or int(state["count"]) == 0)  # raw statistics keep no sums
        out = cls(**options)
        out.count = int(state["count"])
        for field in _FIELDS:
            value = state.get(field)
            setattr(out, field, None if value is None else value.clone())
        return out


def _shifted(block: torch.Tensor, shift: torch.Tensor, enabled: bool, in_place: bool) -> torch.Tensor:
    if not enabled:
        return block
    return block.sub_(shift.to(block.dtype)) if in_place else block - shift.to(block.dtype)
