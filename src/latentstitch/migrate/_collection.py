"""The new collection a cascade fills as it serves: each document's new-model vector, written the first time a query
touches it and read back on every later touch. Every writer holds one lock (``NAME.lock`` beside the collection,
``_core.locks.hold_lock`` with a wait: searches take turns, briefly) and adds only the ids still missing once it holds
it, so that two searches adding the same documents at once write each of them once and lose none; a write is atomic
(a new FAISS file renamed over the old, a LanceDB commit, a Qdrant upsert) or, for ``.npy``, row by row in place with
NaN marking a row not yet written (a row cut by a kill keeps a NaN and is written again).

Kinds (``open_collection(path, ..., kind=None)`` guesses from the suffix, else the old store's kind):

- ``npy``: a ``(count, dimension)`` float32 ``.npy`` aligned with the old store's rows (the layout ``migrate apply``
  writes for a ``.npy`` index), NaN rows not yet embedded.
- ``faiss``: a flat FAISS index inside an ``IndexIDMap2`` (integer ids), the index's metric.
- ``lancedb``: a LanceDB folder with one table (``id``, ``vector``).
- ``qdrant``: a Qdrant local folder with one collection of the index's distance.

The old store is never written: only this collection is."""

from __future__ import annotations

import contextlib
import json
import os
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

    def error(self, message: str) -> StoreError:
        return StoreError(f"{self.option}: {str(self.path)!r} {message}")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            with hold_lock(lock, f"{self.option}: {str(self.path)!r} is being written by another search", LOCK_WAIT):
                yield
        except FolderBusy as error:
            raise self.error(f"stayed locked for {LOCK_WAIT:.0f} s: {error}") from None

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

    def count_present(self) -> int:
        raise NotImplementedError

    def log_path(self) -> Path:
        return self.path.with_name(self.path.name + ".cascade.json")

    def usage(self) -> dict[str, int]:
        """The searches' running totals: queries, candidates looked up, found already there, embedded."""
        try:
            payload = json.loads(self.log_path().read_text())
            return {key: int(payload.get(key, 0)) for key in USAGE}
        except (OSError, ValueError, TypeError, AttributeError):
            return dict.fromkeys(USAGE, 0)

    def record(self, **counts: int) -> None:
        """Add ``counts`` to the usage log (under the lock; the log is rewritten atomically)."""
        with self.locked():
            usage = self.usage()
            for key, value in counts.items():
                usage[key] += int(value)
            write_text(self.log_path(), json.dumps(usage, indent=2) + "\n", option=self.option)


USAGE = ("searches", "queries", "candidates", "reused", "embedded")


def _id_positions(store: VectorStore) -> dict[Any, int]:
    """Each id of the old store -> its row in the store's reading order."""
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


class FaissCollection(NewCollection):
    kind = "faiss"

    def __init__(self, path: Path, store: VectorStore, dimension: int, metric: str, option: str):
        super().__init__(path, store, dimension, metric, option)
        self.lib = require("faiss", "faiss", package="faiss-cpu")
        if path.exists():
            index = self._read()
            if index.d != dimension:
                raise self.error(f"holds {index.d}-dimensional vectors, not the new model's {dimension}")

    def _read(self):
        try:
            return self.lib.read_index(str(self.path))
        except RuntimeError as error:
            raise self.error(f"cannot be read by FAISS ({str(error).splitlines()[0][:200]})") from None

    def _held(self) -> tuple[Any, Any, np.ndarray]:
        """The index file's owning object, its id-map view (which points into the owner: both are kept together)
        and its ids. Outside the lock, read again only when the file's stat changed (every write replaces it);
        a stat can repeat (a reused inode, the same size, a coarse clock: seen with three processes), so a writer
        holding the lock reads the file afresh (``forget``) and a stale read outside it only misses ids that a later
        check under the lock finds."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None, None, np.zeros(0, np.int64)
        version = (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
        cached = getattr(self, "_cached", None)  # one read of it: another thread may replace it meanwhile
        if cached is None or cached[0] != version:
            owner = self._read()
            index = self.lib.downcast_index(owner)
            if not hasattr(index, "id_map"):
                raise self.error("is not a FAISS index with an id map (not a collection written by migrate search)")
            held = self.lib.vector_to_array(index.id_map)
            vectors = self.lib.downcast_index(index.index).reconstruct_n(0, index.ntotal) if len(held) else None
            order = np.argsort(held, kind="stable")
            cached = (version, owner, index, held, vectors, order)
            self._cached = cached
        return cached[1:4]

    def forget(self) -> None:
        self._cached = None

    def _vectors_of(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which ``ids`` the index holds, and their vectors (NaN rows where not): one sorted search, no loop."""
        if self._held()[0] is None:
            return np.zeros(len(ids), bool), np.full((len(ids), self.dimension), np.nan, np.float32)
        cached = self._cached
        vectors = np.full((len(ids), self.dimension), np.nan, np.float32)
        if cached is None or cached[4] is None:
            return np.zeros(len(ids), bool), vectors
        held, stored, order = cached[3], cached[4], cached[5]
        where = np.clip(np.searchsorted(held[order], ids), 0, len(held) - 1)
        found = held[order][where] == ids
        vectors[found] = stored[order[where[found]]]
        return found, vectors

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._vectors_of(np.asarray(ids).astype(np.int64))

    def _write(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        owner, index, _ = self._held()
        self._cached = None  # the object below is changed: the next read takes the file written
        if index is None:
            metric = self.lib.METRIC_L2 if self.metric == "l2" else self.lib.METRIC_INNER_PRODUCT
            index = self.lib.IndexIDMap2(self.lib.IndexFlat(self.dimension, metric))
        index.add_with_ids(np.ascontiguousarray(vectors, np.float32), np.asarray(ids).astype(np.int64))
        with atomic_path(self.path, option=self.option) as temporary:
            self.lib.write_index(index, str(temporary))
        del owner

    def count_present(self) -> int:
        return len(self._held()[2])


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
