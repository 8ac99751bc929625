"""FAISS index files (``faiss-cpu``): flat, IVF-flat and HNSW-flat indexes, bare or inside an ``IndexIDMap`` /
``IndexIDMap2`` (the id map). The file's header and size are checked in Python before FAISS's native reader sees
it: a hostile or truncated file is one error naming the option, never a crash or a huge allocation.

Ids: the id map's, an IVF index's own, else the row numbers (what FAISS's search returns for a bare index).
Metric: the index's (``METRIC_INNER_PRODUCT`` of unit vectors reads as cosine)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.extras import require
from latentstitch.migrate.stores._protocol import (
    BATCH_ROWS,
    StoreError,
    StoreWriter,
    VectorStore,
    exact_batches,
    unit_norm,
)

#: fourcc -> index type this connector reads (vectors stored as float32 in each).
INDEX_TYPES = {b"IxFI": "flat", b"IxF2": "flat", b"IxFl": "flat", b"IwFl": "ivf", b"IHNf": "hnsw"}
ID_MAPS = (b"IxMp", b"IxM2")
HEADER = struct.Struct("<iqqq?i")  # d, ntotal, two dummies (1 << 20), is_trained, metric_type
DUMMY = 1 << 20
MAX_DIMENSION = 1 << 16


def faiss():
    return require("faiss", "faiss", package="faiss-cpu")


def check_faiss_file(path: Path, option: str) -> dict[str, Any]:
    """The validated header of a FAISS index file: ``type``, ``idmap``, ``dimension``, ``count``, ``metric_type``.
    Raises ``ValueError`` naming ``option`` for anything this connector does not read or that cannot be whole."""
    where = f"{option}: {str(path)!r}"
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(4 + HEADER.size + 4 + HEADER.size)
    if len(head) < 4 + HEADER.size:
        raise StoreError(f"{where} is {size} bytes, too short for a FAISS index header (truncated?)")
    fourcc, offset, idmap = head[:4], 4, False
    if fourcc in ID_MAPS:
        idmap = True
    elif fourcc not in INDEX_TYPES:
        raise StoreError(
            f"{where} is not a FAISS index this connector reads (header {fourcc!r}); expected a flat, IVF-flat or "
            "HNSW-flat index, bare or in an IndexIDMap"
        )
    d, ntotal, dummy1, dummy2, _, metric_type = HEADER.unpack_from(head, offset)
    if dummy1 != DUMMY or dummy2 != DUMMY or not 0 < d <= MAX_DIMENSION or ntotal < 0 or metric_type not in (0, 1):
        raise StoreError(f"{where} has a damaged FAISS header (dimension {d}, count {ntotal}, metric {metric_type})")
    kind = "flat"
    if idmap:
        inner = head[4 + HEADER.size : 8 + HEADER.size]
        if inner not in INDEX_TYPES:
            raise StoreError(f"{where} maps ids onto a FAISS index this connector does not read ({inner!r})")
        kind = INDEX_TYPES[inner]
        d2, n2, *_ = HEADER.unpack_from(head, 8 + HEADER.size) if len(head) >= 8 + 2 * HEADER.size else (0, -1)
        if (d2, n2) != (d, ntotal):
            raise StoreError(f"{where} has an id map whose index header disagrees with it (truncated or damaged)")
    else:
        kind = INDEX_TYPES[fourcc]
    needed = 4 + HEADER.size + ntotal * d * 4 + (ntotal * 8 if idmap else 0)
    if size < needed:
        raise StoreError(
            f"{where} is {size} bytes but its header announces {ntotal} vectors of {d} floats ({needed} bytes at "
            "least): the file is truncated or damaged"
        )
    if kind == "flat" and not idmap and size != 4 + HEADER.size + 8 + ntotal * d * 4:
        raise StoreError(f"{where} is {size} bytes, not the size its flat-index header announces (damaged)")
    return {"type": kind, "idmap": idmap, "dimension": d, "count": ntotal, "metric_type": metric_type}


class FaissStore(VectorStore):
    kind = "faiss"
    has_search = True

    def __init__(self, path: Path, option: str, *, metric: str | None = None, **_):
        super().__init__(path, option)
        self.header = check_faiss_file(path, option)
        lib = faiss()
        try:
            index = lib.read_index(str(path))
        except RuntimeError as error:
            raise self.error(f"cannot be read by FAISS ({str(error).splitlines()[0][:200]})") from None
        self._owner = index  # owns the C++ object the downcast views below point into
        self.index = lib.downcast_index(index)
        self.inner = lib.downcast_index(self.index.index) if self.header["idmap"] else self.index
        self.count, self.dimension = int(self.index.ntotal), int(self.index.d)
        self.ids_are_rows = not self.header["idmap"] and self.header["type"] != "ivf"  # an IVF index has its own
        if self.header["metric_type"] == 1:
            self.metric = "l2"
        else:
            self.metric = "cosine" if unit_norm(self._vectors(0, min(self.count, 4096))) else "ip"
        if metric is not None and metric != self.metric:
            raise self.error(f"is a {self.metric} index, not {metric}")

    def _vectors(self, start: int, stop: int) -> np.ndarray:
        if stop <= start:
            return np.empty((0, self.dimension), np.float32)
        if self.header["type"] == "ivf":
            parts = [vectors for _, vectors in self._ivf_lists(start, stop)]
            return np.concatenate(parts) if parts else np.zeros((0, self.dimension), np.float32)
        return self.inner.reconstruct_n(start, stop - start)

    def _ivf_lists(self, start: int = 0, stop: int | None = None):
        """(ids, vectors) of each IVF list in list order, from row ``start`` to ``stop`` of that order: one list
        copied out of the index at a time (the index is not copied whole)."""
        lib = faiss()
        invlists, width = self.inner.invlists, self.inner.code_size // 4
        seen = 0
        for number in range(self.inner.nlist):
            size = invlists.list_size(number)
            if not size:
                continue
            if stop is not None and seen >= stop:
                return
            first, seen = seen, seen + size
            if seen <= start:
                continue
            ids = lib.rev_swig_ptr(invlists.get_ids(number), size).copy()
            codes = lib.rev_swig_ptr(invlists.get_codes(number), size * self.inner.code_size).copy()
            low, high = max(start - first, 0), size if stop is None else min(stop - first, size)
            yield ids[low:high], codes.view(np.float32).reshape(size, width)[low:high]

    def batches(self, rows: int = BATCH_ROWS):
        if self.header["type"] == "ivf":
            id_map = faiss().vector_to_array(self.index.id_map) if self.header["idmap"] else None
            lists = ((ids if id_map is None else id_map[ids], vectors) for ids, vectors in self._ivf_lists())
            yield from exact_batches(lists, rows)
            return
        id_map = faiss().vector_to_array(self.index.id_map) if self.header["idmap"] else None
        for start in range(0, self.count, rows):
            stop = min(start + rows, self.count)
            ids = id_map[start:stop] if id_map is not None else np.arange(start, stop, dtype=np.int64)
            yield ids, self._vectors(start, stop)

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if self.metric == "cosine":
            queries = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
        return self.index.search(queries, k)[1]

    def writer_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"type": self.header["type"]}
        if self.header["type"] == "hnsw":
            options["M"] = int(self.inner.hnsw.nb_neighbors(1))
        if self.header["type"] == "ivf":
            options["nlist"] = int(self.inner.nlist)
        return options


class FaissWriter(StoreWriter):
    """A new FAISS index of the source's type (flat, HNSW with its M, IVF-flat with its nlist, trained on the new
    vectors) inside an ``IndexIDMap2`` holding the ids (integer ids only: FAISS has no others)."""

    def __init__(self, path: Path, dimension: int, metric: str, collection: str, **options: Any):
        super().__init__(path, dimension, metric, collection, **options)
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []

    @staticmethod
    def cannot_hold(ids: np.ndarray) -> str | None:
        ids = np.asarray(ids)
        return (
            None
            if ids.dtype.kind in "iu"
            else f"a FAISS index holds integer ids only, not text ids like {str(ids[0])!r}"
        )

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = np.asarray(ids)
        if self.cannot_hold(ids):
            raise ValueError(f"output: {self.cannot_hold(ids)}")
        self.parts.append((ids.astype(np.int64), np.ascontiguousarray(vectors, dtype=np.float32)))

    def close(self) -> None:
        lib = faiss()
        metric = lib.METRIC_L2 if self.metric == "l2" else lib.METRIC_INNER_PRODUCT
        kind = self.options.get("type", "flat")
        if kind == "hnsw":
            inner = lib.IndexHNSWFlat(self.dimension, int(self.options.get("M", 32)), metric)
        elif kind == "ivf":
            quantizer = lib.IndexFlat(self.dimension, metric)
            inner = lib.IndexIVFFlat(quantizer, self.dimension, int(self.options.get("nlist", 1)), metric)
            sample = np.concatenate([v for _, v in self.parts])
            inner.train(sample[:: max(1, len(sample) // 100_000)])
        else:
            inner = lib.IndexFlat(self.dimension, metric)
        index = inner if kind == "ivf" else lib.IndexIDMap2(inner)
        for ids, vectors in self.parts:
            index.add_with_ids(vectors, ids)
        # an IVF index only points at its quantizer: the local ``quantizer`` keeps it alive until the index is
        # written (FAISS's Python objects take no new attributes to hold it)
        lib.write_index(index, str(self.path))
