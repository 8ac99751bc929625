"""Vector stores behind one small protocol (``VectorStore``: ``count``, ``dimension``, ``metric``, ``batches``,
``read``, ``search``; ``StoreWriter``: a new collection). ``open_store(path)`` guesses the kind from the path;
``KINDS`` lists them with the optional extra each needs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from latentstitch.migrate.stores._faiss import INDEX_TYPES, check_faiss_file
from latentstitch.migrate.stores._protocol import (
    BATCH_ROWS,
    StoreError,
    StoreWriter,
    VectorStore,
    as_path,
    check_ids,
    exact_batches,
    fingerprint,
)

#: kind -> (module, store class, writer class, extra).
KINDS: dict[str, tuple[str, str, str, str]] = {
    "file": ("latentstitch.migrate.stores._files", "FileStore", "FileWriter", "files"),
    "faiss": ("latentstitch.migrate.stores._faiss", "FaissStore", "FaissWriter", "faiss"),
    "lancedb": ("latentstitch.migrate.stores._lancedb", "LanceStore", "LanceWriter", "lancedb"),
    "chroma": ("latentstitch.migrate.stores._chroma", "ChromaStore", "ChromaWriter", "chroma"),
    "qdrant": ("latentstitch.migrate.stores._qdrant", "QdrantStore", "QdrantWriter", "qdrant"),
    "milvus": ("latentstitch.migrate.stores._milvus", "MilvusStore", "MilvusWriter", "milvus"),
}
FAISS_SUFFIXES = (".index", ".faiss", ".ivf", ".hnsw")


def guess_kind(path: Path) -> str:
    """The kind of store at ``path``, from its suffix, marker files or first bytes."""
    if path.suffix.lower() == ".db":
        return "milvus"  # Milvus Lite: a file, or a folder in its newer versions
    if path.is_dir():
        if (path / "chroma.sqlite3").exists():
            return "chroma"
        if (path / "meta.json").exists() and (path / "collection").is_dir():
            return "qdrant"
        if path.suffix == ".lance" or any(child.suffix == ".lance" for child in path.iterdir()):
            return "lancedb"
        return "file"  # a Hugging Face save_to_disk folder
    if path.suffix.lower() in FAISS_SUFFIXES:
        return "faiss"
    with open(path, "rb") as handle:
        head = handle.read(4)
    return "faiss" if head in INDEX_TYPES or head in (b"IxMp", b"IxM2") else "file"


def _classes(kind: str, option: str) -> tuple[Any, Any]:
    import importlib

    if kind not in KINDS:
        raise StoreError(f"{option}: unknown store kind {kind!r}; expected one of {', '.join(KINDS)}")
    module, store, writer, _ = KINDS[kind]
    loaded = importlib.import_module(module)
    return getattr(loaded, store), getattr(loaded, writer)


def open_store(
    path: str | os.PathLike,
    *,
    kind: str | None = None,
    collection: str | None = None,
    metric: str | None = None,
    id_column: str | None = None,
    option: str = "index",
) -> VectorStore:
    """Open the store at ``path`` for reading (``kind`` guessed when None; ``collection``: the table / collection
    name where the store holds several; ``metric`` for files, which have none; ``id_column`` for tables)."""
    source = as_path(path, option)
    store_class, _ = _classes(kind or guess_kind(source), option)
    return store_class(source, option, collection=collection, metric=metric, id_column=id_column)


def create_writer(
    kind: str, path: str | os.PathLike, *, dimension: int, metric: str, collection: str = "migrated", **options: Any
) -> StoreWriter:
    """A writer of a new store of ``kind`` at ``path`` (which must not exist yet, except an in-place ``.npy``
    being resumed)."""
    _, writer_class = _classes(kind, "--output")
    return writer_class(Path(os.fspath(path)), dimension, metric, collection, **options)


def writes_in_place(kind: str, path: str | os.PathLike) -> bool:
    """Whether the writer of ``kind`` at ``path`` takes rows at an offset (``StoreWriter.in_place``)."""
    _, writer_class = _classes(kind, "kind")
    return writer_class.writes_in_place(Path(os.fspath(path)))


__all__ = [
    "BATCH_ROWS",
    "KINDS",
    "StoreError",
    "StoreWriter",
    "VectorStore",
    "check_faiss_file",
    "check_ids",
    "create_writer",
    "exact_batches",
    "fingerprint",
    "guess_kind",
    "open_store",
    "writes_in_place",
]
