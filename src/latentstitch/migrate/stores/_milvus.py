"""Milvus Lite collections (``pymilvus`` with ``milvus-lite``): a ``.db`` file (``collection=`` names the
collection; the only one by default). The vectors are the float-vector field, the ids the primary key; the metric
is the vector index's (IP, L2 or COSINE). Milvus Lite starts a local server per file (about a second) and writes
into the file it opens (its index files): a store is read from a private snapshot copy (``VectorStore.snapshot``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.extras import require
from latentstitch.migrate.stores._lancedb import _only
from latentstitch.migrate.stores._protocol import BATCH_ROWS, StoreWriter, VectorStore

METRICS = {"IP": "ip", "L2": "l2", "COSINE": "cosine"}
#: A VARCHAR primary key's length (UTF-8 bytes): Milvus' largest, and the one used when the ids are not given first.
MAX_VARCHAR = 65_535
DEFAULT_VARCHAR = 512


def milvus():
    require("milvus_lite", "milvus", package="milvus-lite")
    # the query iterator asks Milvus Lite for a timestamp it does not implement, then falls back: not for users
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    return require("pymilvus", "milvus", package="pymilvus")


class MilvusStore(VectorStore):
    kind = "milvus"
    has_search = True

    def __init__(self, path: Path, option: str, *, collection=None, metric=None, **_):
        super().__init__(path, option, collection)
        try:
            self.client_path = self.snapshot()  # Milvus Lite writes into what it opens
            self.client = milvus().MilvusClient(str(self.client_path))
        except Exception as error:  # milvus-lite raises its own types for a file it cannot open
            raise self.error(f"cannot be opened by Milvus Lite ({str(error)[:200]})") from None
        self.collection = _only(list(self.client.list_collections()), collection, self.error)
        fields = self.client.describe_collection(self.collection)["fields"]
        vector = [f for f in fields if "dim" in (f.get("params") or {})]
        primary = [f for f in fields if f.get("is_primary")]
        if len(vector) != 1 or len(primary) != 1:
            raise self.error(f"collection {self.collection!r} needs one float-vector field and one primary key")
        self.vector_field, self.id_field = vector[0]["name"], primary[0]["name"]
        self.dimension = int(vector[0]["params"]["dim"])
        indexes = self.client.list_indexes(self.collection, field_name=self.vector_field)
        described = self.client.describe_index(self.collection, indexes[0]) if indexes else {}
        self.metric = METRICS.get(str(described.get("metric_type", "COSINE")).upper(), "cosine")
        self.client.load_collection(self.collection)
        self.count = int(self.client.get_collection_stats(self.collection)["row_count"])
        if metric is not None and metric != self.metric:
            raise self.error(f"collection {self.collection!r} is a {self.metric} collection, not {metric}")

    def batches(self, rows: int = BATCH_ROWS):
        iterator = self.client.query_iterator(
            self.collection, batch_size=min(rows, 16_384), output_fields=[self.id_field, self.vector_field]
        )
        try:
            while batch := iterator.next():
                yield (
                    np.asarray([r[self.id_field] for r in batch]),
                    np.asarray([r[self.vector_field] for r in batch], dtype=np.float32),
                )
        finally:
            iterator.close()

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        found = self.client.search(
            self.collection, data=np.asarray(queries, np.float32).tolist(), limit=k, anns_field=self.vector_field
        )
        return np.asarray([[hit["id"] for hit in row] for row in found])

    def release(self) -> None:
        self.client.close()
        stop_server(self.client_path)


def stop_server(path: Path) -> None:
    """Stop Milvus Lite's server of the ``.db`` at ``path``. Milvus Lite 3 serves a file from threads of this
    process until the process exits, and only then writes the collection's data files (its write-ahead log flushed):
    a file renamed before that (apply's output, moved from its work folder) would be left with the log alone, and the
    data files written into the path it had (the work folder, made again after its removal)."""
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:  # another Milvus Lite: its servers are its own processes
        return
    release = getattr(server_manager_instance, "release_server", None)
    if release is not None:
        release(str(path))


def _longest(ids: np.ndarray) -> int:
    """The UTF-8 length of the longest text id (0 for integer ids)."""
    ids = np.asarray(ids)
    return 0 if ids.dtype.kind in "iu" or not len(ids) else max(len(str(i).encode()) for i in ids.tolist())


class MilvusWriter(StoreWriter):
    """A new Milvus Lite ``.db`` file holding one collection (``id`` primary key, ``vector``). Given every id first
    (``begin``), string ids get a VARCHAR key as long as the longest id's UTF-8 bytes (Milvus counts bytes; at most
    ``MAX_VARCHAR``); without it, ``DEFAULT_VARCHAR``."""

    ids_first = True

    def __init__(self, path: Path, dimension: int, metric: str, collection: str, **options: Any):
        super().__init__(path, dimension, metric, collection, **options)
        self.client = milvus().MilvusClient(str(path))
        self.created = False
        self.max_length = DEFAULT_VARCHAR

    @staticmethod
    def cannot_hold(ids: np.ndarray) -> str | None:
        longest = _longest(ids)
        if longest > MAX_VARCHAR:
            return f"a Milvus primary key holds at most {MAX_VARCHAR} bytes, and an id has {longest} (UTF-8)"
        return None

    def begin(self, ids: np.ndarray) -> None:
        ids = np.asarray(ids)
        if why := self.cannot_hold(ids):
            raise ValueError(f"output: {why}; shorten the ids, or write a kind without that limit (a .parquet file)")
        if ids.dtype.kind not in "iu" and len(ids):
            self.max_length = max(_longest(ids), 1)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = np.asarray(ids)
        if not self.created:
            lib = milvus()
            schema = self.client.create_schema(auto_id=False)
            if ids.dtype.kind in "iu":
                schema.add_field("id", lib.DataType.INT64, is_primary=True)
            else:
                schema.add_field("id", lib.DataType.VARCHAR, is_primary=True, max_length=self.max_length)
            schema.add_field("vector", lib.DataType.FLOAT_VECTOR, dim=self.dimension)
            index = self.client.prepare_index_params()
            index.add_index("vector", index_type="AUTOINDEX", metric_type=self.metric.upper())
            self.client.create_collection(self.collection, schema=schema, index_params=index)
            self.created = True
        rows = [{"id": i, "vector": v} for i, v in zip(ids.tolist(), np.asarray(vectors).tolist(), strict=True)]
        self.client.insert(self.collection, rows)

    def close(self) -> None:
        self.client.close()
        stop_server(self.path)
