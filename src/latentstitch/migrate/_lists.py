"""Inverted lists over the new collection's fixed rows: the cascade's search of a large collection reads a few lists
of rows per query, not every row.

The exact search of the collection (``_cascade``) multiplies every row it holds on every call: at 1M rows with 5%
re-embedded (a FAISS collection of 50,000 rows and growing), one query a call, it cost 7-10x the old IVF store's own
search (results/migration/cascade-union). ``CollectionLists`` partitions the rows of the collection's keyed blocks
(``NewCollection.blocks`` with a key: content that never changes, a FAISS collection's index file and part files)
as FAISS's ``IndexIVFFlat`` does: k-means centroids in the metric's space (``_core.kmeans``, seeded, 10
Lloyd iterations from distinct sampled rows, on ``SAMPLE_PER_LIST`` rows per list), about sqrt(rows) lists (at
most ``MAX_LISTS``), each row in the list of its best centroid, and each query reads the rows of its ``probes`` best
lists exactly (``probes``: at least ``MIN_PROBES``, and enough lists to hold ``ROWS_PER_DEPTH`` x depth rows on
average). A row in a list not probed is missed: the collection's top ``depth`` becomes approximate. It only gives
candidates, which the new model ranks with the old store's; measured against the exact search on the 1M-row run
(``benchmarks migration_scale``).

What is kept with the open collection: the centroids, fitted once the keyed rows reach ``LIST_ROWS`` and again
each time they have grown ``REFIT_GROWTH``-fold since (every list then assigned again), and each keyed block's rows
by list (computed once per block: a part file the cascade writes costs its own rows; a rewritten index file costs its
rows once). Rows in blocks without a key (an ``.npy``, LanceDB or Qdrant collection, whose content may change under
the same name) are searched exactly as before.

Cost per query: the centroids (lists x dimension) and the probed lists' rows (about probes / lists of the rows)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from latentstitch._core.kmeans import kmeans
from latentstitch.migrate._retrieval import stored_scores

#: Keyed rows from which a collection's search reads inverted lists instead of every row.
LIST_ROWS = 32768
#: Rows of the k-means sample per list.
SAMPLE_PER_LIST = 40
#: Lists at most.
MAX_LISTS = 1024
#: Lists a query reads at least.
MIN_PROBES = 16
#: Rows a query reads on average, per candidate asked for (``depth``).
ROWS_PER_DEPTH = 8
#: The centroids are fitted again once the keyed rows have grown this many times since they were fitted.
REFIT_GROWTH = 4
#: Lloyd iterations of the centroids' k-means.
LLOYD_ITERATIONS = 10
#: Keyed blocks of at most this many rows (part files a few searches wrote) are read whole, all at once (``_cascade``):
#: cheaper than their lists.
EXACT_BLOCK_ROWS = 2048


def list_count(rows: int) -> int:
    """About sqrt(rows) lists, at most ``MAX_LISTS`` (FAISS's guidance for an IVF index)."""
    return max(1, min(MAX_LISTS, round(math.sqrt(rows))))


class CollectionLists:
    """The inverted lists of one open collection's keyed blocks, under one metric (see the module)."""

    def __init__(self, metric: str, seed: int = 0):
        self.metric, self.seed = metric, seed
        self.centroids: torch.Tensor | None = None
        self.fitted_rows = 0
        #: block key -> ``_lists_of``'s (rows in list order, their norms, their positions in the block, each list's
        #: first position in that order)
        self.by_key: dict[Any, tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]] = {}

    def _space(self, rows: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
        """The rows where the lists are drawn: unit rows for cosine, as stored otherwise."""
        return rows / norms.clamp_min(1e-12)[:, None] if self.metric == "cosine" else rows

    @property
    def _scored_as(self) -> str:
        """How rows in ``_space`` are scored: by inner product (ip; cosine, whose rows there are unit), else l2."""
        return "l2" if self.metric == "l2" else "ip"

    def _centroid_scores(self, x: torch.Tensor) -> torch.Tensor:
        """(n, lists): larger is closer; inner product for ip (as FAISS's IVF of inner product), else the
        Euclidean order ``2 x.c - |c|^2`` (for unit rows, the cosine's)."""
        norms = torch.linalg.vector_norm(self.centroids, dim=1)
        return stored_scores(x, self.centroids, norms, "ip" if self.metric == "ip" else "l2")

    def fit(self, blocks: list[tuple[Any, torch.Tensor, torch.Tensor]]) -> None:
        """The centroids from a seeded sample of the keyed blocks' rows ((key, rows, norms) each)."""
        sizes = np.asarray([len(rows) for _, rows, _ in blocks])
        total = int(sizes.sum())
        lists = list_count(total)
        rng = np.random.default_rng(self.seed)
        picked = np.sort(rng.choice(total, size=min(total, SAMPLE_PER_LIST * lists), replace=False))
        starts = np.concatenate([[0], np.cumsum(sizes)])
        sample = []
        for (_, rows, norms), start, stop in zip(blocks, starts[:-1], starts[1:], strict=True):
            local = torch.as_tensor(picked[(picked >= start) & (picked < stop)] - start)
            sample.append(self._space(rows[local], norms[local]))
        x = torch.cat(sample).to(torch.float32)
        init = x[torch.as_tensor(rng.choice(len(x), size=lists, replace=False))]
        self.centroids = kmeans(x, lists, rng, init=init, max_iter=LLOYD_ITERATIONS).contiguous()
        self.fitted_rows = total
        self.by_key.clear()

    def _lists_of(self, key: Any, rows: torch.Tensor, norms: torch.Tensor):
        """A keyed block's rows in list order, as the metric scores them (unit rows for cosine; a copy, kept: a probed
        list is then one contiguous slice), their norms, their positions in the block, and each list's first position
        (lists + 1)."""
        kept = self.by_key.get(key)
        if kept is None:
            space = self._space(rows, norms)
            assigned = self._centroid_scores(space).argmax(dim=1)
            order = torch.argsort(assigned, stable=True)
            first = torch.zeros(len(self.centroids) + 1, dtype=torch.int64)
            first[1:] = torch.cumsum(torch.bincount(assigned, minlength=len(self.centroids)), dim=0)
            kept = self.by_key[key] = (space[order].contiguous(), norms[order], order, first.tolist())
        return kept

    def probes(self, depth: int) -> int:
        lists = len(self.centroids)
        return min(lists, max(MIN_PROBES, math.ceil(ROWS_PER_DEPTH * depth * lists / max(1, self.fitted_rows))))

    def probed(self, queries: torch.Tensor, depth: int) -> torch.Tensor:
        """(n, lists) bool: the lists each ``prepare``d query reads."""
        scores = self._centroid_scores(queries)
        best = torch.topk(scores, self.probes(depth), dim=1).indices
        mask = torch.zeros(scores.shape, dtype=torch.bool)
        mask.scatter_(1, best, True)
        return mask

    def block_top(
        self, key: Any, rows: torch.Tensor, norms: torch.Tensor, queries: torch.Tensor, probed: torch.Tensor, depth: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each query's best ``depth`` rows of one keyed block among its probed lists: (values, positions in the
        block), ``-inf`` where the lists a query reads hold fewer rows. Each list any query reads is scored in place
        (a slice of the block in list order) for every query of the call, and masked for those that do not read it."""
        ordered, ordered_norms, order, first = self._lists_of(key, rows, norms)
        wanted = torch.nonzero(probed.any(dim=0)).flatten().tolist()  # the lists any query of the call reads
        wanted = [number for number in wanted if first[number + 1] > first[number]]  # those holding rows
        if not wanted:
            empty = torch.full((len(queries), 0), float("-inf"))
            return empty, torch.zeros((len(queries), 0), dtype=torch.int64)
        scores, found = [], []
        for number in wanted:
            start, stop = first[number], first[number + 1]
            part = stored_scores(queries, ordered[start:stop], ordered_norms[start:stop], self._scored_as)
            if len(queries) > 1:
                part = part.masked_fill(~probed[:, number : number + 1], float("-inf"))
            scores.append(part)
            found.append(order[start:stop])
        scores, found = torch.cat(scores, dim=1), torch.cat(found)
        best = torch.topk(scores, min(depth, scores.shape[1]), dim=1)
        return best.values, found[best.indices]
