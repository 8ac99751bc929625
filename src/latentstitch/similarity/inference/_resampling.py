"""Seeded resampling of samples (rows): permutations for nulls, bootstrap draws, and Poisson row weights that do not
depend on how a stream is chunked.

Every generator here is a pure function of the seed, so the same permutations reach every measure, every pair of a
``pairwise`` search, a naive loop and a batched computation alike, on any device (they are drawn on the CPU with
numpy and moved).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from latentstitch._core.params import check_choice, check_positive_int, check_seed

GROUP_MODES = ("within", "whole")


@dataclass(frozen=True)
class Groups:
    """Group labels of the n samples, as consecutive integer codes, with what the permutation schemes need."""

    codes: np.ndarray  # (n,) int64 in [0, count)
    count: int

    @classmethod
    def of(cls, groups: object, n: int) -> Groups:
        labels = np.asarray(groups.detach().cpu() if isinstance(groups, torch.Tensor) else groups)
        if labels.ndim != 1 or labels.shape[0] != n:
            raise ValueError(f"groups: expected one label per sample ({n}), got shape {labels.shape}")
        _, codes = np.unique(labels, return_inverse=True)
        return cls(codes.astype(np.int64), int(codes.max()) + 1 if n else 0)

    def members(self) -> list[np.ndarray]:
        order = np.argsort(self.codes, kind="stable")
        bounds = np.cumsum(np.bincount(self.codes, minlength=self.count))[:-1]
        return np.split(order, bounds)


class Permutations:
    """Random permutations of n samples, drawn in batches from ``seed``.

    Plain: uniform over all n! orders (argsort of uniform keys, so a batch of B equals B draws of one). With
    ``groups`` and ``mode="within"``: rows move only within their group (restricted permutations: the null keeps the
    group structure, e.g. class membership, and tests what is shared beyond it). ``mode="whole"``: groups are
    exchanged as blocks among groups of the same size, rows keeping their order within a group (for dependent rows,
    e.g. several crops of one image).
    """

    def __init__(self, n: int, seed: int = 0, groups: object = None, mode: str = "within"):
        self.n = n
        self.seed = seed
        self.mode = check_choice(mode, "group_mode", GROUP_MODES)
        self.groups = None if groups is None else Groups.of(groups, n)
        if self.groups is not None and self.mode == "whole":
            self._blocks = self._exchangeable_blocks()

    def _exchangeable_blocks(self) -> list[np.ndarray]:
        """Per size class with at least two groups, a (groups, size) array of their members."""
        by_size: dict[int, list[np.ndarray]] = {}
        for rows in self.groups.members():
            by_size.setdefault(len(rows), []).append(rows)
        blocks = [np.stack(rows) for rows in by_size.values() if len(rows) > 1]
        if not blocks:
            raise ValueError(
                "groups: no two groups have the same size, so no whole-group permutation exists; use "
                "group_mode='within' (rows permuted inside their group)"
            )
        return blocks

    def batches(self, total: int, batch_size: int) -> Iterator[torch.Tensor]:
        """``total`` permutations as (B, n) int64 CPU tensors of at most ``batch_size`` rows (row b maps position i to
        the old row ``perm[b, i]``)."""
        rng = np.random.default_rng(self.seed)
        for start in range(0, total, batch_size):
            count = min(batch_size, total - start)
            yield torch.from_numpy(self._draw(rng, count))

    def _draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        if self.groups is None:
            return np.argsort(rng.random((count, self.n)), axis=1)
        if self.mode == "within":
            # sorting by (group, random key) lists each group's rows in random order; writing them back to the
            # group's positions (sorted by group, stable) permutes every group in place
            keys = self.groups.codes[None, :] + rng.random((count, self.n))
            shuffled = np.argsort(keys, axis=1)
            out = np.empty_like(shuffled)
            out[:, np.argsort(self.groups.codes, kind="stable")] = shuffled
            return out
        out = np.tile(np.arange(self.n), (count, 1))
        rows = np.arange(count)[:, None, None]
        for blocks in self._blocks:  # (groups, size): groups of one size swap places as wholes
            order = np.argsort(rng.random((count, blocks.shape[0])), axis=1)
            out[rows, blocks[None]] = blocks[order]
        return out


def group_members(groups: object, n: int) -> list[np.ndarray]:
    return Groups.of(groups, n).members()


def bootstrap_indices(n: int, replicates: int, seed: int, groups: object = None) -> Iterator[np.ndarray]:
    """Row indices of ``replicates`` bootstrap samples: n rows drawn with replacement, or (with ``groups``) as many
    groups drawn with replacement, each bringing all its rows (the cluster bootstrap)."""
    rng = np.random.default_rng(seed)
    if groups is None:
        for _ in range(replicates):
            yield rng.integers(0, n, size=n)
        return
    members = Groups.of(groups, n).members()
    for _ in range(replicates):
        yield np.concatenate([members[g] for g in rng.integers(0, len(members), size=len(members))])


def jackknife_blocks(n: int, blocks: int, seed: int, groups: object = None) -> list[np.ndarray]:
    """Rows to keep in each of the delete-a-block jackknife samples (for the BCa acceleration): the n rows (or the
    groups) split at random into ``blocks`` parts, each left out once."""
    rng = np.random.default_rng(seed)
    codes = np.arange(n) if groups is None else Groups.of(groups, n).codes
    units = int(codes.max()) + 1 if n else 0
    count = min(blocks, units)
    block_of_unit = rng.permutation(units) % count
    block_of_row = block_of_unit[codes]
    return [np.flatnonzero(block_of_row != block) for block in range(count)]


# --- row weights (Poisson, half) -----------------------------------------------------------------------------

_POISSON1_CDF = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(24)])
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = z + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


WEIGHT_SCHEMES = ("poisson", "half")


def row_weights(seed: int, start: int, stop: int, replicates: int, scheme: str = "poisson") -> np.ndarray:
    """Bootstrap weights ``(stop - start, replicates)`` of the rows ``start:stop`` of a stream.

    ``"poisson"``: Poisson(1) counts (a row may count 0, 1, 2... times: the Poisson bootstrap). ``"half"``: 0 or 1
    with probability 1/2 (each replicate a random half of the rows, without replacement: half-sampling). Each weight
    is a function of (seed, global row index, replicate) only (a SplitMix64 hash turned into a uniform number, then
    through the quantile function), so a stream gives every row the same weights however it is cut into chunks or
    spread over workers, and an in-memory computation can reproduce them.
    """
    check_positive_int(replicates, "replicates")
    check_choice(scheme, "scheme", WEIGHT_SCHEMES)
    seed = check_seed(seed)
    with np.errstate(over="ignore"):
        key = _splitmix64(np.array([seed], dtype=np.uint64))
        rows = _splitmix64(np.arange(start, stop, dtype=np.uint64)[:, None] ^ key)
        hashed = _splitmix64(rows + np.arange(replicates, dtype=np.uint64)[None, :] * _GOLDEN)
    uniform = (hashed >> np.uint64(11)).astype(np.float64) * 2.0**-53
    if scheme == "half":
        return (uniform < 0.5).astype(np.int64)
    return np.searchsorted(_POISSON1_CDF, uniform, side="right").astype(np.int64)


def weighted_indices(weights: np.ndarray, members: list[np.ndarray] | None = None) -> Iterator[np.ndarray]:
    """Row indices of each replicate (a column of ``weights``): every row repeated its weight times. With
    ``members`` (each group's rows), ``weights`` has one row per group and a group's rows take its weight."""
    for column in weights.T:
        if members is None:
            yield np.repeat(np.arange(weights.shape[0]), column)
        else:
            parts = [np.tile(members[g], int(w)) for g, w in enumerate(column) if w]
            yield np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
