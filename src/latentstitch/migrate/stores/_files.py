"""Embedding files as a store: ``.npy``, ``.npz``, ``.safetensors``, ``.pt``, ``.parquet``, ``.csv`` and Hugging Face
``save_to_disk`` folders, read by ``latentstitch.embeddings``. Ids: ``id_column``'s; without it, a column (or array)
named ``id`` when the file has one (as a LanceDB table's); else the row numbers (``ids_are_rows``). A file
has no metric of its own: give it (``metric=``), else unit rows are read as cosine and others as inner product."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from latentstitch.embeddings import EmbeddingFileError, EmbeddingWriter, open_embeddings
from latentstitch.migrate._retrieval import check_metric, top_k
from latentstitch.migrate.stores._protocol import BATCH_ROWS, StoreWriter, VectorStore, check_ids, unit_norm


class FileStore(VectorStore):
    kind = "file"

    def __init__(self, path: Path, option: str, *, metric: str | None = None, id_column: str | None = None, **_):
        super().__init__(path, option)
        self.file, self.id_column = _open_with_ids(path, id_column, option)
        self.count, self.dimension = self.file.n_rows, self.file.n_features
        self.ids_are_rows = self.file.ids is None
        self.ids = np.arange(self.count, dtype=np.int64) if self.ids_are_rows else self.file.ids
        check_ids(self.ids, self.error)
        if metric is None:
            first = next(self.file.chunks(min(self.count, 4096)))[1]
            metric = "cosine" if unit_norm(first) else "ip"
        self.metric = check_metric(metric, "metric")

    def batches(self, rows: int = BATCH_ROWS):
        for start, block in self.file.chunks(rows):
            yield self.ids[start : start + len(block)], np.asarray(block, dtype=np.float32)

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        """Exact search (a file has no index of its own): the ids of each query's ``k`` closest rows, read in
        batches (memory: one batch and the running top ``k``)."""
        queries = np.asarray(queries, dtype=np.float32)
        best_scores = np.full((len(queries), 0), -np.inf, np.float32)
        best_ids = np.zeros((len(queries), 0), dtype=self.ids.dtype)
        for ids, block in self.batches():
            scores, positions = top_k(queries, block, k, self.metric)
            best_scores = np.concatenate([best_scores, scores], axis=1)
            best_ids = np.concatenate([best_ids, np.asarray(ids)[positions]], axis=1)
            order = np.argsort(-best_scores, axis=1, kind="stable")[:, :k]
            best_scores = np.take_along_axis(best_scores, order, axis=1)
            best_ids = np.take_along_axis(best_ids, order, axis=1)
        return best_ids

    def describe(self) -> str:
        ids = "ids: row numbers" if self.ids_are_rows else f"ids from {self.id_column!r}"
        return f"{self.file.describe().removesuffix(', with ids')}, {ids}, metric {self.metric}"

    def writer_options(self) -> dict[str, Any]:
        return {"suffix": self.path.suffix or ".parquet"}


def _open_with_ids(path: Path, id_column: str | None, option: str) -> tuple[Any, str | None]:
    """The file opened with its ids, and the column they came from: ``id_column``'s, else those of a column or array
    named ``id`` when it has one (``.npy`` holds none), else none (None: the row numbers)."""
    if id_column is None and path.suffix.lower() != ".npy":
        try:
            opened = open_embeddings(path, id_column="id", option=option)
        except EmbeddingFileError as error:
            if "(given by id_column=)" not in str(error):  # not a missing ``id``: the file's own problem
                raise
        else:
            return opened, "id"
    return open_embeddings(path, id_column=id_column, option=option), id_column


class FileWriter(StoreWriter):
    """One embedding file. ``.npy`` is written in place through a memory map (``write_at``; an interrupted write is
    resumed in the same file); other formats write the ids beside the vectors where the format has room: given
    every id first (``begin``), ``.parquet`` and ``.csv`` stream each batch to disk as it comes (memory: one batch);
    ``.npz``, ``.safetensors`` and ``.pt`` are single objects their libraries write whole, so their batches are held
    until ``close`` (as they are without ``begin``)."""

    def __init__(self, path: Path, dimension: int, metric: str, collection: str, rows: int = 0, **options: Any):
        super().__init__(path, dimension, metric, collection, **options)
        self.rows = rows
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []
        self.memmap = None
        self.stream: EmbeddingWriter | None = None
        if path.suffix == ".npy":
            mode = "r+" if path.exists() else "w+"
            self.memmap = np.lib.format.open_memmap(path, mode=mode, dtype=np.float32, shape=(rows, dimension))

    @staticmethod
    def writes_in_place(path: Path) -> bool:
        return path.suffix == ".npy"

    @property
    def in_place(self) -> bool:
        return self.memmap is not None

    @property
    def ids_first(self) -> bool:
        return self.memmap is None  # every format but .npy stores the ids beside the vectors

    def write_at(self, start: int, vectors: np.ndarray) -> None:
        self.memmap[start : start + len(vectors)] = vectors
        self.memmap.flush()

    def read_at(self, start: int, rows: int) -> np.ndarray:
        return np.array(self.memmap[start : start + rows])

    def begin(self, ids: np.ndarray) -> None:
        ids = np.asarray(ids)
        self.stream = EmbeddingWriter(self.path, len(ids), self.dimension, np.float32, ids=ids, option="--output")

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        if self.stream is not None:
            self.stream.write(np.asarray(vectors, dtype=np.float32))
        else:
            self.parts.append((np.asarray(ids), np.asarray(vectors, dtype=np.float32)))

    def close(self) -> None:
        if self.memmap is not None:
            self.memmap.flush()
            self.memmap = None
            return
        if self.stream is not None:
            self.stream.close()
            return
        ids = np.concatenate([p[0] for p in self.parts])
        with EmbeddingWriter(self.path, len(ids), self.dimension, np.float32, ids=ids, option="--output") as writer:
            for _, block in self.parts:
                writer.write(block)
