"""Vector stores behind one small protocol (``VectorStore``: ``count``, ``dimension``, ``metric``, ``batches``,
``read``, ``search``; ``StoreWriter``: a new collection). ``open_store(path)`` guesses the kind from the path;
``KINDS`` lists them with the optional extra each needs."""

from __future__ import annotations

import os
import re
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


#: What each kind of store looks like on disk (for the refusal of a path that is not one).
LOOKS = {
    "file": "an embedding file or a save_to_disk folder",
    "faiss": "a FAISS index file",
    "lancedb": "a NAME.lance table folder or a folder holding them",
    "chroma": "a Chroma folder (with chroma.sqlite3)",
    "qdrant": "a Qdrant local folder (with meta.json and collection/)",
    "milvus": "a Milvus Lite .db file or folder",
}


def check_kind(path: Path, kind: str, option: str) -> None:
    """Refuse, before any engine opens it, a path that is not a store of the ``kind`` given: an engine opening a
    folder that is not its own writes its files into it (Chroma's ``chroma.sqlite3``, Qdrant's ``meta.json``)."""
    found = guess_kind(path)
    if found == kind or (kind == "faiss" and found == "file" and path.is_file()):
        return  # a file given as FAISS: its header is checked before FAISS reads it (check_faiss_file)
    raise StoreError(
        f"{option}: {str(path)!r} is not {LOOKS[kind]}; it looks like {LOOKS[found]} (kind {found!r}): give that "
        "kind, or leave kind out to have it guessed"
    )


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
    if kind is not None:
        check_kind(source, kind, option)
    return store_class(source, option, collection=collection, metric=metric, id_column=id_column)


def create_writer(
    kind: str, path: str | os.PathLike, *, dimension: int, metric: str, collection: str = "migrated", **options: Any
) -> StoreWriter:
    """A writer of a new store of ``kind`` at ``path`` (which must not exist yet, except an in-place ``.npy``
    being resumed)."""
    _, writer_class = _classes(kind, "kind")
    check_collection_name(kind, collection, "collection")
    return writer_class(Path(os.fspath(path)), dimension, metric, collection, **options)


def cannot_hold(kind: str, ids) -> str | None:
    """Why a store of ``kind`` cannot hold ``ids`` (``StoreWriter.cannot_hold``), or None when it can."""
    _, writer_class = _classes(kind, "kind")
    return writer_class.cannot_hold(ids)


#: Collection names each database accepts (Chroma refuses others with a raw validation error when it writes).
_CHROMA_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{1,510})[A-Za-z0-9]")


def check_collection_name(kind: str, name: str, argument: str) -> None:
    """Refuse, before anything is written, a collection name the store of ``kind`` would refuse (``argument``: what
    gave the name; apply names its collection after its output)."""
    if kind == "chroma" and not _CHROMA_NAME.fullmatch(name):
        raise ValueError(
            f"{argument}: {name!r} is not a Chroma collection name: expected 3 to 512 letters, digits, '.', '_' or "
            "'-', starting and ending with a letter or digit"
        )


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
    "cannot_hold",
    "check_faiss_file",
    "check_ids",
    "check_kind",
    "create_writer",
    "exact_batches",
    "fingerprint",
    "guess_kind",
    "open_store",
    "writes_in_place",
]
