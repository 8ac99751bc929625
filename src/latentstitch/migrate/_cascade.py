"""Cascade search: the new model's answers over an index still embedded by the old one, re-embedding only what the
queries touch.

For each new-model query the candidates come from two sources: the query-side bridge maps it into the old space and
the old store's own search (FAISS, LanceDB, Chroma, Qdrant, Milvus Lite; exact for embedding files) recalls
``depth`` of them; and the new collection itself, searched exactly with the new query in the new space, gives its
own top ``depth`` (the documents re-embedded up front and every candidate earlier searches wrote: no bridge
between). Each candidate's new-model vector is read from the new collection, or computed by ``new_vectors(ids)`` and
written there (once, under the collection's lock: ``_collection``); the candidates are ranked by the new model under
the migration's metric and the top ``k`` returned. As queries come, the new collection fills; once it holds every
id its own search is the new model's exact search and the old index is no longer needed
(``CascadeStatus.complete``: the cut-over).

The answer is the new model's exact top-k over the documents whose new vector is known whenever the candidates hold
that top-k: the bridge only has to recall, not to rank, and only what the collection does not hold yet
(``tests/migrate/test_cascade.py``).

Cost of the collection's search (``collection_search``): below ``_lists.LIST_ROWS`` fixed rows (and for an ``.npy``,
LanceDB or Qdrant collection, whose blocks may change) it reads every vector the collection holds, ``HELD_ROWS``
rows at a time (memory: one block and an (n, depth + block) score array per query block): n x rows held x dimension
multiply-adds per call, an exact (flat) search. An ``.npy`` collection (written in place) is read whole, its norms
computed again on every call. A FAISS collection's rows are read in place with their norms kept; once it holds
``LIST_ROWS`` of them ("auto", the default) its search reads inverted lists (``_lists``: k-means centroids, each
query reads its few best lists; an approximate top ``depth``, and a second copy of those rows in list order kept with
the open collection). "exact" always reads every row; "off" (False) searches only the old store. Measured at 1M
rows with 5% re-embedded, one query a call: ``results/migration/cascade-lists``."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import as_float_tensor, to_numpy
from latentstitch._core.params import check_positive_int
from latentstitch.migrate import _lists
from latentstitch.migrate._collection import NewCollection, open_collection
from latentstitch.migrate._retrieval import prepare, scored_top_k
from latentstitch.migrate.stores import StoreError, VectorStore, open_store

#: A fitted ``Migration`` (not imported here: ``Migration.search`` imports this module).
Migration = Any


@dataclass(frozen=True)
class CascadeResult:
    """The top ``k`` of each query: ``ids`` (n, k) and ``scores`` (n, k), the metric's value in the new space
    (similarity for ip / cosine, larger first; distance for l2, smaller first). ``candidates``: the distinct
    documents the queries recalled; ``reused``: those whose new vector the new collection already held;
    ``embedded``: those this search computed with ``new_vectors`` and wrote (another search may have written some
    of them first: ``written`` counts the rows this one added); ``from_collection``: those only the new
    collection's own search recalled (the old store's answers did not hold them; each is among ``reused``)."""

    ids: np.ndarray
    scores: np.ndarray
    candidates: int
    reused: int
    embedded: int
    written: int
    from_collection: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ids": self.ids.tolist(),
            "scores": self.scores.tolist(),
            "candidates": self.candidates,
            "reused": self.reused,
            "embedded": self.embedded,
            "written": self.written,
            "from_collection": self.from_collection,
        }


def _open_old(store: Any) -> VectorStore:
    if isinstance(store, VectorStore):
        return store
    if isinstance(store, (str, os.PathLike)):
        return open_store(store, option="store")
    raise TypeError(f"store: expected the old index (a path or a store from migrate.open_store), got {type(store)}")


def _collection(new_store: Any, store: VectorStore, migration: Migration) -> NewCollection:
    if isinstance(new_store, NewCollection):
        return new_store
    if isinstance(new_store, (str, os.PathLike)):
        return open_collection(Path(os.fspath(new_store)), store, migration.new_dimension, migration.metric)
    raise TypeError(f"new_store: expected a path (the new collection) or a NewCollection, got {type(new_store)}")


def _candidates(store: VectorStore, old_queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The old store's ``depth`` answers per query as an (n, depth) id array and the mask of real answers (an ANN
    index may answer fewer: FAISS pads with -1, a database returns a shorter list)."""
    found = store.search(old_queries, depth)
    rows = [np.asarray(row) for row in (found if found is not None else [])]
    if len(rows) != len(old_queries):
        raise store.error("answered no search (this store cannot be searched)")
    text = any(row.dtype.kind in "OUS" for row in rows)
    ids = np.empty((len(rows), depth), dtype=object if text else np.int64)
    mask = np.zeros((len(rows), depth), dtype=bool)
    for number, row in enumerate(rows):
        keep = row[row != -1] if row.dtype.kind in "iu" else row  # FAISS pads a short answer with -1
        ids[number, : len(keep)] = keep[:depth]
        mask[number, : len(keep)] = True
    ids[~mask] = "" if text else 0
    return ids, mask


#: Rows of the new collection its exact search reads at a time.
HELD_ROWS = 65536
#: ``collection_search``'s values (True is "auto", False is "off").
COLLECTION_SEARCHES = ("auto", "exact", "lists", "off")


def search_mode(value: Any) -> str:
    """``collection_search`` as one of ``COLLECTION_SEARCHES``: "auto" reads inverted lists once the collection's
    fixed rows reach ``_lists.LIST_ROWS`` and every row below; "exact" every row always; "lists" the lists whatever
    the size; "off" (or False) no search of the collection."""
    if isinstance(value, (bool, np.bool_)):
        return "auto" if value else "off"
    if isinstance(value, str) and value in COLLECTION_SEARCHES:
        return value
    raise ValueError(
        f"collection_search: expected True, False or one of {', '.join(map(repr, COLLECTION_SEARCHES))}, got {value!r}"
    )


def _collection_candidates(
    collection: NewCollection, queries: torch.Tensor, depth: int, metric: str, mode: str = "auto"
) -> tuple[np.ndarray, np.ndarray]:
    """The new collection's own top ``depth`` per query under ``metric`` over every vector it holds (read
    ``HELD_ROWS`` at a time, each block's top ``depth`` merged into the running best): exact, or for the rows of
    keyed blocks from their inverted lists (``mode``; ``_lists``). An (n, width) id array and its mask (width =
    min(depth, rows held), 0 for an empty collection; false where a query's probed lists held fewer rows)."""
    best: list[tuple[torch.Tensor, np.ndarray]] = []
    q = prepare(queries, metric)
    known = collection.block_norms  # a keyed block's norms, kept with the open collection
    keyed = []
    for key, ids, vectors in collection.blocks(HELD_ROWS):
        rows = torch.as_tensor(np.ascontiguousarray(vectors, dtype=np.float32))  # no copy when stored as float32
        norms = known.get(key) if key is not None else None
        if norms is None:
            norms = torch.linalg.vector_norm(rows, dim=1)
            if key is not None:
                known[key] = norms
        if key is not None:
            keyed.append((key, ids, rows, norms))  # views of what the open collection holds anyway
            continue
        values, positions = scored_top_k(q, rows, norms, depth, metric)  # l2: 2 q.d - |d|^2, comparable
        best = _merged(best, torch.as_tensor(values), np.asarray(ids)[positions], depth)
    seen = {key for key, *_ in keyed}
    lists = _lists_for(collection, keyed, mode, metric)
    probed = lists.probed(q, depth) if lists is not None else None
    small = [block for block in keyed if len(block[2]) <= _lists.EXACT_BLOCK_ROWS]
    if small:  # every row, scored at once (a FAISS collection's part files are a few searches' rows each)
        ids = np.concatenate([np.asarray(block[1]) for block in small])
        rows, norms = (torch.cat([block[n] for block in small]) for n in (2, 3))
        values, positions = scored_top_k(q, rows, norms, depth, metric)
        best = _merged(best, torch.as_tensor(values), ids[positions], depth)
    for key, ids, rows, norms in keyed:
        if len(rows) <= _lists.EXACT_BLOCK_ROWS:
            continue
        if lists is None:  # every row, read in place
            values, positions = scored_top_k(q, rows, norms, depth, metric)
            values, positions = torch.as_tensor(values), torch.as_tensor(positions)
        else:
            values, positions = lists.block_top(key, rows, norms, q, probed, depth)
        best = _merged(best, values, np.asarray(ids)[positions.numpy()], depth)
    for gone in set(known) - seen:  # folded, merged or rewritten since: not read again
        known.pop(gone, None)
    if collection.block_lists is not None:
        for gone in set(collection.block_lists.by_key) - seen:
            collection.block_lists.by_key.pop(gone, None)
    if not best:
        return np.zeros((len(queries), 0), np.int64), np.zeros((len(queries), 0), bool)
    scores, ids = best[0]
    return ids, torch.isfinite(scores).numpy()


def _merged(
    best: list[tuple[torch.Tensor, np.ndarray]], values: torch.Tensor, ids: np.ndarray, depth: int
) -> list[tuple[torch.Tensor, np.ndarray]]:
    """The running best ``depth`` (scores, ids) per query with one block's added."""
    if not best:
        return [(values, ids)]
    scores = torch.cat([best[0][0], values], dim=1)
    joined = np.concatenate([best[0][1], ids], axis=1)
    kept = torch.topk(scores, min(depth, scores.shape[1]), dim=1)
    return [(kept.values, np.take_along_axis(joined, kept.indices.numpy(), axis=1))]


def _lists_for(collection: NewCollection, keyed: list, mode: str, metric: str) -> _lists.CollectionLists | None:
    """The collection's inverted lists over its keyed blocks, fitted (again) when due; None when every row is read."""
    rows = sum(len(block[2]) for block in keyed)
    if not rows or mode == "exact" or (mode == "auto" and rows < _lists.LIST_ROWS):
        return None
    lists = collection.block_lists
    if lists is None or lists.metric != metric:
        lists = collection.block_lists = _lists.CollectionLists(metric)
    if lists.centroids is None or rows >= _lists.REFIT_GROWTH * lists.fitted_rows:
        lists.fit([(key, block_rows, norms) for key, _, block_rows, norms in keyed])
    return lists


def _union(
    old: tuple[np.ndarray, np.ndarray], own: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Each query's candidates from both sources, each id once per query: (ids, mask, the distinct ids, each masked
    candidate's position among them in mask order, how many distinct ids only the collection's search gave)."""
    (old_ids, old_mask), (own_ids, own_mask) = old, own
    if not own_ids.shape[1]:
        unique, inverse = np.unique(old_ids[old_mask], return_inverse=True)
        return old_ids, old_mask, unique, inverse, 0
    if old_ids.dtype != own_ids.dtype and object in (old_ids.dtype, own_ids.dtype):
        old_ids, own_ids = old_ids.astype(object), own_ids.astype(object)
    ids, mask = np.concatenate([old_ids, own_ids], axis=1), np.concatenate([old_mask, own_mask], axis=1)
    unique, inverse = np.unique(ids[mask], return_inverse=True)
    positions = np.full(ids.shape, -1, np.int64)
    positions[mask] = inverse
    order = np.argsort(positions, axis=1, kind="stable")  # a query's copies of one id side by side, its first kept
    ranked = np.take_along_axis(positions, order, axis=1)
    repeated = np.zeros(ids.shape, bool)
    repeated[:, 1:] = (ranked[:, 1:] == ranked[:, :-1]) & (ranked[:, 1:] >= 0)
    again = np.zeros(ids.shape, bool)
    np.put_along_axis(again, order, repeated, axis=1)
    mask = mask & ~again
    from_old = np.unique(old_ids[old_mask])
    only_own = int((~np.isin(np.unique(own_ids[own_mask]), from_old)).sum())
    return ids, mask, unique, positions[mask], only_own


def _computed(new_vectors: Callable[[np.ndarray], Any] | None, ids: np.ndarray, width: int) -> np.ndarray:
    if new_vectors is None:
        raise ValueError(
            f"new_vectors: {len(ids)} candidates have no new vector in the new collection yet (e.g. id "
            f"{ids[0]!r}); give new_vectors, a function of ids returning their new-model vectors"
        )
    if not callable(new_vectors):
        raise TypeError(f"new_vectors: expected a function of ids returning vectors, got {type(new_vectors).__name__}")
    vectors = as_float_tensor(to_numpy(new_vectors(ids), "new_vectors"), "new_vectors", ndim=2)
    if tuple(vectors.shape) != (len(ids), width):
        raise ValueError(
            f"new_vectors: expected ({len(ids)}, {width}) vectors for the {len(ids)} ids it was given, got "
            f"{tuple(vectors.shape)}"
        )
    return vectors.to(torch.float32).numpy()


def cascade_search(
    migration: Migration,
    new_queries: Any,
    k: int = 10,
    *,
    store: Any,
    new_store: Any,
    depth: int = 100,
    new_vectors: Callable[[np.ndarray], Any] | None = None,
    device: str | None = None,
    write: bool = True,
    collection_search: bool | str = True,
) -> CascadeResult:
    """``Migration.search``: see the module's docstring (the candidates: the old store's ``depth`` answers to the
    bridged query and the new collection's own ``depth`` answers to the new query, each id once). ``write=False`` (a
    measurement: ``depth_curve``) computes the missing candidates' vectors without writing them or counting the
    search in the collection's usage. ``collection_search``: True or "auto" (every row of a small collection, inverted
    lists of a large FAISS one), "exact" (every row), "lists" (the lists at any size), False or "off" (the old store's
    answers alone; the collection is then only read for the candidates' vectors)."""
    k = check_positive_int(k, "k")
    depth = check_positive_int(depth, "depth")
    if k > depth:
        raise ValueError(f"depth: expected at least k ({k}) candidates per query, got {depth}")
    mode = search_mode(collection_search)
    opened = _open_old(store)
    migration.check_index(opened)
    collection = _collection(new_store, opened, migration)
    queries = as_float_tensor(new_queries, "new_queries", ndim=2, min_rows=1)
    old_queries = migration.transform_queries(queries, device=device)
    recalled = _candidates(opened, old_queries, min(depth, opened.count))
    empty = (np.empty((len(queries), 0), dtype=recalled[0].dtype), np.empty((len(queries), 0), dtype=bool))
    own = empty if mode == "off" else _collection_candidates(collection, queries, depth, migration.metric, mode)
    ids, mask, unique, inverse, from_collection = _union(recalled, own)
    found, vectors = collection.lookup(unique)
    missing = unique[~found]
    written = 0
    if len(missing):
        computed = _computed(new_vectors, missing, migration.new_dimension)
        vectors[~found] = computed
        written = collection.add_missing(missing, computed) if write else 0
    if write:
        collection.record(
            searches=1,
            queries=len(queries),
            candidates=len(unique),
            reused=int(found.sum()),
            embedded=len(missing),
            from_collection=from_collection,
        )
        if collection is not new_store:  # opened here from a path: its counts are written now
            collection.flush_usage()
    top_ids, top_scores = rank(migration.metric, queries, ids, mask, vectors, inverse, k)
    return CascadeResult(top_ids, top_scores, len(unique), int(found.sum()), len(missing), written, from_collection)


def rank(
    metric: str,
    queries: Any,
    ids: np.ndarray,
    mask: np.ndarray,
    vectors: np.ndarray,
    inverse: np.ndarray,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's candidates (``ids`` where ``mask``; their vectors ``vectors[inverse]`` in mask order) ranked by
    the new model under ``metric``; the top ``k`` ids and scores (similarity, or distance for l2)."""
    q = prepare(queries, metric)
    d = prepare(vectors, metric)
    positions = np.zeros(ids.shape, dtype=np.int64)
    positions[mask] = inverse
    k = min(k, ids.shape[1])
    order = np.zeros((len(ids), k), np.int64)
    values = np.zeros((len(ids), k), np.float64)
    step = max(1, RANK_FLOATS // max(1, ids.shape[1] * d.shape[1]))  # queries per block: (step, depth, p) floats
    for start in range(0, len(ids), step):
        stop = start + step
        candidates = d[torch.as_tensor(positions[start:stop])]  # (block, depth, p)
        if metric == "l2":
            scores = -torch.linalg.vector_norm(candidates - q[start:stop, None, :], dim=2)
        else:
            scores = torch.einsum("np,ndp->nd", q[start:stop], candidates)
        scores = scores.masked_fill(~torch.as_tensor(mask[start:stop]), float("-inf"))
        best = torch.topk(scores, k, dim=1)
        order[start:stop], values[start:stop] = best.indices.numpy(), best.values.numpy()
    return np.take_along_axis(ids, order, axis=1), (-values if metric == "l2" else values)


#: Candidate vectors gathered at once by ``rank`` (floats: 64 MiB).
RANK_FLOATS = 1 << 24


def depth_curve(
    migration: Migration,
    new_queries: Any,
    depths: Any,
    *,
    store: Any,
    new_store: Any,
    new_vectors: Callable[[np.ndarray], Any] | None = None,
    relevant: Any = None,
    reference: Any = None,
    k: int = 10,
) -> list[dict[str, float]]:
    """The cascade's quality against its depth, measured without writing the new collection: per depth, Recall@k of
    the labelled ``relevant`` id of each query, and/or overlap@k with ``reference`` ((n, k) ids: the full re-embed's
    own top-k); with the distinct candidates the queries touched, their share of the index, and how many of them only
    the new collection's own search recalled (``from_collection``)."""
    if relevant is None and reference is None:
        raise ValueError("relevant: give the queries' relevant ids, or reference, the full re-embed's top-k ids")
    k = check_positive_int(k, "k")
    if isinstance(depths, (str, bytes)) or not hasattr(depths, "__iter__"):
        raise TypeError(f"depths: expected a sequence of candidate counts, got {type(depths).__name__}")
    depths = [check_positive_int(depth, "depths", minimum=k) for depth in depths]
    if not depths:
        raise ValueError(f"depths: expected at least one candidate count (each >= k = {k}), got none")
    opened = _open_old(store)
    rows = []
    for depth in depths:
        result = cascade_search(
            migration,
            new_queries,
            k,
            store=opened,
            new_store=new_store,
            depth=depth,
            new_vectors=new_vectors,
            write=False,
        )
        found = result.ids.astype(str)
        row = {"depth": int(depth), "candidates": result.candidates, "share": result.candidates / opened.count}
        row["from_collection"] = result.from_collection
        if relevant is not None:
            wanted = np.asarray(relevant).astype(str)
            row[f"recall@{k}"] = float((found == wanted[:, None]).any(axis=1).mean())
        if reference is not None:
            truth = np.asarray(reference).astype(str)[:, :k]
            row[f"overlap@{k}"] = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(found, truth, strict=True)]))
        rows.append(row)
    return rows


@dataclass(frozen=True)
class CascadeStatus:
    """How far a cascade has filled its new collection: ``present`` of ``total`` ids hold their new vector; the
    searches' running totals (``usage``: queries, candidates looked up, reused, embedded, and recalled only by the
    new collection's own search)."""

    present: int
    total: int
    usage: dict[str, int]

    @property
    def share(self) -> float:
        return self.present / self.total if self.total else 0.0

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.present >= self.total

    @property
    def reuse(self) -> float | None:
        """Share of looked-up candidates whose new vector was already in the collection."""
        return self.usage["reused"] / self.usage["candidates"] if self.usage.get("candidates") else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "present": self.present,
            "total": self.total,
            "share": self.share,
            "complete": self.complete,
            "reuse": self.reuse,
            **self.usage,
        }

    def words(self) -> str:
        reuse = "" if self.reuse is None else f"; {self.reuse:.1%} of the candidates looked up were already there"
        if self.usage.get("from_collection"):
            reuse += f" ({self.usage['from_collection']:,} recalled only by the new collection's own search)"
        done = (
            "the new collection is complete: point your application at it (the old index is no longer needed)"
            if self.complete
            else f"{self.total - self.present:,} ids still carry only their old vector"
        )
        return (
            f"re-embedded: {self.present:,} of {self.total:,} ids ({self.share:.1%}), over {self.usage['queries']:,} "
            f"queries in {self.usage['searches']:,} search{'' if self.usage['searches'] == 1 else 'es'}{reuse}; {done}"
        )


def cascade_status(store: Any, new_store: NewCollection) -> CascadeStatus:
    """The share of ``store``'s ids whose new vector ``new_store`` holds, and the searches' running totals."""
    opened = _open_old(store)
    if not isinstance(new_store, NewCollection):
        raise TypeError(f"new_store: expected a NewCollection (migrate open_collection), got {type(new_store)}")
    return CascadeStatus(new_store.count_present(), opened.count, new_store.usage())


__all__ = ["CascadeResult", "CascadeStatus", "StoreError", "cascade_search", "cascade_status", "depth_curve", "rank"]
