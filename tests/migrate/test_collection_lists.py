"""The cascade's search of a large collection through inverted lists (``migrate._lists``): every list read gives the
exact search's candidates, the default few lists most of them, the lists follow the collection's blocks as they are
written, merged and folded, and a small collection is still searched exactly by default."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from latentstitch.migrate import _lists as lists_module
from latentstitch.migrate import open_store
from latentstitch.migrate._cascade import _collection_candidates
from latentstitch.migrate._collection import open_collection
from tests.migrate.test_stores import build_faiss, needs

pytestmark = needs("faiss")


def _clustered(n: int, width: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, width))
    x = centres[rng.integers(0, 20, size=n)] + 0.5 * rng.normal(size=(n, width))
    return (x * rng.uniform(0.5, 2.0, size=(n, 1))).astype(np.float32)  # norms vary: ip, cosine and l2 differ


def _collection(tmp_path, vectors, metric, writes=4, held=None):
    """A FAISS collection of an index of ``vectors`` (ids 0..n-1) holding the first ``held`` (default all), written in
    ``writes`` searches' worth of parts."""
    ids = np.arange(len(vectors), dtype=np.int64)
    store = open_store(build_faiss(tmp_path / "old.index", ids, vectors))
    collection = open_collection(tmp_path / "new.index", store, vectors.shape[1], metric)
    for part in np.array_split(ids[:held], writes):
        collection.add_missing(part, vectors[part])
    return store, collection


def _exact(vectors, queries, depth, metric):
    from latentstitch.migrate._retrieval import top_k

    return top_k(queries, vectors, depth, metric)[1]


@pytest.mark.parametrize("metric", ["ip", "cosine", "l2"])
def test_reading_every_list_gives_the_exact_searchs_candidates(metric, tmp_path, monkeypatch):
    vectors, queries = _clustered(1500, 12, 0), _clustered(30, 12, 1)
    store, collection = _collection(tmp_path, vectors, metric)
    monkeypatch.setattr(lists_module, "MIN_PROBES", 10**6)  # every list read
    ids, mask = _collection_candidates(collection, torch.as_tensor(queries), 25, metric, "lists")
    assert collection.block_lists is not None and len(collection.block_lists.centroids) > 1
    assert mask.all()
    np.testing.assert_array_equal(ids, _exact(vectors, queries, 25, metric))
    store.close()


@pytest.mark.parametrize("metric", ["ip", "cosine", "l2"])
def test_the_default_lists_find_most_of_the_exact_top_10_and_never_an_id_twice(metric, tmp_path):
    vectors, queries = _clustered(4000, 16, 2), _clustered(60, 16, 3)
    store, collection = _collection(tmp_path, vectors, metric)
    ids, mask = _collection_candidates(collection, torch.as_tensor(queries), 50, metric, "lists")
    lists = collection.block_lists
    assert lists.probes(50) < len(lists.centroids)  # a part of the lists is read
    exact = _exact(vectors, queries, 10, metric)
    found = np.mean([len(set(e) & set(i[m])) / 10 for e, i, m in zip(exact, ids, mask, strict=True)])
    assert found >= 0.9, found
    for row, keep in zip(ids, mask, strict=True):
        assert len(set(row[keep])) == keep.sum()
    store.close()


def test_the_lists_follow_the_blocks_as_they_are_written_and_folded_and_are_fitted_again_as_it_grows(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(lists_module, "EXACT_BLOCK_ROWS", 0)  # every keyed block through its lists
    vectors, queries = _clustered(2400, 8, 4), _clustered(5, 8, 5)
    store, collection = _collection(tmp_path, vectors, "cosine", writes=1, held=300)  # the index file
    search = lambda: _collection_candidates(collection, torch.as_tensor(queries), 20, "cosine", "lists")  # noqa: E731
    search()
    lists = collection.block_lists
    fitted, keys = lists.fitted_rows, set(lists.by_key)
    assert fitted == 300 and keys == set(collection.block_norms)
    collection.add_missing(np.arange(300, 350), vectors[300:350])  # a part file: its rows assigned, the rest kept
    search()
    assert lists.fitted_rows == fitted and keys < set(lists.by_key)
    collection.add_missing(np.arange(350, 2400), vectors[350:])  # 8x the rows: fitted again; the file rewritten
    search()
    assert lists.fitted_rows == 2400 and set(lists.by_key) == set(collection.block_norms)
    assert not keys & set(lists.by_key)  # the blocks that are gone are forgotten
    store.close()


def test_auto_reads_every_row_of_a_small_collection_and_lists_from_list_rows(tmp_path, monkeypatch):
    vectors, queries = _clustered(1200, 8, 6), _clustered(7, 8, 7)
    store, collection = _collection(tmp_path, vectors, "ip")
    ids, _ = _collection_candidates(collection, torch.as_tensor(queries), 30, "ip", "auto")
    assert collection.block_lists is None  # below LIST_ROWS: exact
    np.testing.assert_array_equal(ids, _exact(vectors, queries, 30, "ip"))
    monkeypatch.setattr(lists_module, "LIST_ROWS", 1000)
    _collection_candidates(collection, torch.as_tensor(queries), 30, "ip", "auto")
    assert collection.block_lists is not None
    store.close()


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_each_query_gets_the_exact_top_among_the_rows_of_the_lists_it_reads(metric, tmp_path, monkeypatch):
    """Asked one query at a time (the probed rows gathered) or all at once (the block read in place, each query's
    lists masked), each query's candidates are the exact search's top among the rows of its own probed lists."""
    monkeypatch.setattr(lists_module, "MIN_PROBES", 4)
    vectors, queries = _clustered(3000, 10, 8), _clustered(12, 10, 9)
    store, collection = _collection(tmp_path, vectors, metric, writes=1)
    together, mask = _collection_candidates(collection, torch.as_tensor(queries), 15, metric, "lists")
    lists = collection.block_lists
    (_, _, order, first), *others = lists.by_key.values()
    assert not others  # one block: the index file
    assigned = np.empty(len(vectors), np.int64)
    for number in range(len(first) - 1):
        assigned[order[first[number] : first[number + 1]].numpy()] = number
    probed = lists.probed(torch.as_tensor(queries), 15)
    for row, query in enumerate(queries):
        alone, _ = _collection_candidates(collection, torch.as_tensor(query[None]), 15, metric, "lists")
        readable = np.flatnonzero(probed[row].numpy()[assigned])
        assert len(readable) < len(vectors) // 2  # a few lists: gathered
        expected = readable[_exact(vectors[readable], query[None], 15, metric)[0]]
        np.testing.assert_array_equal(alone[0], expected)
        np.testing.assert_array_equal(together[row][mask[row]], expected)
    store.close()
