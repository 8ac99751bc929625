"""The new collection a cascade fills as it serves: each document's new-model vector, written the first time a query
touches it and read back on every later touch. Every writer holds one lock (``NAME.lock`` beside the collection,
``_core.locks.hold_lock`` with a wait: searches take turns, briefly) and adds only the ids still missing once it holds
it, so that two searches adding the same documents at once write each of them once and lose none; a write is atomic
(a FAISS part file renamed into place, a LanceDB commit, a Qdrant upsert) or, for ``.npy``, row by row in place with
NaN marking a row not yet written (a row cut by a kill keeps a NaN and is written again). A write costs the rows it
adds, not the collection's size (``benchmarks migration_scale``: at 1M vectors). The searches' usage counts are
written to ``NAME.cascade.json`` at most once a second by an open collection (``record``).

Kinds (``open_collection(path, ..., kind=None)`` guesses from the suffix, else the old store's kind):

- ``npy``: a ``(count, dimension)`` float32 ``.npy`` aligned with the old store's rows (the layout ``migrate apply``
  writes for a ``.npy`` index), NaN rows not yet embedded.
- ``faiss``: a flat FAISS index inside an ``IndexIDMap2`` (integer ids), the index's metric, with the rows written
  since it was last rewritten in ``NAME.parts/`` (folded into the index file as the collection doubles, once it is
  complete, and by ``compact()``; see ``FaissCollection``).
- ``lancedb``: a LanceDB folder with one table (``id``, ``vector``).
- ``qdrant``: a Qdrant local folder with one collection of the index's distance.

The old store is never written: only this collection is."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.atomic import atomic_path, write_text
from latentstitch._core.extras import require
from latentstitch._core.locks import FolderBusy, hold_lock
from latentstitch._core.params import check_choice, check_positive_int
from latentstitch.migrate._retrieval import METRICS
from latentstitch.migrate.stores import StoreError, VectorStore

COLLECTION_KINDS = ("npy", "faiss", "lancedb", "qdrant")
#: Seconds a writer waits for the lock held by another search before it gives up with an error.
LOCK_WAIT = 120.0
#: The old store's kind -> the kind of new collection written beside it by default.
DEFAULT_KIND = {"file": "npy", "faiss": "faiss", "lancedb": "lancedb", "qdrant": "qdrant"}


class NewCollection:
    """A new collection: ``lookup(ids) -> (found mask, vectors)``, ``add_missing(ids, vectors) -> rows written``
    (only the ids not there yet), ``count_present()``, and a small usage log (``record``/``usage``)."""

    kind = "collection"

    def __init__(self, path: Path, store: VectorStore, dimension: int, metric: str, option: str):
        self.path, self.store, self.dimension, self.metric, self.option = path, store, dimension, metric, option
        self.total = store.count
        #: The row norms of ``blocks`` a cascade searched, by block key (kept while those blocks are there).
        self.block_norms: dict[Any, Any] = {}
        #: The inverted lists of its keyed blocks, once a cascade's search reads them (``_lists.CollectionLists``).
        self.block_lists: Any = None
        self._usage = _PendingUsage(path, option)
        weakref.finalize(self, self._usage.flush_quietly)  # what it recorded is written, at the latest at exit

    def error(self, message: str) -> StoreError:
        return StoreError(f"{self.option}: {str(self.path)!r} {message}")

    def locked(self) -> contextlib.AbstractContextManager[None]:
        return _locked(self.path, self.option)

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def add_missing(self, ids: np.ndarray, vectors: np.ndarray) -> int:
        """Under the lock: write the rows of ``ids`` the collection does not hold yet; how many were written."""
        with self.locked():
            self.forget()  # under the lock, only what is on disk now counts
            found, _ = self.lookup(ids)
            if found.all():
                return 0
            self._write(ids[~found], vectors[~found])
            return int((~found).sum())

    def _write(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        raise NotImplementedError

    def forget(self) -> None:
        """Drop what is cached of the collection (read again from disk next time)."""

    def compact(self) -> None:
        """Make the collection's main file hold every row written (a FAISS collection folds its part files into its
        index file; the other kinds are whole after every write)."""

    def count_present(self) -> int:
        raise NotImplementedError

    def held(self, rows: int = 65536) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every id the collection holds with its new vector, ``rows`` at a time (``(ids, vectors)`` blocks, each id
        once): what the cascade's own exact search reads (``_cascade``). Read without the lock: a row written
        meanwhile may be missed (it is found by the next search), none is read half-written."""
        raise NotImplementedError

    def blocks(self, rows: int = 65536) -> Iterator[tuple[Any, np.ndarray, np.ndarray]]:
        """``held``'s blocks, each with a key naming content that never changes (``None`` when it may): what a
        search computes of a keyed block (its rows' norms) can be kept with the open collection."""
        for ids, vectors in self.held(rows):
            yield None, ids, vectors

    def log_path(self) -> Path:
        return self.path.with_name(self.path.name + ".cascade.json")

    def usage(self) -> dict[str, int]:
        """The searches' running totals: queries, candidates looked up, found already there, embedded (the log's,
        with what this object has recorded since it last wrote it)."""
        logged, pending = _read_usage(self.log_path()), self._usage.counts
        return {key: logged[key] + pending.get(key, 0) for key in USAGE}

    def record(self, **counts: int) -> None:
        """Add ``counts`` to the usage log. The log is rewritten (atomically, under the lock) at most once every
        ``USAGE_EVERY`` seconds per collection object, and by ``flush_usage`` (a search given the collection by
        path flushes at its end; an object kept open also flushes when it is collected or the process exits): a
        search served from an open collection does not pay for a locked, synced write of its counts."""
        if self._usage.add(counts):
            self.flush_usage()

    def flush_usage(self) -> None:
        """Write the counts recorded by this object into the usage log now."""
        self._usage.flush()


USAGE = ("searches", "queries", "candidates", "reused", "embedded", "from_collection")
#: Seconds between two writes of the usage log by one collection object.
USAGE_EVERY = 1.0


def _read_usage(log: Path) -> dict[str, int]:
    try:
        payload = json.loads(log.read_text())
        return {key: int(payload.get(key, 0)) for key in USAGE}
    except (OSError, ValueError, TypeError, AttributeError):
        return dict.fromkeys(USAGE, 0)


class _PendingUsage:
    """A collection object's usage counts not written to its log yet (``NewCollection.record``)."""

    def __init__(self, path: Path, option: str):
        self.path, self.option = path, option
        self.counts: dict[str, int] = {}
        self.guard = threading.Lock()
        self.flushed = -float("inf")

    def add(self, counts: dict[str, int]) -> bool:
        """Add ``counts``; whether the log is due to be written."""
        with self.guard:
            for key, value in counts.items():
                self.counts[key] = self.counts.get(key, 0) + int(value)
            return time.monotonic() - self.flushed >= USAGE_EVERY

    def flush(self) -> None:
        with self.guard:
            counts, self.counts, self.flushed = self.counts, {}, time.monotonic()
        if not any(counts.values()):
            return
        try:
            with _locked(self.path, self.option):
                log = self.path.with_name(self.path.name + ".cascade.json")
                usage = _read_usage(log)
                for key, value in counts.items():
                    usage[key] += value
                write_text(log, json.dumps(usage, indent=2) + "\n", option=self.option)
        except BaseException:
            self.add(counts)  # kept for the next write
            raise

    def flush_quietly(self) -> None:
        """``flush`` when the object is collected or the process exits: a collection removed meanwhile (a temporary
        folder) is not an error then."""
        with contextlib.suppress(OSError, StoreError):
            self.flush()


@contextlib.contextmanager
def _locked(path: Path, option: str) -> Iterator[None]:
    """The collection's lock (``NAME.lock`` beside it), waited for up to ``LOCK_WAIT`` seconds."""
    lock = path.with_name(path.name + ".lock")
    try:
        with hold_lock(lock, f"{option}: {str(path)!r} is being written by another search", LOCK_WAIT):
            yield
    except FolderBusy as error:
        raise StoreError(f"{option}: {str(path)!r} stayed locked for {LOCK_WAIT:.0f} s: {error}") from None


def _id_positions(store: VectorStore) -> dict[Any, int] | None:
    """Each id of the old store -> its row in the store's reading order; None for a store whose ids are its row
    numbers (nothing to read: a search given the collection by path does not read the whole store)."""
    if store.ids_are_rows:
        return None
    out: dict[Any, int] = {}
    row = 0
    for ids, _ in store.batches():
        for value in np.asarray(ids).tolist():
            out[value] = row
            row += 1
    return out


class NpyCollection(NewCollection):
    kind = "npy"

    def __init__(self, path: Path, store: VectorStore, dimension: int, metric: str, option: str):
        super().__init__(path, store, dimension, metric, option)
        self.rows = _id_positions(store)
        if not path.exists():
            with self.locked():
                if not path.exists():
                    with atomic_path(path, option=option) as temporary:
                        memmap = np.lib.format.open_memmap(
                            temporary, mode="w+", dtype=np.float32, shape=(self.total, dimension)
                        )
                        memmap[:] = np.nan
                        memmap.flush()
                        del memmap
        self._check(np.load(path, mmap_mode="r"))

    def _check(self, array: np.ndarray) -> None:
        if array.dtype != np.float32 or array.shape != (self.total, self.dimension):
            raise self.error(
                f"holds a {array.dtype} array of shape {array.shape}; this index's new collection is float32 of shape "
                f"({self.total}, {self.dimension}) (another index's, or not a collection written by migrate search)"
            )

    def _positions(self, ids: np.ndarray) -> np.ndarray:
        if self.rows is None:  # the ids are the rows
            ids = np.asarray(ids)
            outside = ids.dtype.kind not in "iu" or (len(ids) and not ((ids >= 0) & (ids < self.total)).all())
            if outside:
                bad = next(v for v in ids.tolist() if not isinstance(v, int) or not 0 <= v < self.total)
                raise self.error(f"cannot hold id {bad!r}: it is not in the index")
            return ids.astype(np.int64)
        try:
            return np.asarray([self.rows[value] for value in np.asarray(ids).tolist()], dtype=np.int64)
        except KeyError as error:
            raise self.error(f"cannot hold id {error.args[0]!r}: it is not in the index") from None

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = np.array(np.load(self.path, mmap_mode="r")[self._positions(ids)])
        return np.isfinite(rows).all(axis=1), rows

    def _write(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        # in place, under the lock: a row cut by a kill keeps a NaN and counts as missing (written again)
        memmap = np.load(self.path, mmap_mode="r+")
        positions = self._positions(ids)
        order = np.argsort(positions)
        memmap[positions[order]] = vectors[order]
        memmap.flush()
        del memmap

    def count_present(self) -> int:
        array = np.load(self.path, mmap_mode="r")
        return int(sum(np.isfinite(array[s : s + 65536]).all(axis=1).sum() for s in range(0, len(array), 65536)))

    def held(self, rows: int = 65536) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The finite rows, read ``rows`` at a time: the whole file is read (its NaN rows skipped)."""
        array = np.load(self.path, mmap_mode="r")
        ids_of = None
        if self.rows is not None:  # each row's id, in the store's reading order
            ids_of = np.empty(self.total, dtype=object)
            for value, row in self.rows.items():
                ids_of[row] = value
            ids_of = np.asarray(ids_of.tolist())
        for start in range(0, len(array), rows):
            block = np.array(array[start : start + rows])
            keep = np.isfinite(block).all(axis=1)
            if keep.any():
                positions = np.flatnonzero(keep) + start
                yield (positions if ids_of is None else ids_of[positions]), block[keep]


class FaissCollection(NewCollection):
    """A flat FAISS index inside an ``IndexIDMap2`` (``NAME.index``), and the rows written since it was last
    rewritten in ``NAME.index.parts/``: a write costs its own rows, not the collection's.

    The first write creates the index file; each later write adds one part file (``part-SEQUENCE-TOKEN.npy``, a
    structured array of ids and vectors, written atomically under a name never used again). Once the parts hold as
    many rows as the index file, the parts are folded into it (the file written anew, atomically, then the parts
    removed): the file is rewritten each time the collection doubles, so a row is copied a bounded number of times
    however many writes there are (amortised O(rows written) per write, where rewriting the file on every write cost
    O(collection)). Every ``MERGE_PARTS`` parts are merged into one (cost: the parts' rows), so a lookup lists a few
    files. When the collection holds every id of the index (``complete``), or on ``compact()``, the parts are folded
    into the file: ``NAME.index`` alone is then the new index, for any FAISS reader.

    Readers never take the lock: the index file is read again when its size changes (rows only grow, and its size is
    a function of its row count; a writer under the lock needs no fresh read), a part is read once (its name is never
    reused). A reader that lists a part a compaction then removes skips it; rows it misses (a stale read) are looked
    up again under the lock before anything is written, and a row held twice (a kill between a compaction's rename and
    the parts' removal) is counted once."""

    kind = "faiss"
    #: Part files merged into one when there are this many.
    MERGE_PARTS = 32

    def __init__(self, path: Path, store: VectorStore, dimension: int, metric: str, option: str):
        super().__init__(path, store, dimension, metric, option)
        self.lib = require("faiss", "faiss", package="faiss-cpu")
        self._base: tuple | None = None  # (stat, owner, index, held ids, vectors, sort order of held, held sorted)
        self._parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._part_rows: dict[int, np.ndarray] = {}  # id -> its vector, over the parts read
        self._part_rows_kept: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # (part, file key) -> rows not in it
        self._lock_state = threading.Lock()
        if path.exists():
            base = self._read_base()
            if base[2].d != dimension:
                raise self.error(f"holds {base[2].d}-dimensional vectors, not the new model's {dimension}")

    @property
    def parts_folder(self) -> Path:
        return self.path.with_name(self.path.name + ".parts")

    def _read(self):
        try:
            return self.lib.read_index(str(self.path))
        except RuntimeError as error:
            raise self.error(f"cannot be read by FAISS ({str(error).splitlines()[0][:200]})") from None

    def _read_base(self) -> tuple:
        """The index file (cached while its size, inode and time are the ones read): its owning object, its id-map
        view (which points into the owner: both are kept together), its ids, its vectors (a view of the owner's
        memory), their sort and the ids in that order."""
        try:
            stat = self.path.stat()
            size = (stat.st_size, stat.st_ino, stat.st_mtime_ns)  # rows only grow: the size alone tells a rewrite
        except FileNotFoundError:
            return (None, None, None, np.zeros(0, np.int64), None, np.zeros(0, np.int64), np.zeros(0, np.int64))
        base = self._base
        if base is None or base[0] != size:
            owner = self._read()
            index = self.lib.downcast_index(owner)
            if not hasattr(index, "id_map"):
                raise self.error("is not a FAISS index with an id map (not a collection written by migrate search)")
            held = self.lib.vector_to_array(index.id_map)
            flat = self.lib.downcast_index(index.index)
            if len(held) and hasattr(flat, "get_xb"):  # a view, not a copy: the owner is never changed once read
                vectors = self.lib.rev_swig_ptr(flat.get_xb(), len(held) * index.d).reshape(len(held), index.d)
            else:
                vectors = flat.reconstruct_n(0, index.ntotal) if len(held) else None
            order = np.argsort(held, kind="stable")
            base = (size, owner, index, held, vectors, order, held[order])
            self._base = base
        return base

    def _part_names(self) -> list[str]:
        try:
            names = os.listdir(self.parts_folder)
        except FileNotFoundError:
            return []
        return sorted(name for name in names if name.startswith("part-") and name.endswith(".npy"))

    def _read_parts(self) -> dict[int, np.ndarray]:
        """Each id held by the part files listed now -> its vector (a part read once; one removed is forgotten)."""
        names = self._part_names()
        with self._lock_state:
            if set(self._parts) - set(names):  # merged or folded into the file: forget them
                self._parts = {name: part for name, part in self._parts.items() if name in names}
                self._part_rows = {}
                for ids, vectors in self._parts.values():
                    self._part_rows.update(zip(ids.tolist(), vectors, strict=True))
            for name in names:
                if name in self._parts:
                    continue
                try:
                    data = np.load(self.parts_folder / name, allow_pickle=False)
                except FileNotFoundError:
                    continue  # folded into the file meanwhile (a stale read: checked again under the lock)
                except (OSError, ValueError) as error:
                    raise self.error(f"has a damaged part file {name!r} ({error})") from None
                if data.dtype.names != ("id", "vector") or data["vector"].shape[1:] != (self.dimension,):
                    raise self.error(f"has a part file {name!r} that is not a collection part")
                ids, vectors = data["id"].astype(np.int64), data["vector"].astype(np.float32)
                self._parts[name] = (ids, vectors)
                self._part_rows.update(zip(ids.tolist(), vectors, strict=True))
            return self._part_rows

    def forget(self) -> None:
        """Nothing to drop: the file is read again whenever its size changed and a part's name is never reused."""

    def _in_file(self, ids: np.ndarray, base: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Which ``ids`` the index file (``base``, default as read now) holds, and where (their rows in it, meaningful
        where held): a binary search in the file's sorted ids (``np.isin`` sorted them again on every call)."""
        _, _, _, held, _, order, ordered = base if base is not None else self._read_base()
        if not len(held):
            return np.zeros(len(ids), bool), np.zeros(len(ids), np.int64)
        where = np.clip(np.searchsorted(ordered, ids), 0, len(held) - 1)
        return ordered[where] == ids, order[where]

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(ids).astype(np.int64)
        base = self._read_base()
        parts = self._read_parts()
        vectors = np.full((len(ids), self.dimension), np.nan, np.float32)
        found, rows = self._in_file(ids, base)
        stored = base[4]
        if found.any():
            vectors[found] = stored[rows[found]]
        if parts:
            for row in np.flatnonzero(~found):
                vector = parts.get(int(ids[row]))
                if vector is not None:
                    vectors[row], found[row] = vector, True
        return found, vectors

    def _write(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = np.asarray(ids).astype(np.int64)
        vectors = np.ascontiguousarray(vectors, np.float32)
        if not self.path.exists():
            self._rewrite(ids, vectors)
            return
        name = self._write_part(ids, vectors)
        with self._lock_state:  # what was just written is known: not read back from disk
            self._parts[name] = (ids, vectors)
            self._part_rows.update(zip(ids.tolist(), vectors, strict=True))
        names = self._part_names()
        part_rows = len(self._read_parts())
        base_rows = len(self._read_base()[3])
        if part_rows >= base_rows or base_rows + part_rows >= self.total:
            self._compact()
        elif len(names) >= self.MERGE_PARTS:
            self._merge_parts(names)

    def _write_part(self, ids: np.ndarray, vectors: np.ndarray, names: list[str] | None = None) -> str:
        """A part file of these rows (atomically, under a name never used again); its name."""
        self.parts_folder.mkdir(exist_ok=True)
        sequence = max((int(name.split("-")[1]) for name in (names or self._part_names())), default=0) + 1
        data = np.empty(len(ids), dtype=[("id", "<i8"), ("vector", "<f4", (self.dimension,))])
        data["id"], data["vector"] = ids, vectors
        name = f"part-{sequence:09d}-{uuid.uuid4().hex}.npy"
        with atomic_path(self.parts_folder / name, option=self.option) as tmp:
            np.save(tmp, data, allow_pickle=False)  # the temporary path keeps the .npy suffix: saved as named
        return name

    def _merge_parts(self, names: list[str]) -> None:
        """Under the lock: the parts ``names`` written as one (then removed)."""
        self._read_parts()
        held = [self._parts[name] for name in names if name in self._parts]
        ids = np.concatenate([part[0] for part in held])
        ids, first = np.unique(ids, return_index=True)
        vectors = np.concatenate([part[1] for part in held])[first]
        self._write_part(ids, vectors, names)
        for name in names:
            (self.parts_folder / name).unlink(missing_ok=True)

    def compact(self) -> None:
        """Fold the part files into the index file (written anew, atomically), so that ``NAME.index`` alone holds
        every row written (done by itself when the parts have grown as large as the file, and once the collection is
        complete)."""
        with self.locked():
            self._compact()

    def _compact(self) -> None:
        names = self._part_names()
        if not names:
            return
        held = self._read_base()[3]
        ids, vectors = self._parts_held()
        keep = ~np.isin(ids, held)  # a kill after an earlier compaction's rename left its parts: not added twice
        if keep.any():
            ids, vectors = ids[keep], vectors[keep]
            self._rewrite(ids, vectors)
        for name in names:
            (self.parts_folder / name).unlink(missing_ok=True)

    def _rewrite(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """The index file written anew (atomically) with ``ids`` added to what it holds (read afresh: the cached
        index is never changed, a lookup may be reading it)."""
        if self.path.exists():
            owner = self._read()  # owns the C++ object the downcast view points into: kept until written
            index = self.lib.downcast_index(owner)
        else:
            metric = self.lib.METRIC_L2 if self.metric == "l2" else self.lib.METRIC_INNER_PRODUCT
            index = self.lib.IndexIDMap2(self.lib.IndexFlat(self.dimension, metric))
        index.add_with_ids(np.ascontiguousarray(vectors, np.float32), np.asarray(ids).astype(np.int64))
        with atomic_path(self.path, option=self.option) as temporary:
            self.lib.write_index(index, str(temporary))

    def _parts_held(self) -> tuple[np.ndarray, np.ndarray]:
        """The ids the part files hold (each once) and their vectors."""
        parts = self._read_parts()
        with self._lock_state:  # another thread may be adding to the dict
            ids = np.fromiter(parts.keys(), np.int64, len(parts))
            vectors = np.stack(list(parts.values())) if len(parts) else np.zeros((0, self.dimension), np.float32)
        return ids, vectors

    def count_present(self) -> int:
        base = self._read_base()
        ids, _ = self._parts_held()
        return len(base[3]) + int((~self._in_file(ids, base)[0]).sum())

    def held(self, rows: int = 65536) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for _, ids, vectors in self.blocks(rows):
            yield ids, vectors

    def blocks(self, rows: int = 65536) -> Iterator[tuple[Any, np.ndarray, np.ndarray]]:
        """The index file's rows (views of the vectors read; keyed by the file's size, inode and time and the
        block's start), then each part file's rows the file does not hold (keyed by the part's name, never reused,
        and the file's key): a search that kept what it computed of a block reads only the parts written since."""
        base = self._read_base()
        size, _, _, held, stored, _, _ = base
        for start in range(0, len(held), rows):
            yield (size, start), held[start : start + rows], stored[start : start + rows]
        self._read_parts()
        with self._lock_state:  # another thread may be reading parts in
            parts = list(self._parts.items())
        for name, (ids, vectors) in parts:
            key = (name, size)
            kept = self._part_rows_kept.get(key)
            if kept is None:  # a kill after a compaction's rename leaves rows held twice: counted once
                keep = ~self._in_file(ids, base)[0]
                kept = self._part_rows_kept[key] = (ids[keep], vectors[keep])
            for start in range(0, len(kept[0]), rows):
                yield (*key, start), kept[0][start : start + rows], kept[1][start : start + rows]
        listed = {name for name, _ in parts}
        for key in [key for key in self._part_rows_kept if key[0] not in listed or key[1] != size]:
            self._part_rows_kept.pop(key, None)


class LanceCollection(NewCollection):
    kind = "lancedb"
    table_name = "migrated"

    def __init__(self, path: Path, store: VectorStore, dimension: int, metric: str, option: str):
        super().__init__(path, store, dimension, metric, option)
        self.lib = require("lancedb", "lancedb", package="lancedb")

    def _table(self):
        if not self.path.exists():
            return None
        db = self.lib.connect(str(self.path))
        listed = db.list_tables()
        names = list(getattr(listed, "tables", listed))
        if self.table_name not in names:
            return None
        try:
            return db.open_table(self.table_name)
        except ValueError:  # listed while another search was creating it (read outside the lock): not there yet
            return None

    def _rows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The table's rows of ``ids`` (a filter per 1,000 ids: the table is not read whole)."""
        table = self._table()
        if table is None or not len(ids):
            return np.zeros(0), np.zeros((0, self.dimension), np.float32)
        got_ids, got = [], []
        for start in range(0, len(ids), 1000):
            part = np.asarray(ids[start : start + 1000]).tolist()
            listed = ", ".join(
                str(int(v)) if isinstance(v, (int, np.integer)) else "'" + str(v).replace("'", "''") + "'" for v in part
            )
            data = table.search().where(f"id IN ({listed})").select(["id", "vector"]).limit(None).to_arrow()
            got_ids.append(data.column("id").to_numpy())
            flat = data.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            got.append(flat.astype(np.float32, copy=False).reshape(len(data), self.dimension))
        return np.concatenate(got_ids), np.concatenate(got)

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        held_ids, held = self._rows(np.asarray(ids))
        ids = np.asarray(ids)
        vectors = np.full((len(ids), self.dimension), np.nan, np.float32)
        where = {value: row for row, value in enumerate(held_ids.tolist())}
        found = np.asarray([value in where for value in ids.tolist()], dtype=bool)
        for row in np.flatnonzero(found):
            vectors[row] = held[where[ids[row].item()]]
        return found, vectors

    def _write(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        import pyarrow as pa

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), self.dimension)
        batch = pa.table({"id": pa.array(np.asarray(ids)), "vector": column})
        table = self._table()
        if table is None:
            self.lib.connect(str(self.path)).create_table(self.table_name, data=batch)
        else:  # the engine's upsert on the id: an id already there is never added twice
            table.merge_insert("id").when_not_matched_insert_all().execute(batch)

    def count_present(self) -> int:
        table = self._table()
        return 0 if table is None else int(table.count_rows())

    def held(self, rows: int = 65536) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The table streamed in record batches of at most ``rows`` (one version of it: LanceDB reads a snapshot)."""
        table = self._table()
        if table is None:
            return
        for batch in table.search().select(["id", "vector"]).limit(None).to_batches(rows):
            if not len(batch):
                continue
            flat = batch.column("vector").flatten().to_numpy(zero_copy_only=False)
            yield batch.column("id").to_numpy(), flat.astype(np.float32).reshape(len(batch), self.dimension)  # owned


class QdrantCollection(NewCollection):
    """Qdrant's local mode lets one client open a folder at a time: each operation opens it under the lock."""

    kind = "qdrant"
    name = "migrated"

    @contextlib.contextmanager
    def _client(self) -> Iterator[Any]:
        lib = require("qdrant_client", "qdrant", package="qdrant-client")
        models = require("qdrant_client.models", "qdrant", package="qdrant-client")
        client = lib.QdrantClient(path=str(self.path))
        try:
            if not client.collection_exists(self.name):
                distance = getattr(models.Distance, {"cosine": "COSINE", "ip": "DOT", "l2": "EUCLID"}[self.metric])
                client.create_collection(
                    self.name, vectors_config=models.VectorParams(size=self.dimension, distance=distance)
                )
            yield client
        finally:
            client.close()

    def _lookup(self, client: Any, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(ids)
        got = {p.id: p.vector for p in client.retrieve(self.name, ids=ids.tolist(), with_vectors=True)}
        vectors = np.full((len(ids), self.dimension), np.nan, np.float32)
        found = np.asarray([value in got for value in ids.tolist()], dtype=bool)
        for row in np.flatnonzero(found):
            vectors[row] = got[ids[row].item()]
        return found, vectors

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with self.locked(), self._client() as client:
            return self._lookup(client, ids)

    def add_missing(self, ids: np.ndarray, vectors: np.ndarray) -> int:
        models = require("qdrant_client.models", "qdrant", package="qdrant-client")
        with self.locked(), self._client() as client:
            found, _ = self._lookup(client, ids)
            if found.all():
                return 0
            batch = models.Batch(ids=np.asarray(ids)[~found].tolist(), vectors=np.asarray(vectors)[~found].tolist())
            client.upsert(self.name, points=batch)
            return int((~found).sum())

    def count_present(self) -> int:
        with self.locked(), self._client() as client:
            return int(client.count(self.name, exact=True).count)

    def held(self, rows: int = 65536) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Scrolled ``rows`` points at a time; the local mode opens the folder under the lock, so every page is read
        before the first is given (a local folder is small: its client warns beyond 20,000 points)."""
        pages = []
        with self.locked(), self._client() as client:
            offset = None
            while True:
                points, offset = client.scroll(self.name, limit=rows, offset=offset, with_vectors=True)
                if points:
                    ids = np.asarray([p.id for p in points])
                    pages.append((ids, np.asarray([p.vector for p in points], dtype=np.float32)))
                if offset is None:
                    break
        yield from pages


CLASSES = {"npy": NpyCollection, "faiss": FaissCollection, "lancedb": LanceCollection, "qdrant": QdrantCollection}


def guess_collection_kind(path: Path, store: VectorStore) -> str:
    if path.suffix.lower() == ".npy":
        return "npy"
    if path.suffix.lower() in (".index", ".faiss"):
        return "faiss"
    if path.is_dir() and (path / "meta.json").exists():
        return "qdrant"
    return DEFAULT_KIND.get(store.kind, "npy")


def open_collection(
    path: str | os.PathLike,
    store: VectorStore,
    dimension: int,
    metric: str,
    *,
    kind: str | None = None,
    option: str = "new_store",
) -> NewCollection:
    """The new collection at ``path`` (created on first write; an ``.npy`` at once) for the old ``store``: the new
    model's ``dimension``, the migration's ``metric``. ``kind`` (one of ``COLLECTION_KINDS``) is guessed when None."""
    target = Path(os.fspath(path))
    if not isinstance(store, VectorStore):
        raise TypeError(f"store: expected a store opened by migrate.open_store, got {type(store).__name__}")
    dimension = check_positive_int(dimension, "dimension")
    metric = check_choice(metric, "metric", METRICS)
    try:
        if target.resolve() == Path(store.path).resolve():
            raise StoreError(f"{option}: {str(target)!r} is the old index itself; the new collection is another path")
    except OSError:
        pass
    chosen = kind or guess_collection_kind(target, store)
    if chosen not in CLASSES:
        raise StoreError(f"{option}: unknown collection kind {chosen!r}; expected one of {', '.join(COLLECTION_KINDS)}")
    if chosen == "faiss" and store.count and not store.ids_are_rows:
        first = next(store.batches(1))[0]
        if np.asarray(first).dtype.kind not in "iu":
            raise StoreError(f"{option}: a FAISS collection holds integer ids only; this index's ids are text")
    return CLASSES[chosen](target, store, dimension, metric, option)
