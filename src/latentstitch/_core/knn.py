"""Nearest neighbours by inner product, chunk by chunk: memory O(chunk x n), never n x n.

``top_k`` finds each query's k most similar rows of an index (cosine similarity when the rows are unit-normalised),
``row_blocks`` the chunks it works in, and ``shared_neighbours`` how many neighbours two lists of the same rows have
in common, ``mutual_nearest`` and ``csls_nearest`` the nearest rows across two sets (plain cosine, or CSLS with the
stochastic induction of VecMap). Used by the neighbourhood similarity measures and by the matching steps of
alignment.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from latentstitch._core.numerics import matmul

#: Elements of one (chunk, n) similarity block: near 64 MiB in float32 for n = 20k.
CHUNK_ELEMENTS = 1 << 24


def row_blocks(n_queries: int, n_index: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of consecutive query rows whose (rows, n_index) block holds about ``CHUNK_ELEMENTS``."""
    rows = max(1, CHUNK_ELEMENTS // max(n_index, 1))
    for start in range(0, n_queries, rows):
        yield start, min(start + rows, n_queries)


def top_k(queries: torch.Tensor, index: torch.Tensor, k: int, exclude_self: bool = False) -> torch.Tensor:
    """Indices (n_queries, k) of each query's k most similar index rows by inner product, most similar first.
    With ``exclude_self``, query i never retrieves index row i (queries and index are the same samples)."""
    out = torch.empty(queries.shape[0], k, dtype=torch.long, device=queries.device)
    with torch.no_grad():
        for start, stop in row_blocks(queries.shape[0], index.shape[0]):
            scores = matmul(queries[start:stop], index.T)
            if exclude_self:
                own = torch.arange(start, stop, device=scores.device)
                scores[own - start, own] = -torch.inf
            out[start:stop] = torch.topk(scores, k, dim=1).indices
    return out


def shared_neighbours(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per row, the number of indices that two (n, k) neighbour lists share."""
    return (a[:, :, None] == b[:, None, :]).any(dim=2).sum(dim=1)


def mutual_nearest(queries: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs ``(i, j)`` of mutual nearest neighbours by inner product: index row j is query i's most similar and
    query i is index row j's most similar. Chunked like ``top_k``: memory O(chunk x n_index)."""
    best = torch.empty(queries.shape[0], dtype=torch.long, device=queries.device)
    column_score = torch.full((index.shape[0],), -torch.inf, dtype=queries.dtype, device=queries.device)
    column_best = torch.zeros(index.shape[0], dtype=torch.long, device=queries.device)
    with torch.no_grad():
        for start, stop in row_blocks(queries.shape[0], index.shape[0]):
            scores = matmul(queries[start:stop], index.T)
            best[start:stop] = scores.argmax(dim=1)
            value, where = scores.max(dim=0)
            better = value > column_score
            column_score = torch.where(better, value, column_score)
            column_best = torch.where(better, where + start, column_best)
    rows = torch.arange(queries.shape[0], device=queries.device)
    mutual = column_best[best] == rows
    return rows[mutual], best[mutual]


@dataclass(frozen=True)
class CslsMatch:
    """The nearest neighbours of two sets of unit rows under CSLS (``csls_nearest``): ``forward[i]``, source row i's
    best target row; ``backward[j]``, target row j's best source row; ``forward_similarity`` and
    ``backward_similarity``, each row's largest plain cosine (VecMap's objective is their mean)."""

    forward: torch.Tensor
    backward: torch.Tensor
    forward_similarity: torch.Tensor
    backward_similarity: torch.Tensor

    def mutual(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Pairs ``(i, j)`` that are each other's nearest: ``forward[i] == j`` and ``backward[j] == i``."""
        rows = torch.arange(self.backward.shape[0], device=self.backward.device)
        mutual = self.forward[self.backward] == rows
        return self.backward[mutual], rows[mutual]

    def union(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every row's nearest, both directions (VecMap's ``--direction union``): ``(i, forward[i])`` for every
        source row, then ``(backward[j], j)`` for every target row."""
        n, m = self.forward.shape[0], self.backward.shape[0]
        device = self.forward.device
        return (
            torch.cat([torch.arange(n, device=device), self.backward]),
            torch.cat([self.forward, torch.arange(m, device=device)]),
        )


def csls_nearest(
    source: torch.Tensor, target: torch.Tensor, k: int = 10, keep: float = 1.0, generator: torch.Generator | None = None
) -> CslsMatch:
    """Nearest neighbours in both directions under CSLS (Conneau et al., ICLR 2018) between unit rows ``source``
    (n, d) and ``target`` (m, d): ``CSLS(i, j) = 2 cos(i, j) - r_target(i) - r_source(j)``, with ``r_target(i)`` the
    mean cosine of source row i to its k nearest target rows and ``r_source(j)`` that of target row j to its k
    nearest source rows (hubs, near many rows, are penalised). With ``keep`` < 1, each candidate of each direction
    is kept with that probability (VecMap's stochastic dictionary induction, Artetxe et al., ACL 2018; a dropped
    candidate cannot be chosen: drawn as the geometric rank of the first survivor among each row's best, ``_survivor``).

    Chunked as ``top_k``: two passes over (chunk, m) blocks of cosines (the first for the neighbourhood means, the
    second for the choices), memory O(chunk x m + k x m); when the whole n x m block fits one chunk
    (``CHUNK_ELEMENTS``), it is kept between the passes instead of recomputed."""
    n, m = source.shape[0], target.shape[0]
    near_target, near_source = min(k, m), min(k, n)
    with torch.no_grad():
        r_target = torch.empty(n, dtype=source.dtype, device=source.device)
        forward_best = torch.empty(n, dtype=source.dtype, device=source.device)
        column_top = torch.full((near_source, m), -torch.inf, dtype=source.dtype, device=source.device)
        kept: list[torch.Tensor] = []
        small = n * m <= CHUNK_ELEMENTS
        for start, stop in row_blocks(n, m):
            sims = matmul(source[start:stop], target.T)
            top = torch.topk(sims, near_target, dim=1).values
            r_target[start:stop], forward_best[start:stop] = top.mean(dim=1), top[:, 0]
            block_top = torch.topk(sims, min(near_source, stop - start), dim=0).values
            if start == 0 and block_top.shape[0] == near_source:  # merging with the -inf start would return it
                column_top = block_top
            else:
                column_top = torch.topk(torch.cat([column_top, block_top]), near_source, dim=0).values
            if small:
                kept.append(sims)
        r_source, backward_best = column_top.mean(dim=0), column_top[0]
        depth = _depth(keep, max(n, m))
        forward = torch.empty(n, dtype=torch.long, device=source.device)
        column_scores = torch.full((min(depth, n), m), -torch.inf, dtype=source.dtype, device=source.device)
        column_rows = torch.zeros((min(depth, n), m), dtype=torch.long, device=source.device)
        for number, (start, stop) in enumerate(row_blocks(n, m)):
            sims = kept[number] if small else matmul(source[start:stop], target.T)
            # CSLS / 2 up to the row's own r term, which does not change the row's choice
            if depth == 1:  # the best alone (keep 1): max is the top-1 of topk at a fraction of its cost
                forward[start:stop] = (sims - r_source[None, :] / 2).argmax(dim=1)
                block = sims.sub_(r_target[start:stop, None] / 2).max(dim=0, keepdim=True)
            else:
                ahead = torch.topk(sims - r_source[None, :] / 2, min(depth, m), dim=1).indices
                forward[start:stop] = _survivor(ahead, keep, generator, dim=1)
                block = torch.topk(sims.sub_(r_target[start:stop, None] / 2), min(depth, stop - start), dim=0)
            values = torch.cat([column_scores, block.values])
            rows = torch.cat([column_rows, block.indices + start])
            column_scores, order = torch.topk(values, column_scores.shape[0], dim=0)
            column_rows = torch.gather(rows, 0, order)
        backward = _survivor(column_rows, keep, generator, dim=0)
    return CslsMatch(forward, backward, forward_best, backward_best)


#: Stochastic induction looks this far down each row's ranking: every candidate above is dropped with probability
#: below this (then the last one looked at is taken).
_MISS = 1e-6


def _depth(keep: float, size: int) -> int:
    """How many best candidates a stochastic choice needs: ``(1 - keep)^depth <= _MISS`` (1 when ``keep`` >= 1)."""
    if keep >= 1.0:
        return 1
    return max(1, min(size, math.ceil(math.log(_MISS) / math.log1p(-keep))))


def _survivor(ranked: torch.Tensor, keep: float, generator: torch.Generator | None, dim: int) -> torch.Tensor:
    """The best candidate that survives when each is kept with probability ``keep``, from candidates ranked best
    first along ``dim``: the rank of the first survivor is geometric (failures before the first success), so one
    draw per row replaces a draw per candidate (the same choice in distribution as dropping every entry)."""
    if keep >= 1.0 or ranked.shape[dim] == 1:
        return ranked.select(dim, 0)
    count = ranked.shape[1 - dim]
    uniform = torch.rand(count, generator=generator, dtype=torch.float64, device=ranked.device)
    rank = torch.floor(torch.log1p(-uniform) / math.log1p(-keep)).clamp(max=ranked.shape[dim] - 1).long()
    return torch.gather(ranked, dim, rank.unsqueeze(dim)).squeeze(dim)
