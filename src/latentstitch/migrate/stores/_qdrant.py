"""Qdrant collections in local mode (``qdrant-client``, ``QdrantClient(path=...)``): the folder (``collection=``
names the collection; the only one by default). Ids are Qdrant's (unsigned integers or UUIDs); the metric is the
collection's distance (Cosine, Dot, Euclid; Manhattan is refused). Qdrant stores a cosine collection's vectors
normalised. A collection mixing integer and UUID ids is read with text ids (``mixed_ids``); a new Qdrant collection
written from it gives each id its own type back (an integer's text is that integer: a UUID's text never is). Local
mode locks and may rewrite the folder it opens: a store is read from a private snapshot copy
(``VectorStore.snapshot``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.extras import require
from latentstitch.migrate.stores._lancedb import _only
from latentstitch.migrate.stores._protocol import BATCH_ROWS, StoreWriter, VectorStore

DISTANCES = {"Cosine": "cosine", "Dot": "ip", "Euclid": "l2"}


def qdrant():
    return require("qdrant_client", "qdrant", package="qdrant-client")


class QdrantStore(VectorStore):
    kind = "qdrant"
    has_search = True

    def __init__(self, path: Path, option: str, *, collection=None, metric=None, **_):
        super().__init__(path, option, collection)
        try:  # local mode takes a lock file in the folder it opens and may rewrite meta.json: a snapshot is opened
            self.client = qdrant().QdrantClient(path=str(self.snapshot()))
        except (RuntimeError, ValueError, OSError) as error:
            raise self.error(f"cannot be opened by Qdrant ({str(error)[:200]})") from None
        names = [c.name for c in self.client.get_collections().collections]
        self.collection = _only(names, collection, self.error)
        params = self.client.get_collection(self.collection).config.params.vectors
        if isinstance(params, dict):
            raise self.error(f"collection {self.collection!r} has named vectors; one unnamed vector is expected")
        distance = getattr(params.distance, "value", str(params.distance))
        if distance not in DISTANCES:
            raise self.error(f"collection {self.collection!r} uses the {distance} distance, not cosine / dot / euclid")
        self.metric, self.dimension = DISTANCES[distance], int(params.size)
        self.count = int(self.client.count(self.collection, exact=True).count)
        if metric is not None and metric != self.metric:
            raise self.error(f"collection {self.collection!r} is a {self.metric} collection, not {metric}")
        self.mixed_ids = self._mixes_ids()

    def batches(self, rows: int = BATCH_ROWS):
        offset = None
        while True:
            points, offset = self.client.scroll(self.collection, limit=rows, offset=offset, with_vectors=True)
            if points:
                yield np.asarray([p.id for p in points]), np.asarray([p.vector for p in points], dtype=np.float32)
            if offset is None:
                return

    def _mixes_ids(self) -> bool:
        """Whether the collection holds both integer and UUID ids (read when it is opened: one pass over its ids,
        without vectors, stopping at the first of each)."""
        kinds, offset = set(), None
        while len(kinds) < 2:
            points, offset = self.client.scroll(
                self.collection, limit=BATCH_ROWS, offset=offset, with_vectors=False, with_payload=False
            )
            kinds |= {type(p.id) for p in points}
            if offset is None:
                break
        return len(kinds) > 1

    def writer_options(self) -> dict[str, Any]:
        return {"mixed_ids": self.mixed_ids}

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        return np.asarray(
            [
                [p.id for p in self.client.query_points(self.collection, query=q.tolist(), limit=k).points]
                for q in np.asarray(queries, np.float32)
            ]
        )

    def release(self) -> None:
        self.client.close()


class QdrantWriter(StoreWriter):
    """A new Qdrant local folder holding one collection of the source's distance. ``mixed_ids`` (from a source
    collection mixing integer and UUID ids, read as text): an id that is the text of an integer is written as that
    integer."""

    def __init__(self, path: Path, dimension: int, metric: str, collection: str, **options: Any):
        super().__init__(path, dimension, metric, collection, **options)
        lib = qdrant()
        self.models = require("qdrant_client.models", "qdrant", package="qdrant-client")
        self.client = lib.QdrantClient(path=str(path))
        distance = {v: k for k, v in DISTANCES.items()}[metric]
        self.client.create_collection(
            collection,
            vectors_config=self.models.VectorParams(
                size=dimension, distance=getattr(self.models.Distance, distance.upper())
            ),
        )

    @staticmethod
    def cannot_hold(ids: np.ndarray) -> str | None:
        ids = np.asarray(ids)
        if ids.dtype.kind in "iu":
            negative = ids[ids < 0]
            return (
                f"a Qdrant point id is an unsigned integer or a UUID, not {int(negative[0])}" if len(negative) else None
            )
        for value in ids.tolist():
            if isinstance(value, int):  # one of a mixed collection's integers (``_point_ids``)
                if value < 0:
                    return f"a Qdrant point id is an unsigned integer or a UUID, not {value}"
                continue
            try:
                uuid.UUID(str(value))
            except ValueError:
                return f"a Qdrant point id is an unsigned integer or a UUID, not the text {str(value)!r}"
        return None

    def _point_ids(self, ids: np.ndarray) -> np.ndarray:
        """The ids as Qdrant points take them: as given, or, from a collection mixing integers and UUIDs, each with
        its own type back."""
        if not self.options.get("mixed_ids"):
            return np.asarray(ids)
        return np.asarray([int(v) if str(v).isdecimal() else str(v) for v in np.asarray(ids).tolist()], dtype=object)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = self._point_ids(ids)
        if self.cannot_hold(ids):
            raise ValueError(f"output: {self.cannot_hold(ids)}")
        ids = ids.tolist()
        self.client.upsert(self.collection, points=self.models.Batch(ids=ids, vectors=np.asarray(vectors).tolist()))

    def close(self) -> None:
        self.client.close()
