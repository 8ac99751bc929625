"""apply: the new collection holds exactly the bridged vectors (re-embedded items their true ones), float32; an
interrupted run resumes to the identical result; a full disk leaves the old index untouched and the partial output
named as partial; the old index is never written."""

from __future__ import annotations

import errno
import importlib.util

import numpy as np
import pytest

from latentstitch.migrate import apply_migration, open_store, work_folder
from latentstitch.migrate._retrieval import prepare
from latentstitch.migrate.stores import fingerprint


def expected(migration, corpus, plan):
    out = migration.transform_corpus(corpus.old)
    rows = np.searchsorted(corpus.ids, plan.ids)
    out[rows] = prepare(corpus.new_of(plan.ids), "cosine").numpy()
    return out


def test_apply_npy_writes_the_bridged_index_and_a_manifest(saved, corpus, tmp_path):
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    before = fingerprint(tmp_path / "old.npy")
    store = open_store(tmp_path / "old.npy")
    result = apply_migration(migration, path, store, tmp_path / "new.npy", chunk_rows=128)
    written = np.load(tmp_path / "new.npy")
    assert written.dtype == np.float32
    np.testing.assert_allclose(written, migration.transform_corpus(corpus.old), atol=1e-6)
    assert fingerprint(tmp_path / "old.npy") == before
    import json

    manifest = json.loads(result.manifest.read_text())
    assert manifest["hashes"]["source"] == before and manifest["status"] == "complete"
    assert set(manifest["hashes"]["bridge"]) == {"migration", "query", "corpus"}
    assert not work_folder(tmp_path / "new.npy").exists()
    with pytest.raises(FileExistsError, match="^output: .* exists"):
        apply_migration(migration, path, store, tmp_path / "new.npy")


class Interrupting:
    """A store that stops after ``after`` batches, as Ctrl-C would."""

    def __init__(self, store, after):
        self.store, self.after = store, after

    def __getattr__(self, name):
        return getattr(self.store, name)

    def batches(self, rows):
        for number, batch in enumerate(self.store.batches(rows)):
            if number == self.after:
                raise KeyboardInterrupt
            yield batch


@pytest.mark.parametrize(
    "kind",
    [
        "npy",
        pytest.param(
            "faiss",
            marks=pytest.mark.skipif(importlib.util.find_spec("faiss") is None, reason="faiss-cpu is not installed"),
        ),
    ],
)
def test_an_interrupted_apply_resumes_to_the_identical_result(saved, corpus, tmp_path, kind):
    plan, migration, path = saved
    if kind == "npy":
        np.save(tmp_path / "old.npy", corpus.old)
        source, name = tmp_path / "old.npy", "new.npy"
    else:
        import faiss

        index = faiss.IndexIDMap2(faiss.IndexFlatIP(corpus.old.shape[1]))
        index.add_with_ids(corpus.old, corpus.ids)
        faiss.write_index(index, str(tmp_path / "old.index"))
        source, name = tmp_path / "old.index", "new.index"
    rows = np.searchsorted(corpus.ids, plan.ids)  # a .npy has no ids: its row numbers are its ids
    sample = {"sample_ids": rows if kind == "npy" else plan.ids, "sample_new": corpus.new_of(plan.ids)}
    whole = apply_migration(migration, path, open_store(source), tmp_path / ("whole-" + name), chunk_rows=100, **sample)
    with pytest.raises(KeyboardInterrupt):
        apply_migration(migration, path, Interrupting(open_store(source), 3), tmp_path / name, chunk_rows=100, **sample)
    assert work_folder(tmp_path / name).name.startswith(".new.") and "partial" in work_folder(tmp_path / name).name
    assert not (tmp_path / name).exists()
    resumed = apply_migration(migration, path, open_store(source), tmp_path / name, chunk_rows=100, **sample)
    assert resumed.resumed_chunks == 3
    one, two = open_store(whole.output).read(), open_store(resumed.output).read()
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    order = one[0] if kind == "npy" else np.searchsorted(corpus.ids, one[0])
    np.testing.assert_allclose(one[1], expected(migration, corpus, plan)[order], atol=1e-6)


def test_a_full_disk_keeps_the_old_index_and_names_the_partial_output(saved, corpus, tmp_path, monkeypatch):
    _, migration, path = saved
    import faiss

    index = faiss.IndexFlatIP(corpus.old.shape[1])
    index.add(corpus.old)
    faiss.write_index(index, str(tmp_path / "old.index"))
    before = fingerprint(tmp_path / "old.index")
    saves = {"count": 0}
    real_save = np.save

    def save(file, array, **options):  # the disk fills up at the fifth chunk file
        saves["count"] += 1
        if saves["count"] > 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(file, array, **options)

    monkeypatch.setattr(np, "save", save)
    with pytest.raises(OSError, match=r"\] output: the disk is full after 2 of 6 chunks; the old index is untouched"):
        apply_migration(migration, path, open_store(tmp_path / "old.index"), tmp_path / "new.index", chunk_rows=100)
    assert fingerprint(tmp_path / "old.index") == before
    assert not (tmp_path / "new.index").exists() and work_folder(tmp_path / "new.index").is_dir()
    monkeypatch.setattr(np, "save", real_save)
    result = apply_migration(
        migration, path, open_store(tmp_path / "old.index"), tmp_path / "new.index", chunk_rows=100
    )
    assert result.resumed_chunks == 2


def test_apply_refuses_a_query_side_migration_and_a_changed_index(saved, corpus, tmp_path):
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    with pytest.raises(KeyboardInterrupt):
        apply_migration(
            migration, path, Interrupting(open_store(tmp_path / "old.npy"), 1), tmp_path / "new.npy", chunk_rows=100
        )
    np.save(tmp_path / "old.npy", corpus.old[::-1].copy())
    with pytest.raises(ValueError, match=r"^output: the partial apply .* made with another index content \(its files"):
        apply_migration(migration, path, open_store(tmp_path / "old.npy"), tmp_path / "new.npy", chunk_rows=100)
    migration.mode = "query"
    with pytest.raises(ValueError, match="migration: the chosen mode is query-side"):
        apply_migration(migration, path, open_store(tmp_path / "old.npy"), tmp_path / "other.npy")


class Capped(Interrupting):
    """A store whose engine yields at most ``cap`` rows per batch, whatever is asked (Chroma's max batch size)."""

    def __init__(self, store, cap):
        super().__init__(store, after=-1)
        self.cap = cap

    def batches(self, rows):
        for ids, vectors in self.store.batches(rows):
            for start in range(0, len(ids), self.cap):
                yield ids[start : start + self.cap], vectors[start : start + self.cap]


@pytest.mark.parametrize("name", ["new.npy", "new.parquet"])
def test_apply_writes_every_row_when_the_engine_caps_its_batches(saved, corpus, tmp_path, name):
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    store = Capped(open_store(tmp_path / "old.npy"), cap=37)
    result = apply_migration(migration, path, store, tmp_path / name, chunk_rows=100, kind="file")
    assert result.chunks == 6
    ids, written = open_store(tmp_path / name).read()
    np.testing.assert_array_equal(ids, np.arange(len(corpus.old)))
    np.testing.assert_allclose(written, migration.transform_corpus(corpus.old), atol=1e-6)


def test_apply_on_the_cpu_device_gives_the_same_bytes_and_a_bad_device_is_named(saved, corpus, tmp_path):
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    store = open_store(tmp_path / "old.npy")
    apply_migration(migration, path, store, tmp_path / "default.npy", chunk_rows=128)
    apply_migration(migration, path, store, tmp_path / "cpu.npy", chunk_rows=128, device="cpu")
    assert (tmp_path / "cpu.npy").read_bytes() == (tmp_path / "default.npy").read_bytes()
    import torch

    tensor = torch.as_tensor(corpus.old[:5])
    np.testing.assert_array_equal(
        migration.transform_corpus(tensor, device="cpu"), migration.transform_corpus(corpus.old[:5])
    )
    with pytest.raises(ValueError, match="device: 'gpu' is not a usable device"):
        apply_migration(migration, path, store, tmp_path / "bad.npy", device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device: 'cuda': this machine has 0 CUDA device"):
            apply_migration(migration, path, store, tmp_path / "bad.npy", device="cuda")
    assert not (tmp_path / "bad.npy").exists() and not work_folder(tmp_path / "bad.npy").exists()


@pytest.mark.parametrize("name", ["new.parquet", "new.csv"])
def test_apply_streams_a_parquet_or_csv_output_in_chunks(saved, corpus, tmp_path, name, monkeypatch):
    """Peak memory is bounded by a chunk (plus the ids), not by the index: the bridged vectors are never all held
    (counted from the writer's creation on; hashing the source before it reads 4 MiB blocks)."""
    import tracemalloc

    import latentstitch.migrate._apply as applying

    create = applying.create_writer

    def create_after_hashing(*args, **kwargs):
        tracemalloc.reset_peak()
        return create(*args, **kwargs)

    monkeypatch.setattr(applying, "create_writer", create_after_hashing)

    _, migration, path = saved
    rows = 60_000 if name.endswith(".parquet") else 30_000
    old = np.tile(corpus.old, (rows // len(corpus.old), 1))
    np.save(tmp_path / "old.npy", old)
    store = open_store(tmp_path / "old.npy")
    np.save(tmp_path / "small.npy", corpus.old)  # a first run imports what the writer needs (not counted)
    apply_migration(migration, path, open_store(tmp_path / "small.npy"), tmp_path / f"small-{name}", kind="file")
    tracemalloc.start()
    try:
        apply_migration(migration, path, store, tmp_path / name, chunk_rows=1_000, kind="file")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    vectors = rows * migration.new_dimension * 4
    assert peak < 0.5 * vectors + rows * 8 * 2, (peak, vectors)
    ids, written = open_store(tmp_path / name).read()  # its id column, read back as text from a CSV
    np.testing.assert_array_equal(ids.astype(np.int64), np.arange(rows))
    np.testing.assert_allclose(written[: len(corpus.old)], migration.transform_corpus(corpus.old), atol=1e-6)


def test_apply_warns_when_the_store_ranks_by_another_metric_than_the_migration(saved, corpus, tmp_path):
    import warnings

    from latentstitch.migrate import MigrationWarning

    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    with pytest.warns(MigrationWarning, match=r"^store: the store \(old\.npy.*\) ranks by l2, but the migration"):
        apply_migration(migration, path, open_store(tmp_path / "old.npy", metric="l2"), tmp_path / "l2.npy")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same metric: not a word
        apply_migration(migration, path, open_store(tmp_path / "old.npy", metric="cosine"), tmp_path / "cos.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "l2.npy"), np.load(tmp_path / "cos.npy"))


@pytest.mark.skipif(importlib.util.find_spec("lancedb") is None, reason="lancedb is not installed")
@pytest.mark.filterwarnings("error:The given NumPy array is not writable")
def test_apply_reads_a_lancedb_index_without_torch_s_read_only_warning(saved, corpus, tmp_path):
    # LanceDB hands out read-only Arrow buffers; torch warned on each (a user saw "NumPy array is not writable")
    from tests.migrate.test_stores import build_lancedb

    _, migration, path = saved
    build_lancedb(tmp_path / "old_lance", np.arange(len(corpus.old)), corpus.old)
    store = open_store(tmp_path / "old_lance", metric="cosine")
    apply_migration(migration, path, store, tmp_path / "new.parquet", chunk_rows=128, kind="file")
    ids, written = open_store(tmp_path / "new.parquet").read()
    order = np.argsort(ids)
    np.testing.assert_allclose(written[order], migration.transform_corpus(corpus.old), atol=1e-6)
