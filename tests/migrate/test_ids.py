"""Ids are kept or refused, never lost: a table's ``id`` column is its ids without ``id_column``, a FAISS id map is
never dropped into a ``.npy`` (whose ids are its row numbers), a ``.npy`` store's re-embedded items are named by row
number, and any string id (any alphabet, slashes, hundreds of characters) survives a parquet or Milvus output."""

from __future__ import annotations

import numpy as np
import pytest

from latentstitch.migrate import apply_migration, open_store, work_folder
from latentstitch.migrate.stores import fingerprint

from .test_apply import expected
from .test_apply_safety import _build_parquet, _string_ids
from .test_stores import needs


def test_a_table_s_id_column_is_its_ids_without_id_column_and_describe_says_so(corpus, tmp_path):
    pytest.importorskip("pyarrow")
    _build_parquet(tmp_path / "with.parquet", corpus.ids, corpus.old)
    store = open_store(tmp_path / "with.parquet")
    ids, vectors = store.read()
    np.testing.assert_array_equal(ids, corpus.ids)
    np.testing.assert_array_equal(vectors, corpus.old)
    assert "ids from 'id'" in store.describe() and not store.ids_are_rows
    np.savez(tmp_path / "arrays.npz", embeddings=corpus.old, id=corpus.ids)
    np.testing.assert_array_equal(open_store(tmp_path / "arrays.npz").read()[0], corpus.ids)
    _build_parquet(tmp_path / "without.parquet", None, corpus.old)
    bare = open_store(tmp_path / "without.parquet")
    np.testing.assert_array_equal(bare.read()[0], np.arange(len(corpus.old)))
    assert "ids: row numbers" in bare.describe() and bare.ids_are_rows


def test_a_plan_from_a_table_lists_its_documents_ids(corpus, tmp_path):
    pytest.importorskip("pyarrow")
    from latentstitch.migrate import plan_sample

    _build_parquet(tmp_path / "docs.parquet", corpus.ids, corpus.old)
    ids, vectors = open_store(tmp_path / "docs.parquet").read()
    plan = plan_sample(ids, vectors, 0.1, strategy="random", metric="cosine", seed=0)
    assert set(plan.ids.tolist()) <= set(corpus.ids.tolist()) and max(plan.ids) > len(corpus.ids)


def _id_map(path, corpus):
    faiss = pytest.importorskip("faiss")
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(corpus.old.shape[1]))
    index.add_with_ids(corpus.old, corpus.ids)
    faiss.write_index(index, str(path))


def test_faiss_ids_are_never_dropped_into_a_npy_output(saved, corpus, tmp_path):
    _, migration, path = saved
    _id_map(tmp_path / "old.index", corpus)
    before = fingerprint(tmp_path / "old.index")
    with pytest.raises(ValueError, match=r"output: '.*new.npy' is a .npy file, which holds no ids .*\.parquet"):
        apply_migration(migration, path, open_store(tmp_path / "old.index"), tmp_path / "new.npy", kind="file")
    assert not (tmp_path / "new.npy").exists() and not work_folder(tmp_path / "new.npy").exists()
    apply_migration(migration, path, open_store(tmp_path / "old.index"), tmp_path / "new.parquet", kind="file")
    ids, vectors = open_store(tmp_path / "new.parquet").read()
    np.testing.assert_array_equal(ids, corpus.ids)
    np.testing.assert_allclose(vectors, migration.transform_corpus(corpus.old), atol=1e-6)
    assert fingerprint(tmp_path / "old.index") == before


def test_a_npy_store_s_re_embedded_items_are_named_by_row_number(saved, corpus, tmp_path):
    plan, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    store = open_store(tmp_path / "old.npy")
    new = corpus.new_of(plan.ids)
    assert plan.ids.max() >= len(corpus.ids)  # the documents' own ids reach past the rows
    with pytest.raises(ValueError, match=r"sample_ids: .* its ids are its row numbers 0 to 599, but \d+ sample ids"):
        apply_migration(migration, path, store, tmp_path / "new.npy", sample_ids=plan.ids, sample_new=new)
    with pytest.raises(ValueError, match=r"sample_ids: .* holds text ids \(e.g. 'doc-0'\); give each .* row number"):
        names = [f"doc-{i}" for i in range(len(plan.ids))]
        apply_migration(migration, path, store, tmp_path / "new.npy", sample_ids=names, sample_new=new)
    assert not (tmp_path / "new.npy").exists()
    rows = np.searchsorted(corpus.ids, plan.ids)
    apply_migration(migration, path, store, tmp_path / "new.npy", sample_ids=rows, sample_new=new)
    np.testing.assert_allclose(np.load(tmp_path / "new.npy"), expected(migration, corpus, plan), atol=1e-6)


@pytest.mark.parametrize(
    "kind",
    [
        "file",
        pytest.param("milvus", marks=[needs("pymilvus"), needs("milvus_lite")]),
    ],
)
def test_any_string_id_survives_a_parquet_or_milvus_output(saved, corpus, tmp_path, kind):
    """Non-ASCII, slashes, quotes, 300 and 700 characters (2,100 UTF-8 bytes: past Milvus' usual 512)."""
    pytest.importorskip("pyarrow")
    _, migration, path = saved
    ids = _string_ids(len(corpus.ids))
    ids[-1] = "長い" * 350
    _build_parquet(tmp_path / "old.parquet", ids, corpus.old)
    before = fingerprint(tmp_path / "old.parquet")
    output = tmp_path / ("new.parquet" if kind == "file" else "new.db")
    source = open_store(tmp_path / "old.parquet", id_column="id")
    apply_migration(migration, path, source, output, kind=kind, chunk_rows=200)
    store = open_store(output)
    try:
        back, vectors = store.read()
    finally:
        store.close()
    order = {v: i for i, v in enumerate(back.tolist())}
    assert sorted(order) == sorted(ids)
    rows = [order[i] for i in ids]
    np.testing.assert_allclose(vectors[rows], migration.transform_corpus(corpus.old), atol=1e-5)
    assert fingerprint(tmp_path / "old.parquet") == before


def test_the_cli_refuses_a_npy_output_for_faiss_ids_in_one_line_naming_its_options(saved, corpus, tmp_path, capsys):
    from latentstitch.cli import main

    _, _, path = saved
    _id_map(tmp_path / "old.index", corpus)
    new = str(tmp_path / "new.npy")
    assert main(["migrate", "apply", str(path), str(tmp_path / "old.index"), "-o", new, "--output-kind", "file"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"--output: {new!r} is a .npy file, which holds no ids" in err and ".parquet" in err
    np.save(tmp_path / "old.npy", corpus.old)
    np.savez(tmp_path / "sample.npz", embeddings=corpus.new[:30], id=corpus.ids[100:130])  # documents' ids, not rows
    argv = [
        "migrate",
        "apply",
        str(path),
        str(tmp_path / "old.npy"),
        "-o",
        new,
        "--sample",
        str(tmp_path / "sample.npz"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.split(": ")[2] == "--sample" and "row numbers 0 to 599" in err
    assert not (tmp_path / "new.npy").exists()


@pytest.mark.parametrize(
    ("kind", "out", "words"),
    [
        pytest.param("faiss", "new.index", "FAISS index holds integer ids only", marks=needs("faiss")),
        pytest.param("qdrant", "new_qdrant", "unsigned integer or a UUID", marks=needs("qdrant_client")),
        pytest.param("milvus", "new.db", "at most 65535 bytes, and an id has 70000", marks=needs("milvus_lite")),
    ],
)
def test_text_ids_an_output_kind_cannot_hold_are_refused_before_anything_is_bridged(
    saved, corpus, tmp_path, kind, out, words
):
    pytest.importorskip("pyarrow")
    _, migration, path = saved
    ids = _string_ids(len(corpus.ids))
    ids[0] = "doc-0" + "x" * (70_000 - 5) if kind == "milvus" else ids[0]
    _build_parquet(tmp_path / "old.parquet", ids, corpus.old)
    store = open_store(tmp_path / "old.parquet", id_column="id")
    with pytest.raises(ValueError, match=rf"output: '.*{out}': .*{words}.*\.parquet"):
        apply_migration(migration, path, store, tmp_path / out, kind=kind, chunk_rows=100)
    assert not (tmp_path / out).exists() and not work_folder(tmp_path / out).exists()


@needs("qdrant_client")
def test_a_qdrant_collection_mixing_integer_and_uuid_ids_keeps_each_ids_type_or_is_refused(
    saved, corpus, tmp_path, capsys
):
    import uuid

    from qdrant_client import QdrantClient, models

    from latentstitch.cli import main

    _, migration, path = saved
    rows = 120
    ids = [int(i) if row % 2 else str(uuid.UUID(int=row + 1)) for row, i in enumerate(corpus.ids[:rows])]
    client = QdrantClient(path=str(tmp_path / "old"))
    client.create_collection("docs", vectors_config=models.VectorParams(size=16, distance=models.Distance.COSINE))
    client.upsert("docs", points=models.Batch(ids=ids, vectors=corpus.old[:rows].tolist()))
    client.close()
    store = open_store(tmp_path / "old")
    assert store.mixed_ids and store.read()[0].dtype.kind == "U"  # read as text
    with pytest.raises(ValueError, match=r"^output: the store \(qdrant .*\) mixes integer and text ids \(read as text"):
        apply_migration(migration, path, store, tmp_path / "new.parquet", kind="file")
    assert not (tmp_path / "new.parquet").exists()
    argv = ["migrate", "apply", str(path), str(tmp_path / "old"), "-o", str(tmp_path / "new.parquet")]
    assert main([*argv, "--output-kind", "file", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--output: the store (qdrant" in err and "write a qdrant output" in err
    apply_migration(migration, path, store, tmp_path / "new", chunk_rows=50)
    written = QdrantClient(path=str(tmp_path / "new"))
    points, _ = written.scroll("new", limit=rows + 1, with_vectors=True)
    written.close()
    assert sorted(map(repr, (p.id for p in points))) == sorted(map(repr, ids))  # 3 stays 3, a UUID stays text
    by_id = {p.id: np.asarray(p.vector) for p in points}
    bridged = np.asarray(migration.transform_corpus(corpus.old[:rows]))
    np.testing.assert_allclose(np.stack([by_id[i] for i in ids]), bridged, atol=1e-5)
