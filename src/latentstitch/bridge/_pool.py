"""What a bridged held-out anchor is scored against: every target vector the user gave (the *pool*), as the old
model's index or head sees them.

For each held-out anchor i (a *query*) the route gives a similarity to every one of the N target items (cosine for a
translation route; cosine between relative vectors for a relative route). From one row of similarities come the
per-item scores the selection reads (``ITEM_SCORES``):

- ``rr``: the reciprocal rank of the item's own partner among all N target items (MRR is its mean; chance H_N / N);
- ``top1``: 1 when the own partner is the most similar of the N;
- ``hit_k``: 1 when the own partner is among the k most similar (Recall@k of the old index; k = ``RECALL_K``);
- ``jaccard``: neighbourhood agreement, |A & B| / |A | B| of the k target items most similar to the bridged vector
  and the k most similar to the true target vector (both leave out the item itself): does the bridged vector have
  the neighbours the old model gives the item?

Translation routes add ``sq_error`` and ``sq_total`` per item (squared distance to the partner in the target's own
units, and to the held-out partners' mean) for a variance-weighted R^2, which weights every target feature by its
own variance (a near-dead feature counts as little as it varies), and the same with every feature standard-scaled
(``r2_scaled``: what a consumer that standard-scales its input reads, where a near-dead feature counts as much as
any other).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.numerics import matmul, unit_rows
from latentstitch.bridge._validate import as_anchor_array
from latentstitch.distributed import is_dask_array

#: k of Recall@k and of the neighbourhoods compared by ``jaccard``.
RECALL_K = 10
#: Most held-out anchors scored per fit (drawn at random, the same for every route): the similarity rows against all
#: N target items cost N x features each, so a cap keeps large anchor sets fast; 1,000 items give a standard error
#: near 0.015 on MRR and Recall@k.
MAX_QUERIES = 1000
ITEM_SCORES = ("rr", "top1", "hit_k", "jaccard")
#: Most ``target_pool`` vectors (``Bridge.fit``) a fit ranks the held-out anchors among (drawn at random above it):
#: Recall@10 among 20,000 vectors already tells a route that finds an item's neighbourhood from one that finds the
#: item, and the cost (queries x pool x features per route and fold) stays in seconds.
MAX_POOL = 20_000


@dataclass
class Pool:
    """The N target vectors (as tensors in the compute precision) and, per query item, its true neighbourhood."""

    target: torch.Tensor
    k: int = RECALL_K
    unit: torch.Tensor = field(init=False)
    _neighbours: dict[int, np.ndarray] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.unit = unit_rows(self.target, "target", eps=1e-30)
        self.k = max(1, min(self.k, self.target.shape[0] - 2))

    @property
    def size(self) -> int:
        return self.target.shape[0]

    def neighbours(self, items: np.ndarray) -> np.ndarray:
        """(len(items), k) indices of each item's k nearest other target items by cosine (cached per item)."""
        missing = np.asarray([i for i in items if int(i) not in self._neighbours], dtype=np.int64)
        if missing.size:
            sims = matmul(self.unit[torch.as_tensor(missing, device=self.unit.device)], self.unit.T)
            sims[torch.arange(missing.size), torch.as_tensor(missing, device=sims.device)] = -torch.inf
            top = torch.topk(sims, self.k, dim=1).indices.cpu().numpy()
            self._neighbours.update(zip(missing.tolist(), top, strict=True))
        return np.stack([self._neighbours[int(i)] for i in items])


def partner_ranks(sims: torch.Tensor, items: np.ndarray) -> torch.Tensor:
    """Rank (1 = first, float64) of each row's own partner ``items[r]`` among the N target items of its similarity
    row: one plus the count of larger similarities (no sort), ties sharing the mean of their ranks."""
    with torch.no_grad():
        sims = sims.detach()
        rows = torch.arange(len(items), device=sims.device)
        own = sims[rows, torch.as_tensor(items, device=sims.device)][:, None]
        above = (sims > own).sum(dim=1).to(torch.float64)
        tied = (sims == own).sum(dim=1).to(torch.float64) - 1
        return 1 + above + tied / 2


def rank_scores(rank: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """The per-item scores read from the partner's rank alone: ``rr``, ``top1``, ``hit_k``."""
    return {"rr": 1.0 / rank, "top1": (rank == 1).astype(np.float64), "hit_k": (rank <= k).astype(np.float64)}


def item_scores(sims: torch.Tensor, items: np.ndarray, pool: Pool) -> dict[str, np.ndarray]:
    """Per-item scores of one route's similarity rows ``sims`` (len(items), N): row r is item ``items[r]``'s
    bridged vector against every target item. Ties share the mean of their ranks (a route mapping everything to one
    vector ranks every partner (N + 1) / 2, not first)."""
    with torch.no_grad():
        sims = sims.detach()
        index = torch.as_tensor(items, device=sims.device)
        rank = partner_ranks(sims, items)
        # the k most similar other items: the k + 1 most similar without the item itself (no masked copy of sims)
        top = torch.topk(sims, min(pool.k + 1, sims.shape[1]), dim=1).indices
        others = top != index[:, None]
        first = torch.cumsum(others, dim=1) <= pool.k
        bridged_top = top[others & first].reshape(len(items), -1)[:, : pool.k].cpu().numpy()
    rank = rank.cpu().numpy()
    true_top = pool.neighbours(items)
    shared = (bridged_top[:, :, None] == true_top[:, None, :]).any(axis=2).sum(axis=1)
    return {**rank_scores(rank, pool.k), "jaccard": shared / (2 * pool.k - shared)}


def translation_sims(bridged: torch.Tensor, pool: Pool) -> torch.Tensor:
    """Cosine of each bridged vector (target space) to every target item."""
    return matmul(unit_rows(bridged.to(pool.unit.dtype), "bridged", eps=1e-30), pool.unit.T)


def squared_errors(bridged: torch.Tensor, partner: torch.Tensor, scale: torch.Tensor) -> dict[str, np.ndarray]:
    """Per item: squared distance to the partner and to the partners' mean, in the target's own units and with every
    feature divided by ``scale`` (as a standard-scaling consumer reads them), in float64."""
    b, p = bridged.to(torch.float64), partner.to(torch.float64)
    error, spread = (p - b) ** 2, (p - p.mean(dim=0)) ** 2
    variance = scale.to(device=b.device, dtype=torch.float64) ** 2
    return {
        "sq_error": error.sum(dim=1).cpu().numpy(),
        "sq_total": spread.sum(dim=1).cpu().numpy(),
        "sq_error_scaled": (error / variance).sum(dim=1).cpu().numpy(),
        "sq_total_scaled": (spread / variance).sum(dim=1).cpu().numpy(),
    }


def r_squared(errors: dict[str, np.ndarray]) -> tuple[float, float]:
    """A fold's R^2 in the target's own units and with standard-scaled features, from ``squared_errors``."""
    total, scaled_total = errors["sq_total"].sum(), errors["sq_total_scaled"].sum()
    r2 = float(1.0 - errors["sq_error"].sum() / total) if total > 0 else math.nan
    r2_scaled = float(1.0 - errors["sq_error_scaled"].sum() / scaled_total) if scaled_total > 0 else math.nan
    return r2, r2_scaled


def scored_folds(parts: list[np.ndarray], cap: int = MAX_QUERIES, least: int = 3) -> int:
    """How many of the folds (the first ones; the folds are a random partition) are scored: all of them, unless
    fewer (at least ``least``) already hold ``cap`` held-out anchors. The scored anchors are capped at ``cap`` in
    all (``query_rows``), so a further fold adds no scored anchor, only its own decompositions: with 5,000 anchors
    in 5 folds, 3 folds of 1,000 give the same 1,000 scored anchors as 5, each map still fitted on 4/5 of them."""
    held = 0
    for count, part in enumerate(parts, start=1):
        held += len(part)
        if count >= least and held >= cap:
            return count
    return len(parts)


def query_rows(parts: list[np.ndarray], seed: int, cap: int = MAX_QUERIES) -> list[np.ndarray]:
    """The held-out rows scored in each fold: all of them, or (above ``cap`` anchors in all) the same share of every
    fold, drawn with ``seed``."""
    total = sum(len(p) for p in parts)
    if total <= cap:
        return [np.sort(p) for p in parts]
    rng = np.random.default_rng([seed, 7])
    return [np.sort(rng.choice(p, size=max(1, round(len(p) * cap / total)), replace=False)) for p in parts]


def pool_rows(
    pool: Any, target: torch.Tensor, seed: int, cap: int | None = None
) -> tuple[torch.Tensor | None, list[str]]:
    """The ``target_pool`` rows a fit ranks against (at most ``cap``, drawn with ``seed``; rows equal to an anchor's
    target vector left out) in ``target``'s dtype and device, and what was done, in words. Only the drawn rows are
    read (a dask array computes those alone). ``cap``: default ``MAX_POOL``."""
    if pool is None:
        return None, []
    rows, given, repeats = side_pool(pool, target, seed, "target_pool", cap)
    anchors = target.shape[0]
    notes = [
        f"held-out anchors were ranked among the {anchors:,} target anchors and {rows.shape[0]:,} target_pool vectors"
        + (f" (drawn at random from {given:,})" if given > rows.shape[0] + repeats else "")
    ]
    if repeats:
        notes.append(
            f"{repeats:,} target_pool rows equal to an anchor's target vector were left out (the anchors themselves, "
            "or duplicates of them)"
        )
    return rows, notes


def source_pool_rows(pool: Any, source: torch.Tensor, seed: int) -> tuple[torch.Tensor | None, list[str]]:
    """The ``source_pool`` rows the semi-supervised routes are fitted with (at most ``MAX_POOL``, drawn with
    ``seed``; rows equal to any anchor's source vector left out, so no held-out anchor can be matched as a
    pseudo-pair), and what was done, in words."""
    if pool is None:
        return None, []
    rows, given, repeats = side_pool(pool, source, seed, "source_pool")
    notes = []
    if given > rows.shape[0] + repeats:
        notes.append(f"source_pool: {rows.shape[0]:,} of its {given:,} rows were used (drawn at random, seed)")
    if repeats:
        notes.append(
            f"{repeats:,} source_pool rows equal to an anchor's source vector were left out (the anchors themselves, "
            "or duplicates of them): a held-out anchor never enters a route's fit"
        )
    return rows, notes


def side_pool(
    pool: Any, anchors: torch.Tensor, seed: int, name: str, cap: int | None = None
) -> tuple[torch.Tensor, int, int]:
    """One side's pool (``name``: "source_pool" or "target_pool"), checked against that side's ``anchors``: at most
    ``cap`` rows (default ``MAX_POOL``) drawn with ``seed`` (only those are read), rows equal to an anchor's vector
    left out, in the anchors' dtype and device; with the rows given and the rows left out."""
    cap = MAX_POOL if cap is None else cap
    side, model = ("target", "old") if name == "target_pool" else ("source", "new")
    if not is_dask_array(pool):  # lists and other array-likes as numpy, as for the anchors
        pool = as_anchor_array(pool, name)
    if getattr(pool, "ndim", None) != 2:
        raise ValueError(f"{name}: expected a 2-D array (vectors x features), got shape {tuple(pool.shape)}")
    given, width = int(pool.shape[0]), int(pool.shape[1])
    if width != anchors.shape[1]:
        raise ValueError(
            f"{name}: has {width} features but {side} has {anchors.shape[1]}; give the {model} model's vectors"
        )
    if given == 0:
        raise ValueError(f"{name}: expected at least one vector, got 0 rows")
    drawn = pool_draw(given, anchors.shape[0], seed, cap)
    rows = pool if drawn is None else pool[drawn]
    rows = rows.compute() if is_dask_array(rows) else rows
    rows = as_float_tensor(rows, name, ndim=2)
    if rows.device != anchors.device:
        raise ValueError(f"{name} is on device {rows.device} but {side} is on {anchors.device}; move it")
    rows = rows.detach().to(anchors.dtype)
    keep = ~_rows_in(rows, anchors)
    repeats = int((~keep).sum())
    rows = rows[torch.as_tensor(keep, device=rows.device)]
    if rows.shape[0] > cap:  # a random cap of them, in the pool's order
        pick = np.sort(np.random.default_rng([seed, 14]).choice(rows.shape[0], size=cap, replace=False))
        rows = rows[torch.as_tensor(pick, device=rows.device)]
    if rows.shape[0] == 0:
        raise ValueError(f"{name}: every row is one of the anchors' {side} vectors; give the other items' vectors")
    return rows, given, repeats


def pool_draw(given: int, anchors: int, seed: int, cap: int | None = None) -> np.ndarray | None:
    """The sorted rows of a ``given``-row pool a fit reads, or None for all: above ``cap`` + ``anchors`` rows (room
    for every anchor to be among them and still keep ``cap`` others), that many drawn at random with ``seed``. A
    reader of a large file (``latentstitch bridge fit --target-pool``) reads only these. ``cap``: default
    ``MAX_POOL``."""
    cap = MAX_POOL if cap is None else cap
    if given <= cap + anchors:
        return None
    return np.sort(np.random.default_rng([seed, 13]).choice(given, size=cap + anchors, replace=False))


def _rows_in(rows: torch.Tensor, reference: torch.Tensor) -> np.ndarray:
    """Whether each row of ``rows`` equals (bit for bit) a row of ``reference`` (same dtype)."""

    def keys(x: torch.Tensor) -> np.ndarray:
        a = np.ascontiguousarray(x.cpu().numpy())
        return a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).ravel()

    known = set(keys(reference).tolist())
    return np.fromiter((key in known for key in keys(rows).tolist()), dtype=bool, count=rows.shape[0])
