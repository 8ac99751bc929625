"""What a cascade write, a served search and an index's digest cost once the index is large (``benchmarks
migration_scale`` measured them at 1M vectors): a write to a FAISS collection costs its own rows, not the
collection's; a search served from an open collection does not write its usage log each time; an unchanged index is
hashed once per process; an IVF store is read list by list. Each keeps its guarantee: nothing lost, nothing twice,
a changed index detected."""

from __future__ import annotations

import gc
import os
import threading

import numpy as np
import pytest

from latentstitch.migrate import open_collection, open_store
from latentstitch.migrate.stores import _protocol, fingerprint
from tests.migrate.test_stores import needs

WIDTH = 8


def _unit(rows: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, WIDTH)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "old.npy"
    np.save(path, _unit(400, 0))
    opened = open_store(path)
    yield opened
    opened.close()


NEW = _unit(400, 1)  # the new model's vector of each id (its row)


def _faiss_collection(tmp_path, store):
    return open_collection(tmp_path / "new.index", store, WIDTH, "cosine", kind="faiss")


def _identity(path):
    stat = path.stat()
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


@needs("faiss")
def test_a_faiss_collection_write_adds_its_rows_without_rewriting_the_index_file(tmp_path, store):
    collection = _faiss_collection(tmp_path, store)
    first = np.arange(100)
    assert collection.add_missing(first, NEW[first]) == 100
    before = _identity(collection.path)
    more = np.arange(100, 110)
    assert collection.add_missing(more, NEW[more]) == 10
    assert _identity(collection.path) == before  # the 100 rows already there were not written again
    fresh = _faiss_collection(tmp_path, store)  # another search, another process: sees every row
    found, vectors = fresh.lookup(np.arange(120))
    assert found[:110].all() and not found[110:].any()
    np.testing.assert_array_equal(vectors[:110], NEW[:110])
    assert fresh.count_present() == 110
    assert fresh.add_missing(np.arange(105, 115), NEW[105:115]) == 5  # idempotent: only the 5 missing


@needs("faiss")
def test_parts_are_merged_and_folded_into_the_file_which_alone_holds_a_complete_collection(tmp_path, store):
    import faiss

    collection = _faiss_collection(tmp_path, store)
    collection.MERGE_PARTS = 3
    collection.add_missing(np.arange(100), NEW[:100])
    for start in range(100, 190, 5):  # 18 small writes: merged every 3 parts, the file stays as it was
        collection.add_missing(np.arange(start, start + 5), NEW[start : start + 5])
        assert len(os.listdir(collection.parts_folder)) < 3
    assert faiss.read_index(str(collection.path)).ntotal == 100
    collection.add_missing(np.arange(190, 200), NEW[190:200])  # the parts now hold as many rows as the file
    assert faiss.read_index(str(collection.path)).ntotal == 200 and not os.listdir(collection.parts_folder)
    collection.add_missing(np.arange(200, 210), NEW[200:210])
    collection.add_missing(np.arange(400), NEW)  # the rest: complete, so the file alone holds every row
    index = faiss.read_index(str(collection.path))
    ids = faiss.vector_to_array(faiss.downcast_index(index).id_map)
    np.testing.assert_array_equal(np.sort(ids), np.arange(400))
    np.testing.assert_array_equal(index.reconstruct_n(0, 400)[np.argsort(ids)], NEW)
    assert not os.listdir(collection.parts_folder)


@needs("faiss")
def test_concurrent_writers_merging_and_compacting_lose_and_repeat_no_row(tmp_path, store):
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def run(seed: int) -> None:
        try:
            collection = _faiss_collection(tmp_path, store)  # one object per search, as a path gives
            collection.MERGE_PARTS = 2
            barrier.wait()
            rng = np.random.default_rng(seed)
            for _ in range(15):
                ids = np.unique(rng.integers(0, 300, 12))
                collection.add_missing(ids, NEW[ids])
                found, vectors = collection.lookup(ids)
                assert found.all()
                np.testing.assert_array_equal(vectors, NEW[ids])
        except BaseException as error:  # reported below, in the test thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    wanted = np.unique(np.concatenate([np.random.default_rng(s).integers(0, 300, (15, 12)).ravel() for s in range(4)]))
    collection = _faiss_collection(tmp_path, store)
    assert collection.count_present() == len(wanted)
    found, vectors = collection.lookup(np.arange(400))
    np.testing.assert_array_equal(np.flatnonzero(found), wanted)
    np.testing.assert_array_equal(vectors[found], NEW[wanted])
    collection.compact()
    import faiss

    owner = faiss.read_index(str(collection.path))  # owns what the downcast view points into
    held = faiss.vector_to_array(faiss.downcast_index(owner).id_map)
    np.testing.assert_array_equal(np.sort(held), wanted)  # each row once in the file


def test_an_open_collection_writes_its_usage_log_once_a_second_and_loses_no_count(tmp_path, store, monkeypatch):
    from latentstitch.migrate import _collection

    writes = []
    real = _collection.write_text
    monkeypatch.setattr(_collection, "write_text", lambda *a, **k: writes.append(a[0]) or real(*a, **k))
    collection = open_collection(tmp_path / "new.npy", store, WIDTH, "cosine")
    for _ in range(40):
        collection.record(searches=1, queries=2, candidates=5, reused=3, embedded=2, from_collection=1)
    assert len(writes) <= 2  # not one locked, synced write per search
    assert collection.usage()["searches"] == 40  # what is not written yet is counted
    del collection
    gc.collect()  # dropped: what it held is written
    reopened = open_collection(tmp_path / "new.npy", store, WIDTH, "cosine")
    counts = {"searches": 40, "queries": 80, "candidates": 200, "reused": 120, "embedded": 80, "from_collection": 40}
    assert reopened.usage() == counts


def _counting_open(monkeypatch) -> list[str]:
    opened: list[str] = []

    def counting(file, *args, **kwargs):
        opened.append(str(file))
        return open(file, *args, **kwargs)

    monkeypatch.setattr(_protocol, "open", counting, raising=False)
    return opened


def test_an_unchanged_index_is_hashed_once_and_a_changed_one_again(tmp_path, monkeypatch):
    path = tmp_path / "old.npy"
    np.save(path, _unit(50, 0))
    monkeypatch.setattr(_protocol, "RECENT_SECONDS", 0.0)
    first = fingerprint(path)
    opened = _counting_open(monkeypatch)
    assert fingerprint(path) == first and not opened  # not a byte read again
    # the same size, the modification time put back: the change time still tells
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    with open(path, "r+b") as handle:
        handle.write(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = fingerprint(path)
    assert opened and changed != first
    assert changed == _protocol.hashlib.sha256(bytes(data)).hexdigest()


def test_a_file_changed_just_before_it_was_hashed_is_hashed_again(tmp_path, monkeypatch):
    path = tmp_path / "old.npy"
    np.save(path, _unit(50, 0))
    first = fingerprint(path)  # written a moment ago: within RECENT_SECONDS, not cached
    opened = _counting_open(monkeypatch)
    assert fingerprint(path) == first and opened


@needs("faiss")
def test_an_ivf_store_reads_the_same_rows_list_by_list(tmp_path):
    import faiss

    vectors = _unit(300, 2)
    quantizer = faiss.IndexFlatIP(WIDTH)
    index = faiss.IndexIVFFlat(quantizer, WIDTH, 8, faiss.METRIC_INNER_PRODUCT)
    index.train(vectors)
    index.add_with_ids(vectors, np.arange(1000, 1300))
    faiss.write_index(index, str(tmp_path / "old.ivf"))
    store = open_store(tmp_path / "old.ivf")
    batches = list(store.batches(64))
    assert [len(ids) for ids, _ in batches] == [64] * 4 + [44]
    ids = np.concatenate([b[0] for b in batches])
    got = np.concatenate([b[1] for b in batches])
    np.testing.assert_array_equal(np.sort(ids), np.arange(1000, 1300))
    np.testing.assert_array_equal(got, vectors[ids - 1000])
    np.testing.assert_array_equal(store._vectors(10, 130), got[10:130])
    store.close()


def test_an_npy_collection_of_a_store_whose_ids_are_its_rows_opens_without_reading_the_store(tmp_path, store):
    def no_reading(*args, **kwargs):
        raise AssertionError("the whole store was read to open its new collection")

    collection = open_collection(tmp_path / "new.npy", store, WIDTH, "cosine")
    collection.add_missing(np.arange(5), NEW[:5])
    store.batches = no_reading  # a search given the collection by path opens it each time
    again = open_collection(tmp_path / "new.npy", store, WIDTH, "cosine")
    found, vectors = again.lookup(np.arange(8))
    assert found.tolist() == [True] * 5 + [False] * 3
    np.testing.assert_array_equal(vectors[:5], NEW[:5])
    with pytest.raises(ValueError, match="cannot hold id 400"):
        again.lookup(np.array([3, 400]))


def test_counts_left_for_exit_are_dropped_quietly_when_the_collection_was_removed(tmp_path, store):
    import shutil

    folder = tmp_path / "temporary" / "served"
    folder.mkdir(parents=True)
    collection = open_collection(folder / "new.npy", store, WIDTH, "cosine")
    collection.record(searches=1)  # written at once
    collection.record(searches=1)  # left for later
    shutil.rmtree(tmp_path / "temporary")  # a temporary folder removed before the process ends
    collection._usage.flush_quietly()  # what runs at exit: no error
    with pytest.raises(OSError):
        collection.flush_usage()  # asked for, the missing folder is an error
