"""The one small protocol every vector store speaks: open it, read its ids and vectors in batches, its count,
dimension and metric, search it when it has its own ANN, and write a *new* collection (never the old one).

A store is opened by ``open_store(path, kind=None)``: ``kind`` is guessed from the path (``.index``/``.faiss``: FAISS;
``.lance`` folder or a folder of them: LanceDB; a Chroma, Qdrant or Milvus Lite folder or file by its marker files;
an embedding file: ``.npy``, ``.parquet``, ... or a Hugging Face folder). ``create_store(kind, path, ...)`` returns a
``StoreWriter`` for the new collection."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.atomic import gone, process_tag

#: Rows per batch when a store is read.
BATCH_ROWS = 8192


#: The name of a snapshot's temporary folder: this prefix, the process tag (``HOST-PID``), a random part.
SNAPSHOT_PREFIX = "latentstitch-store-"


def clear_stale_snapshots(folder: Path | None = None) -> list[Path]:
    """Remove the snapshot folders in ``folder`` (default: ``TMPDIR``) left by processes of this machine that no
    longer run (a killed ``migrate`` run cannot remove its own copy); returns them. A snapshot of a running process,
    of another machine, or named by an older version (no process in its name) is never touched."""
    root = Path(tempfile.gettempdir() if folder is None else folder)
    removed = []
    for path in root.glob(f"{SNAPSHOT_PREFIX}*"):
        tag = path.name[len(SNAPSHOT_PREFIX) :].rsplit("-", 1)[0]
        if path.is_dir() and not path.is_symlink() and gone(tag):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class StoreError(ValueError):
    """A store (or the option naming it) cannot be used; the message names both."""


class VectorStore:
    """An opened store: ``count``, ``dimension``, ``metric`` ("ip", "cosine" or "l2"), ``batches(rows)`` of
    ``(ids, float32 vectors)``, ``read()`` of everything, ``search(queries, k)`` (positions of the store's own ANN
    answers, or None when it has none) and ``fingerprint()`` (sha256 of its files)."""

    kind = "store"
    #: The store's own ANN search exists (the certificate then reads it).
    has_search = False
    #: The store has no ids of its own: its ids are its row numbers (a ``.npy`` file, a bare flat FAISS index).
    ids_are_rows = False
    #: The store's ids mix integers and text (a Qdrant collection of unsigned integers and UUIDs). They are read as
    #: text (an array of ids holds one type); a new store of the same kind gives each id its own type back, and
    #: ``apply_migration`` refuses another kind, which would keep the integers as text.
    mixed_ids = False
    _digest: str | None = None  # digest()'s, once computed

    def __init__(self, path: Path, option: str, collection: str | None = None):
        self.path, self.option, self.collection = path, option, collection
        self.count = 0
        self.dimension = 0
        self.metric = "cosine"

    def error(self, message: str) -> StoreError:
        return StoreError(f"{self.option}: {str(self.path)!r} {message}")

    def batches(self, rows: int = BATCH_ROWS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        raise NotImplementedError

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        """All ids and vectors (float32), ids checked: present and each once."""
        parts = list(self.batches())
        if not parts:
            raise self.error("holds no vectors")
        ids = np.concatenate([p[0] for p in parts])
        vectors = np.concatenate([p[1] for p in parts]).astype(np.float32, copy=False)
        check_ids(ids, self.error)
        return ids, vectors

    def search(self, queries: np.ndarray, k: int) -> np.ndarray | None:
        """Ids (n, k) of the store's own search (its ANN index, or an exact search for an embedding file), or None
        where the store cannot be searched. ``has_search``: the store has an index of its own."""
        return None

    def fingerprint(self) -> str:
        return fingerprint(self.path)

    def digest(self) -> str:
        """``fingerprint()``, computed once per opened store (it reads every byte of the index): what ``migrate fit``
        records, ``check_index`` compares and ``apply``'s manifest holds, without hashing the index twice."""
        if self._digest is None:
            self._digest = self.fingerprint()
        return self._digest

    def snapshot(self) -> Path:
        """A private copy of the store for an engine that writes into the folder it opens and has no read-only
        mode (Chroma, Qdrant's local mode, Milvus Lite): the engine opens the copy, the user's store is never
        written. The copy lives in a fresh temporary folder (``TMPDIR``) named after this process, removed on
        ``close`` or at exit; copies left by a process that was killed are removed by the next snapshot
        (``clear_stale_snapshots``)."""
        clear_stale_snapshots()
        folder = Path(tempfile.mkdtemp(prefix=f"{SNAPSHOT_PREFIX}{process_tag()}-"))
        self._snapshot = weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
        copy = folder / self.path.name
        if self.path.is_dir():
            shutil.copytree(self.path, copy, symlinks=True)
        else:
            shutil.copy2(self.path, copy)
        return copy

    def close(self) -> None:
        """Release the store (database clients hold locks or servers) and remove its snapshot, if any."""
        self.release()
        if getattr(self, "_snapshot", None) is not None:
            self._snapshot()

    def release(self) -> None:
        """Close the engine's client (what ``close`` does before it removes a snapshot)."""

    def describe(self) -> str:
        named = f" collection {self.collection!r}" if self.collection else ""
        return f"{self.kind}{named}: {self.count} x {self.dimension}, metric {self.metric}"

    def writer_options(self) -> dict[str, Any]:
        """What a new collection of the same kind copies from this one (index type, parameters)."""
        return {}


class StoreWriter:
    """A new collection being written: ``add(ids, vectors)`` in batches, then ``close()`` makes it whole. The
    writer writes at ``path`` only (a path that does not exist yet). A writer with ``ids_first`` (a file format that
    stores the ids beside the vectors) streams its batches when it is given every id up front (``begin(ids)``). A
    writer ``in_place`` (a memory-mapped ``.npy``, whose ids are its row numbers) takes rows at an offset instead
    (``write_at``) and reads them back (``read_at``: a resume checks the rows it trusts)."""

    ids_first = False
    in_place = False

    def __init__(self, path: Path, dimension: int, metric: str, collection: str, **options: Any):
        self.path, self.dimension, self.metric, self.collection = path, dimension, metric, collection
        self.options = options

    def begin(self, ids: np.ndarray) -> None:
        """Every id of the collection, in the order ``add`` will give the rows (only for ``ids_first`` writers)."""

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        raise NotImplementedError

    @staticmethod
    def cannot_hold(ids: np.ndarray) -> str | None:
        """Why a store of this kind cannot hold ``ids`` (some of a store's ids, checked before anything is
        bridged), or None when it can."""
        return None

    @staticmethod
    def writes_in_place(path: Path) -> bool:
        """Whether a writer of this class at ``path`` is ``in_place`` (known before it is created)."""
        return False

    def write_at(self, start: int, vectors: np.ndarray) -> None:
        raise NotImplementedError(f"{type(self).__name__} is not written in place")

    def read_at(self, start: int, rows: int) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} is not written in place")

    def close(self) -> None:
        pass


def exact_batches(
    batches: Iterable[tuple[np.ndarray, np.ndarray]], rows: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The same rows in batches of exactly ``rows`` (the last one shorter), whatever sizes ``batches`` yields: an
    engine may cap its batches (Chroma's max batch size, Milvus' iterator) or cut them at its fragments (LanceDB).
    Holds at most ``rows`` rows plus one of the engine's batches."""
    held_ids: list[np.ndarray] = []
    held_vectors: list[np.ndarray] = []
    count = 0
    for ids, vectors in batches:
        ids, vectors = np.asarray(ids), np.asarray(vectors)
        while len(ids):
            take = min(rows - count, len(ids))
            held_ids.append(ids[:take])
            held_vectors.append(vectors[:take])
            ids, vectors, count = ids[take:], vectors[take:], count + take
            if count == rows:
                yield _joined(held_ids), _joined(held_vectors)
                held_ids, held_vectors, count = [], [], 0
    if count:
        yield _joined(held_ids), _joined(held_vectors)


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def check_ids(ids: np.ndarray, error: Callable[[str], Exception]) -> None:
    """Ids are present (no None / empty string / NaN) and each appears once."""
    ids = np.asarray(ids)
    if ids.dtype.kind == "f":
        raise error("holds floating-point ids; ids must be integers or strings")
    if ids.dtype.kind in "OUS":
        empty = np.array([v is None or str(v) == "" for v in ids.tolist()])
        if empty.any():
            raise error(f"has {int(empty.sum())} missing ids (first at row {int(np.flatnonzero(empty)[0])})")
    unique, counts = np.unique(ids.astype(str) if ids.dtype.kind == "O" else ids, return_counts=True)
    if len(unique) != len(ids):
        repeated = unique[counts > 1]
        shown = ", ".join(map(str, repeated[:5]))
        raise error(f"has {len(ids) - len(unique)} duplicated ids (e.g. {shown}); each id must appear once")


#: Each fingerprinted path (resolved) -> (the stat of its files when hashed, the digest).
_FINGERPRINTS: dict[str, tuple[tuple, str]] = {}
#: A file changed less than this many seconds before it was hashed leaves no cached digest: a second change within
#: the file system's timestamp granularity (1-2 s on some) could otherwise leave its stat as it was.
RECENT_SECONDS = 2.0


def _files(path: Path) -> list[Path]:
    return [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())


def _stats(path: Path, files: list[Path]) -> tuple:
    """What identifies each file's content without reading it: name, device, inode, size, modification and change
    times (the change time is set by the system on every write, truncation or rename; no program can set it)."""
    out = []
    for file in files:
        st = file.stat()
        out.append(
            (
                str(file.relative_to(path)) if path.is_dir() else "",
                st.st_dev,
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
            )
        )
    return tuple(out)


def fingerprint(path: Path) -> str:
    """sha256 over a file, or over a folder's files (relative names and contents, in sorted order), read in 4 MiB
    blocks (memory: one block). Cached in this process by the files' stat (``_stats``): an unchanged index is
    hashed once per process, however many times it is opened; a file written, truncated or replaced since has
    another change time (or size, or inode) and is hashed again. A file changed less than ``RECENT_SECONDS`` before it
    was hashed is not cached."""
    files = _files(path)
    key = _stats(path, files)
    name = str(path.resolve())
    cached = _FINGERPRINTS.get(name)
    if cached is not None and cached[0] == key:
        return cached[1]
    started = time.time_ns()
    digest = hashlib.sha256()
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode() + b"\0")
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
    value = digest.hexdigest()
    settled = all(started - max(s[4], s[5]) > RECENT_SECONDS * 1e9 for s in key)
    if settled and _stats(path, _files(path)) == key:  # unchanged while it was read
        _FINGERPRINTS[name] = (key, value)
    return value


def unit_norm(vectors: np.ndarray, tolerance: float = 1e-3) -> bool:
    """Whether every row has norm 1 (an inner-product index of unit vectors is a cosine index)."""
    norms = np.linalg.norm(np.asarray(vectors[:4096], dtype=np.float64), axis=1)
    return bool(len(norms)) and bool(np.all(np.abs(norms - 1) < tolerance))


def as_path(path: str | os.PathLike, option: str) -> Path:
    target = Path(os.fspath(path))
    if not target.exists():
        raise StoreError(f"{option}: no such file or folder: {str(target)!r}")
    return target
