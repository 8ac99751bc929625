"""Nearest neighbours by inner product, chunk by chunk: memory O(chunk x n), never n x n.

``top_k`` finds each query's k most similar rows of an index (cosine similarity when the rows are unit-normalised),
``row_blocks`` the chunks it works in, and ``shared_neighbours`` how many neighbours two lists of the same rows have
in common. Used by the neighbourhood similarity measures and by the matching steps of alignment.
"""

from __future__ import annotations

from collections.abc import Iterator

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
