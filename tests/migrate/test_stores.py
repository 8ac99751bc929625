"""Every store against its real engine (installed from the registries, no mocks): a small index the test builds,
read back by the protocol (ids, vectors, metric), its own ANN search, and a new collection written and read back.
An engine that is not installed is skipped with the reason."""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latentstitch.migrate import create_writer, open_store
from latentstitch.migrate.stores import exact_batches

N, D = 120, 8


def needs(module: str):
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"{module} is not installed (its optional extra)"
    )


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(N, D)).astype(np.float32)
    return np.arange(N, dtype=np.int64) * 5 + 2, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def build_faiss(path, ids, vectors):
    import faiss

    index = faiss.IndexIDMap2(faiss.IndexFlatIP(vectors.shape[1]))
    index.add_with_ids(vectors, ids)
    faiss.write_index(index, str(path))
    return path


def build_lancedb(path, ids, vectors):
    import lancedb

    lancedb.connect(str(path)).create_table(
        "docs", data=[{"id": int(i), "vector": v.tolist()} for i, v in zip(ids, vectors, strict=True)]
    )
    return path


def build_chroma(path, ids, vectors):
    import chromadb

    client = chromadb.PersistentClient(path=str(path), settings=chromadb.config.Settings(anonymized_telemetry=False))
    client.create_collection("docs", metadata={"hnsw:space": "cosine"}).add(
        ids=[str(i) for i in ids], embeddings=vectors
    )
    return path


def build_qdrant(path, ids, vectors):
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(path))
    client.create_collection(
        "docs", vectors_config=models.VectorParams(size=vectors.shape[1], distance=models.Distance.COSINE)
    )
    client.upsert("docs", points=models.Batch(ids=ids.tolist(), vectors=vectors.tolist()))
    client.close()
    return path


def build_milvus(path, ids, vectors):
    from pymilvus import MilvusClient

    client = MilvusClient(str(path))
    client.create_collection("docs", dimension=vectors.shape[1], metric_type="COSINE")
    client.insert("docs", [{"id": int(i), "vector": v.tolist()} for i, v in zip(ids, vectors, strict=True)])
    client.close()
    return path


STORES = [
    pytest.param("faiss", "old.index", build_faiss, marks=needs("faiss")),
    pytest.param("lancedb", "old_lance", build_lancedb, marks=needs("lancedb")),
    pytest.param("chroma", "old_chroma", build_chroma, marks=needs("chromadb")),
    pytest.param("qdrant", "old_qdrant", build_qdrant, marks=needs("qdrant_client")),
    pytest.param("milvus", "old.db", build_milvus, marks=[needs("pymilvus"), needs("milvus_lite")]),
]


@pytest.mark.integration
@pytest.mark.parametrize(("kind", "name", "build"), STORES)
def test_store_reads_searches_and_writes_a_new_collection(kind, name, build, data, tmp_path):
    ids, vectors = data
    store = open_store(build(tmp_path / name, ids, vectors))
    try:
        assert store.kind == kind and store.count == N and store.dimension == D
        assert store.metric == "cosine"
        read_ids, read_vectors = store.read()
        order = np.argsort(read_ids.astype(np.int64))
        np.testing.assert_array_equal(read_ids.astype(np.int64)[order], ids)
        np.testing.assert_allclose(read_vectors[order], vectors, atol=1e-5)
        found = store.search(vectors[:5], 3)
        np.testing.assert_array_equal(found[:, 0].astype(np.int64), ids[:5])  # each finds itself first
    finally:
        store.close()
    out = tmp_path / ("new" + (".index" if kind == "faiss" else ".db" if kind == "milvus" else ""))
    writer = create_writer(kind, out, dimension=4, metric="cosine", collection="migrated", **store.writer_options())
    new = np.random.default_rng(1).normal(size=(N, 4)).astype(np.float32)
    new /= np.linalg.norm(new, axis=1, keepdims=True)
    writer.add(ids[:60], new[:60])
    writer.add(ids[60:], new[60:])
    writer.close()
    reopened = open_store(out)
    try:
        back_ids, back = reopened.read()
        order = np.argsort(back_ids.astype(np.int64))
        np.testing.assert_allclose(back[order], new, atol=1e-5)
        assert reopened.metric == "cosine" and reopened.dimension == 4
    finally:
        reopened.close()


@given(
    sizes=st.lists(st.integers(0, 40), min_size=0, max_size=12),
    rows=st.integers(1, 50),
)
@settings(max_examples=60, deadline=None)
def test_exact_batches_cut_any_engine_batches_into_chunks_of_the_asked_size(sizes, rows):
    total = sum(sizes)
    ids = np.arange(total)
    vectors = np.arange(total * 2, dtype=np.float32).reshape(total, 2)
    cuts = np.cumsum([0, *sizes])
    engine = [(ids[a:b], vectors[a:b]) for a, b in itertools.pairwise(cuts)]
    out = list(exact_batches(engine, rows))
    assert [len(i) for i, _ in out] == [min(rows, total - s) for s in range(0, total, rows)]
    if out:
        np.testing.assert_array_equal(np.concatenate([i for i, _ in out]), ids)
        np.testing.assert_array_equal(np.concatenate([v for _, v in out]), vectors)


@pytest.mark.integration
@needs("lancedb")
def test_lancedb_is_streamed_in_chunks_across_its_fragments(data, tmp_path, monkeypatch):
    import lancedb
    import pyarrow as pa

    ids, vectors = data
    table = None
    for start in range(0, N, 50):  # three appends: three fragments of 50, 50 and 20 rows
        part = pa.table(
            {
                "id": pa.array(ids[start : start + 50]),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors[start : start + 50].reshape(-1)), D),
            }
        )
        if table is None:
            table = lancedb.connect(str(tmp_path / "db")).create_table("docs", data=part)
        else:
            table.add(part)
    # the store never materialises the whole table
    monkeypatch.setattr(type(table), "to_arrow", lambda *a, **k: pytest.fail("the table was read whole"))
    store = open_store(tmp_path / "db")
    assert store.count == N and store.dimension == D and store.metric == "cosine"
    chunks = list(store.batches(45))
    assert [len(i) for i, _ in chunks] == [45, 45, 30]
    assert all(v.shape[0] <= 45 for _, v in chunks)
    np.testing.assert_array_equal(np.concatenate([i for i, _ in chunks]), ids)
    np.testing.assert_allclose(np.concatenate([v for _, v in chunks]), vectors, atol=1e-6)
