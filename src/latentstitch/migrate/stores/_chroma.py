"""Chroma persistent collections (``chromadb``): a ``PersistentClient`` folder (``collection=`` names the
collection; the only one by default). Ids are Chroma's strings; the metric is the collection's space (``cosine``,
``l2`` or ``ip``; Chroma's default is l2), read from its configuration (Chroma 1.x, ``configuration=``) or else its
``hnsw:space`` metadata. The Chroma client rewrites files of the folder it opens (its SQLite database, the index's
``length.bin``): a store is read from a private snapshot copy (``VectorStore.snapshot``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.extras import require
from latentstitch.migrate.stores._lancedb import _only
from latentstitch.migrate.stores._protocol import BATCH_ROWS, StoreWriter, VectorStore


def chromadb():
    return require("chromadb", "chroma", package="chromadb")


def _client(path: Path):
    lib = chromadb()
    return lib.PersistentClient(path=str(path), settings=lib.config.Settings(anonymized_telemetry=False))


def _space(handle) -> str:
    """A collection's distance: its configuration's (Chroma 1.x, set by ``configuration=`` or by the metadata),
    else the ``hnsw:space`` metadata of older versions, else Chroma's default, l2."""
    configuration = getattr(handle, "configuration", None) or {}
    for index in ("hnsw", "spann"):
        space = (configuration.get(index) or {}).get("space") if isinstance(configuration, dict) else None
        if space:
            return str(getattr(space, "value", space))
    return (handle.metadata or {}).get("hnsw:space", "l2")


class ChromaStore(VectorStore):
    kind = "chroma"
    has_search = True

    def __init__(self, path: Path, option: str, *, collection=None, metric=None, **_):
        super().__init__(path, option, collection)
        self.client = _client(self.snapshot())  # the Chroma client rewrites files of the folder it opens
        names = [c if isinstance(c, str) else c.name for c in self.client.list_collections()]
        self.collection = _only(names, collection, self.error)
        self.handle = self.client.get_collection(self.collection)
        self.count = self.handle.count()
        self.metric = _space(self.handle)
        if self.count == 0:
            raise self.error(f"collection {self.collection!r} holds no vectors")
        first = self.handle.get(include=["embeddings"], limit=1)
        self.dimension = len(first["embeddings"][0])
        if metric is not None and metric != self.metric:
            raise self.error(f"collection {self.collection!r} is a {self.metric} collection, not {metric}")

    def batches(self, rows: int = BATCH_ROWS):
        rows = min(rows, self.client.get_max_batch_size())
        for start in range(0, self.count, rows):
            got = self.handle.get(include=["embeddings"], limit=rows, offset=start)
            yield np.asarray(got["ids"]), np.asarray(got["embeddings"], dtype=np.float32)

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        found = self.handle.query(query_embeddings=np.asarray(queries, np.float32), n_results=k, include=[])
        return np.asarray(found["ids"])


class ChromaWriter(StoreWriter):
    """A new Chroma persistent folder holding one collection of the source's metric."""

    def __init__(self, path: Path, dimension: int, metric: str, collection: str, **options: Any):
        super().__init__(path, dimension, metric, collection, **options)
        self.client = _client(path)
        name = collection if len(collection) >= 3 else f"{collection}-migrated"
        self.handle = self.client.create_collection(name, metadata={"hnsw:space": metric})
        self.limit = self.client.get_max_batch_size()

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = [str(i) for i in np.asarray(ids).tolist()]
        for start in range(0, len(ids), self.limit):
            self.handle.add(ids=ids[start : start + self.limit], embeddings=vectors[start : start + self.limit])
