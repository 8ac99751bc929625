"""FAISS index files: flat, IVF and HNSW read back with their ids and metric; hostile or truncated files are
refused in Python, with the option named, before FAISS's native reader sees them."""

from __future__ import annotations

import struct

import numpy as np
import pytest

faiss = pytest.importorskip("faiss", reason="faiss-cpu is not installed (pip install 'latentstitch[faiss]')")

from latentstitch.migrate import StoreError, open_store  # noqa: E402


@pytest.fixture(scope="module")
def vectors():
    return np.random.default_rng(0).normal(size=(200, 8)).astype(np.float32)


def _write(index, path):
    faiss.write_index(index, str(path))
    return path


@pytest.mark.parametrize("kind", ["flat-l2", "flat-ip", "hnsw", "ivf", "idmap-hnsw"])
def test_index_types_read_back_with_ids_and_metric(kind, vectors, tmp_path):
    ids = np.arange(200, dtype=np.int64) * 3 + 1
    if kind == "flat-l2":
        index, metric, expected_ids = faiss.IndexFlatL2(8), "l2", np.arange(200)
        index.add(vectors)
    elif kind == "flat-ip":
        index, metric, expected_ids = faiss.IndexFlatIP(8), "ip", np.arange(200)
        index.add(vectors)
    elif kind == "hnsw":
        index, metric, expected_ids = faiss.IndexHNSWFlat(8, 16), "l2", np.arange(200)
        index.add(vectors)
    elif kind == "ivf":
        quantizer = faiss.IndexFlatL2(8)
        index, metric, expected_ids = faiss.IndexIVFFlat(quantizer, 8, 4), "l2", ids
        index.train(vectors)
        index.add_with_ids(vectors, ids)
    else:
        index, metric, expected_ids = faiss.IndexIDMap(faiss.IndexHNSWFlat(8, 16)), "l2", ids
        index.add_with_ids(vectors, ids)
    store = open_store(_write(index, tmp_path / "x.index"))
    assert store.metric == metric and store.count == 200
    read_ids, read = store.read()
    order = np.argsort(read_ids)
    np.testing.assert_array_equal(read_ids[order], expected_ids)
    np.testing.assert_allclose(read[order], vectors[np.searchsorted(expected_ids, expected_ids)], atol=1e-6)


def test_unit_vectors_in_an_inner_product_index_read_as_cosine(vectors, tmp_path):
    index = faiss.IndexFlatIP(8)
    index.add(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    assert open_store(_write(index, tmp_path / "x.index")).metric == "cosine"


def test_truncated_and_hostile_files_are_refused_before_faiss_reads_them(vectors, tmp_path):
    index = faiss.IndexFlatIP(8)
    index.add(vectors)
    whole = _write(index, tmp_path / "whole.index").read_bytes()
    (tmp_path / "cut.index").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(StoreError, match="INDEX: .*cut.index.* truncated"):
        open_store(tmp_path / "cut.index", option="INDEX")
    huge = bytearray(whole)
    struct.pack_into("<q", huge, 8, 1 << 40)  # announces 2^40 vectors: FAISS would try to allocate them
    (tmp_path / "huge.index").write_bytes(bytes(huge))
    with pytest.raises(ValueError, match="damaged FAISS header|truncated or damaged"):
        open_store(tmp_path / "huge.index", option="INDEX")
    (tmp_path / "junk.index").write_bytes(b"IxPQ" + bytes(64))
    with pytest.raises(ValueError, match="not a FAISS index this connector reads"):
        open_store(tmp_path / "junk.index", option="INDEX")
    (tmp_path / "tiny.index").write_bytes(b"IxF")
    with pytest.raises(ValueError, match="too short"):
        open_store(tmp_path / "tiny.index", option="INDEX")
