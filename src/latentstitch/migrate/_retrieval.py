"""Retrieval over an index, the one place of its math: scores by metric, top-k search in blocks, the rank of each
query's relevant item, and the per-query measures (Recall@k, MRR@10, nDCG@10, top-k overlap) with bootstrap
intervals over queries.

Metrics, as the stores name them: ``"ip"`` (inner product, larger is closer), ``"cosine"`` (inner product of unit
vectors) and ``"l2"`` (Euclidean distance, smaller is closer; ranked by ``2 q.d - |d|^2``, the same order)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from latentstitch._core.arrays import tensor_view
from latentstitch._core.knn import row_blocks
from latentstitch._core.numerics import percentile_bootstrap_mean

METRICS = ("ip", "cosine", "l2")
#: The k of the measures (Recall@10, MRR@10, nDCG@10, top-10 overlap).
K = 10


def check_metric(metric: str, name: str = "metric") -> str:
    if metric not in METRICS:
        raise ValueError(f"{name}: expected one of {', '.join(METRICS)}, got {metric!r}")
    return metric


def prepare(vectors: np.ndarray | torch.Tensor, metric: str) -> torch.Tensor:
    """Float32 tensor of the vectors as the metric reads them: unit rows for cosine, unchanged otherwise."""
    # a store's rows are often read-only (LanceDB's Arrow buffers, a memory-mapped file): viewed, never written
    tensor = tensor_view(np.ascontiguousarray(vectors)) if isinstance(vectors, np.ndarray) else torch.as_tensor(vectors)
    tensor = tensor.to(torch.float32)
    if metric == "cosine":
        tensor = torch.nn.functional.normalize(tensor, dim=1)
    return tensor


def pair_scores(queries: np.ndarray, documents: np.ndarray, metric: str) -> np.ndarray:
    """The metric's value for row-aligned (query, document) pairs: similarity for ip/cosine, distance for l2."""
    q, d = prepare(queries, metric), prepare(documents, metric)
    if metric == "l2":
        return torch.linalg.vector_norm(q - d, dim=1).numpy()
    return (q * d).sum(dim=1).numpy()


def search(queries, index, k: int, metric: str) -> np.ndarray:
    """Positions (n_queries, k) of each query's k closest index rows under ``metric``, closest first."""
    return top_k(queries, index, k, metric)[1]


def top_k(queries, index, k: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """``search``'s positions with their ranking scores (n_queries, k): the similarity for ip / cosine, and for l2
    ``2 q.d - |d|^2`` (the same order as the distance; comparable across blocks of one index)."""
    q, x = prepare(queries, metric), prepare(index, metric)
    k = min(k, x.shape[0])
    out = np.empty((q.shape[0], k), dtype=np.int64)
    values = np.empty((q.shape[0], k), dtype=np.float32)
    squared = (x * x).sum(dim=1) if metric == "l2" else None
    with torch.no_grad():
        for start, stop in row_blocks(q.shape[0], x.shape[0]):
            scores = q[start:stop] @ x.T
            if squared is not None:
                scores = 2 * scores - squared[None, :]
            best = torch.topk(scores, k, dim=1)
            out[start:stop], values[start:stop] = best.indices.numpy(), best.values.numpy()
    return values, out


def scored_top_k(
    queries: torch.Tensor, index: torch.Tensor, norms: torch.Tensor, k: int, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    """``top_k`` over index rows as stored, with their Euclidean ``norms`` given (kept by a caller that searches the
    same rows again): ``queries`` already ``prepare``d; cosine divides each row's inner product by its norm (as
    ``prepare`` normalises: ``max(norm, 1e-12)``), l2 ranks by ``2 q.d - |d|^2``. The rows are never copied."""
    k = min(k, index.shape[0])
    out = np.empty((queries.shape[0], k), dtype=np.int64)
    values = np.empty((queries.shape[0], k), dtype=np.float32)
    with torch.no_grad():
        for start, stop in row_blocks(queries.shape[0], index.shape[0]):
            best = torch.topk(stored_scores(queries[start:stop], index, norms, metric), k, dim=1)
            out[start:stop], values[start:stop] = best.indices.numpy(), best.values.numpy()
    return values, out


def stored_scores(queries: torch.Tensor, index: torch.Tensor, norms: torch.Tensor, metric: str) -> torch.Tensor:
    """(n_queries, rows) ranking scores of ``prepare``d queries against index rows as stored, with their Euclidean
    ``norms``: cosine divides by the norm (``max(norm, 1e-12)``, as ``prepare``), l2 is ``2 q.d - |d|^2``."""
    scores = queries @ index.T
    if metric == "cosine":
        return scores / norms.clamp_min(1e-12)[None, :]
    if metric == "l2":
        return 2 * scores - (norms * norms)[None, :]
    return scores


def ranks(top: np.ndarray, relevant: np.ndarray) -> np.ndarray:
    """1-based rank of each query's relevant position in its top list; ``inf`` where it is not in the list."""
    hits = top == np.asarray(relevant)[:, None]
    found = hits.any(axis=1)
    return np.where(found, hits.argmax(axis=1) + 1.0, np.inf)


def per_query(rank: np.ndarray) -> dict[str, np.ndarray]:
    """Each query's Recall@1, Recall@10, reciprocal rank within 10 and nDCG@10 (one relevant item per query)."""
    within = rank <= K
    safe = np.where(within, rank, 1.0)
    return {
        "recall@1": (rank <= 1).astype(float),
        "recall@10": within.astype(float),
        "mrr@10": np.where(within, 1.0 / safe, 0.0),
        "ndcg@10": np.where(within, 1.0 / np.log2(safe + 1.0), 0.0),
    }


def overlap(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Per query, the share of the top-k list ``first`` that is also in ``second`` (same k)."""
    k = first.shape[1]
    return (first[:, :, None] == second[:, None, :]).any(axis=2).sum(axis=1) / k


def without_self(top: np.ndarray, self_rows: np.ndarray) -> np.ndarray:
    """Each row's top list without the query's own item, cut to one shorter than the list searched (10)."""
    k = top.shape[1] - 1
    out = np.empty((len(top), k), dtype=top.dtype)
    for i, (row, own) in enumerate(zip(top, self_rows, strict=True)):
        rest = row[row != own]
        out[i] = rest[:k]
    return out


@dataclass(frozen=True)
class Interval:
    """A mean over queries with its percentile-bootstrap interval (``level``), over ``n`` queries."""

    mean: float
    low: float
    high: float
    n: int
    level: float

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n, "level": self.level}

    def covers(self, value: float) -> bool:
        return self.low <= value <= self.high


def wilson(successes: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of a proportion: keeps its coverage near 0 and 1 and for few queries, where the
    bootstrap's interval collapses to a point (every held-out query found its document)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # the interval holds p exactly (rounding can leave 1 - 1e-16 above p = 1)
    return float(max(0.0, min(p, centre - half))), float(min(1.0, max(p, centre + half)))


def bootstrap_mean(values: np.ndarray, rng: np.random.Generator, level: float = 0.95, draws: int = 2000) -> Interval:
    """Mean of ``values`` and its interval over queries: Wilson's for hit-or-miss values (Recall@k), else the
    percentile bootstrap, resampling queries."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, level)
    if np.isin(values, (0.0, 1.0)).all():
        low, high = wilson(float(values.sum()), n, level)
        return Interval(float(values.mean()), low, high, n, level)
    low, high = percentile_bootstrap_mean(values, rng, draws, level)
    return Interval(float(values.mean()), low, high, n, level)


def bootstrap_difference(
    values: np.ndarray, rng: np.random.Generator, level: float = 0.95, draws: int = 2000
) -> Interval:
    """Mean of per-query paired differences and its percentile-bootstrap interval over queries. Never Wilson's:
    differences of hits (-1, 0, 1) that happen to hold no -1 are not a proportion (one query of 150 would look
    measurable)."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, level)
    low, high = percentile_bootstrap_mean(values, rng, draws, level)
    return Interval(float(values.mean()), low, high, len(values), level)


def summarise(rank: np.ndarray, rng: np.random.Generator, level: float = 0.95) -> dict[str, Interval]:
    """Every measure of ``per_query`` as a bootstrap interval."""
    return {name: bootstrap_mean(values, rng, level) for name, values in per_query(rank).items()}


def positions(index_ids: np.ndarray, wanted: Sequence, name: str) -> np.ndarray:
    """The row of each wanted id in ``index_ids``; a ValueError naming ``name`` lists ids that are not there (not
    indexed, or deleted from the index since)."""
    index_ids, wanted = np.asarray(index_ids), np.asarray(wanted)
    if index_ids.dtype.kind != wanted.dtype.kind:  # ids read from a CSV are strings; compare as text
        index_ids, wanted = index_ids.astype(str), wanted.astype(str)
    order = np.argsort(index_ids, kind="stable")
    where = np.searchsorted(index_ids[order], wanted)
    where = np.clip(where, 0, len(index_ids) - 1)
    found = index_ids[order][where] == wanted
    if not found.all():
        missing = wanted[~found]
        shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
        raise ValueError(
            f"{name}: {len(missing)} of {len(wanted)} ids are not in the index (never indexed, or deleted from it "
            f"since): {shown}"
        )
    return order[where]
