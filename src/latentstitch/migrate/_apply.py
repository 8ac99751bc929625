"""Stream an old index through a corpus-side bridge into a **new** collection, never touching the old one.

Chunks of ``chunk_rows`` vectors are bridged (float32 out; re-embedded items keep their true new vectors) and
written into a work folder beside the output, ``.NAME.partial-apply``, whose ``manifest.json`` records what the run
was given (the sha256 of the bridge files and of the source index, the source, the output kind, ``chunk_rows``, the
re-embedded sample's digest) and lists the chunks done, each with the digest of its bytes. An interrupted run
(Ctrl-C, a kill, a full disk) leaves that folder, named as partial; the same call resumes it and gives the identical
result: a chunk is trusted only when its bytes still have the recorded digest (others are bridged again), and a run
given anything else (another sample, index, migration, kind or chunk size) is refused. One run at a time writes a
work folder: it holds a lock on it (``_core.locks``: released by the system when the process ends, however it
ends), and a second run to the same output is refused at once. At the end the new store is built in the work folder
and renamed onto the output in one step; the manifest is written beside it (``OUTPUT.manifest.json``).

``client=``: the chunks are bridged on a Dask cluster (``"local"``: a ``LocalCluster`` of ``workers`` processes
started here; a ``distributed.Client`` or a scheduler address: that cluster), written by the workers with the same
protocol (see ``_apply_cluster``); on workers of the same kind of CPU the result has the same bytes as in process.
``device=``: where the bridge runs ("cuda" on a GPU; on a cluster, each worker's device)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.atomic import PARTIAL_MARK, commit_staged, refuse_inputs, refuse_inside_inputs, write_text
from latentstitch._core.locks import hold_lock
from latentstitch._core.params import check_device, check_positive_int
from latentstitch._core.progress import progress_bar
from latentstitch.migrate._chunks import (
    chunk_digest,
    chunk_ids,
    chunk_vectors,
    replace_sampled,
    verified_chunk,
    write_chunk_files,
)
from latentstitch.migrate._inputs import MigrationWarning, check_ids, check_vectors
from latentstitch.migrate._migration import Migration
from latentstitch.migrate._retrieval import prepare
from latentstitch.migrate.stores import (
    StoreWriter,
    VectorStore,
    cannot_hold,
    check_collection_name,
    create_writer,
    exact_batches,
    writes_in_place,
)

MANIFEST = "manifest.json"
LOCK = "lock"
#: What a manifest records of a run, in words for the refusal of a resume given something else.
GIVEN = {
    "bridge": "migration (its files changed)",
    "source": "index content (its files changed)",
    "source_path": "index",
    "source_kind": "index kind",
    "collection": "collection",
    "rows": "index size",
    "layout": "cluster setting (client)",
    "kind": "output kind (kind)",
    "chunk_rows": "chunk size (chunk_rows)",
    "dimension": "migration",
    "metric": "migration",
    "sample": "re-embedded sample (sample_ids / sample_new)",
}


@dataclass
class ApplyResult:
    output: Path
    manifest: Path
    rows: int
    dimension: int
    chunks: int
    resumed_chunks: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, Path) else v for k, v in self.__dict__.items()}


def work_folder(output: Path) -> Path:
    """The work folder of an apply into ``output``: hidden, beside it, and named as partial."""
    return output.with_name(f".{output.name}{PARTIAL_MARK}apply")


@contextmanager
def _naming_a_full_disk(work: Path, done: Callable[[], int], total: int) -> Iterator[None]:
    """A full disk (or quota) inside the block is said in words: how far the run got, that the old index is
    untouched, and that the same call resumes; other errors pass unchanged."""
    try:
        yield
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise OSError(
            error.errno,
            f"output: the disk is full after {done()} of {total} chunks; the old index is untouched and the partial "
            f"output is kept in {str(work)!r}: free space and run the same command again to resume",
        ) from None


@dataclass
class _Job:
    """One apply, its arguments checked, in its locked work folder: what each step reads. ``given`` is what the
    manifest records of the run (``GIVEN``)."""

    migration: Migration
    store: VectorStore
    output: Path
    work: Path
    given: dict[str, Any]
    replacements: dict[str, np.ndarray] | None
    device: str | None

    @property
    def kind(self) -> str:
        return self.given["kind"]

    @property
    def chunk_rows(self) -> int:
        return self.given["chunk_rows"]

    @property
    def total(self) -> int:
        """The number of chunks."""
        return -(-self.store.count // self.chunk_rows)

    @property
    def staged(self) -> Path:
        """Where the new store is built, in the work folder (renamed onto the output at the end)."""
        return self.work / ("out" + (self.output.suffix if self.kind in ("file", "faiss", "milvus") else ""))

    def new_writer(self) -> StoreWriter:
        options = {**self.store.writer_options(), "rows": self.store.count}
        return create_writer(
            self.kind,
            self.staged,
            dimension=self.migration.new_dimension,
            metric=self.migration.metric,
            collection=self.output.stem,
            **options,
        )

    def record(self, manifest: dict, number: int, digest: str) -> None:
        """Chunk ``number`` is written, its bytes have ``digest``: the manifest says so (atomically)."""
        manifest["done"][str(number)] = digest
        write_text(self.work / MANIFEST, json.dumps(manifest, indent=1), option="output")


def apply_migration(
    migration: Migration,
    migration_path: str | os.PathLike,
    store: VectorStore,
    output: str | os.PathLike,
    *,
    kind: str | None = None,
    sample_ids: Any = None,
    sample_new: Any = None,
    chunk_rows: int = 65_536,
    device: str | None = None,
    client: Any = None,
    workers: int | None = None,
    progress: bool = False,
) -> ApplyResult:
    """Bridge every vector of ``store`` with ``migration``'s corpus-side bridge into a new store at ``output``
    (``kind``: the source's by default); ``sample_ids``/``sample_new``: re-embedded items, written with their true
    new vectors; ``client``/``workers``: run the chunks on a Dask cluster. See the module docstring for resuming
    and what is written."""
    started = time.perf_counter()
    output = Path(os.fspath(output))
    _check_migration(migration, store)
    _warn_other_metric(migration, store)
    chunk_rows = check_positive_int(chunk_rows, "chunk_rows")
    if client is None:
        check_device(device, "device")  # on a cluster, each worker checks its own
    _check_output(output, store, migration_path)
    kind = kind or store.kind
    check_collection_name(kind, output.stem, "output")  # the new collection is named after the output
    _refuse_lost_ids(store, output, kind)
    replacements = _replacements(migration, sample_ids, sample_new, store)
    given = _given(migration, migration_path, store, kind, chunk_rows, replacements)
    work = work_folder(output)
    work.mkdir(exist_ok=True)
    busy = f"output: {str(output)!r} is being written by another apply right now; wait for it to end"
    with hold_lock(work / LOCK, busy):
        if output.exists():  # another run finished it (and removed the work folder) while this one was starting
            if {p.name for p in work.iterdir()} <= {LOCK}:
                shutil.rmtree(work, ignore_errors=True)  # the folder this run made again, to lock it
            raise FileExistsError(f"output: {str(output)!r} exists; apply writes a new collection, never over one")
        job = _Job(migration, store, output, work, given, replacements, device)
        manifest, resumed = _apply_locked(job, client, workers, progress)
        shutil.rmtree(work, ignore_errors=True)
    return ApplyResult(
        output, manifest, store.count, migration.new_dimension, job.total, resumed, time.perf_counter() - started
    )


def _given(
    migration: Migration,
    migration_path: str | os.PathLike,
    store: VectorStore,
    kind: str,
    chunk_rows: int,
    replacements: dict[str, np.ndarray] | None,
) -> dict[str, Any]:
    """What the manifest records of a run (``GIVEN``): a resume given anything else is refused."""
    return {
        "bridge": migration.bridge_sha256(migration_path),
        "source": store.digest(),
        "source_path": str(store.path),
        "source_kind": store.kind,
        "collection": store.collection,
        "rows": store.count,
        "layout": None,  # set once it is known whether the output is written in place
        "kind": kind,
        "chunk_rows": chunk_rows,
        "dimension": migration.new_dimension,
        "metric": migration.metric,
        "sample": _sample_digest(replacements),
    }


def _check_migration(migration: Migration, store: VectorStore) -> None:
    """A corpus-side migration fitted on vectors as wide as the store's."""
    if "corpus" not in migration.bridges:
        raise ValueError("migration: it has no corpus-side bridge; fit it with both modes to migrate the index")
    if migration.mode != "corpus":
        raise ValueError(
            "migration: the chosen mode is query-side: the index stays as it is and new queries are bridged "
            "(Migration.transform_queries); use apply only with a corpus-side migration"
        )
    if store.dimension != migration.old_dimension:
        raise ValueError(
            f"store: {store.describe()} has {store.dimension} features; the migration was fitted on "
            f"{migration.old_dimension}"
        )
    migration.check_index(store)  # the index fitted on (size and digest), when the migration recorded it


def _warn_other_metric(migration: Migration, store: VectorStore) -> None:
    """Warn when the store ranks by another metric than the migration was fitted under: the new index keeps the
    migration's, not the old index's (the bridge was fitted for it)."""
    if store.metric != migration.metric:
        warnings.warn(
            f"store: the store ({store.describe()}) ranks by {store.metric}, but the migration was fitted under "
            f"{migration.metric}: the new index is written for {migration.metric}, not the old index's metric; fit "
            "the migration under the store's metric to keep it",
            MigrationWarning,
            stacklevel=3,
        )


def _check_output(output: Path, store: VectorStore, migration_path: str | os.PathLike) -> None:
    """An output that is new, in a folder that exists, and neither an input nor inside the store's folder."""
    inputs = {"store": store.path, "migration_path": migration_path}
    refuse_inputs({"output": output}, inputs)  # the true cause first (not "exists")
    refuse_inside_inputs({"output": output}, inputs)
    if output.exists():
        raise FileExistsError(f"output: {str(output)!r} exists; apply writes a new collection, never over one")
    if not output.parent.is_dir():
        raise FileNotFoundError(f"output: the folder {str(output.parent)!r} does not exist")


def _apply_locked(job: _Job, client: Any, workers: int | None, progress: bool) -> tuple[Path, int]:
    """The apply itself, in its locked work folder: the chunks' plan read (and an interrupted run's verified),
    the chunks bridged, the new store written and the run finished; the final manifest and the chunks resumed."""
    # in process, a writer that can write at an offset (a memory-mapped .npy) gets each chunk directly (and is
    # resumed in place); otherwise the chunks are files, and the new store is built from them at the end
    in_place = client is None and writes_in_place(job.kind, job.staged)
    writer = job.new_writer() if in_place else None
    job.given["layout"] = "in-place" if in_place else "chunk-files"
    manifest = _resume(job, writer)
    resumed = len(manifest["done"])
    with _naming_a_full_disk(job.work, lambda: len(manifest["done"]), job.total):
        written = _bridge_all(job, manifest, writer, client, workers, progress)
    if written is not None and job.replacements and not resumed:
        _warn_unwritten(set(job.replacements) - written, len(job.replacements))
    with _naming_a_full_disk(job.work, lambda: job.total, job.total):
        if writer is None:
            writer = _build_from_chunks(job)
        writer.close()
        commit_staged(job.staged, job.output)
    return _finish(job, manifest), resumed


def _bridge_all(
    job: _Job, manifest: dict, in_place: StoreWriter | None, client: Any, workers: int | None, progress: bool
) -> set[str] | None:
    """Every chunk not done yet bridged and written, here or on the cluster (``client``), with a progress bar
    when asked: the re-embedded ids written with their true vectors (None on a cluster, which does not say)."""
    with progress_bar(bool(progress)) as bar:
        task = None if bar is None else bar.add_task(f"migrating {job.store.path.name}", total=job.store.count)

        def advance(rows: int) -> None:
            if bar is not None:
                bar.advance(task, rows)

        if client is not None:
            from latentstitch.migrate._apply_cluster import bridge_on_cluster

            bridge_on_cluster(
                client,
                workers,
                job.migration,
                job.store,
                job.chunk_rows,
                job.work,
                dict(manifest["done"]),
                job.replacements,
                job.device,
                partial(job.record, manifest),
                advance,
            )
            return None
        return _bridge_in_process(job, manifest, in_place, advance)


def _resume(job: _Job, in_place: StoreWriter | None) -> dict:
    """The work folder's manifest (a fresh one, or an interrupted run's given the same), without the chunks whose
    bytes are not the ones it recorded."""
    manifest = _open_manifest(job.work, job.given)
    _drop_unverified(manifest, job.work, in_place, job.chunk_rows)
    return manifest


def _bridge_in_process(
    job: _Job, manifest: dict, in_place: StoreWriter | None, advance: Callable[[int], None]
) -> set[str]:
    """Bridge here every chunk the manifest does not hold yet, each recorded once written; the re-embedded ids
    written with their true vectors."""
    start, written = 0, set()
    for number, (ids, vectors) in enumerate(exact_batches(job.store.batches(job.chunk_rows), job.chunk_rows)):
        if str(number) not in manifest["done"]:
            digest, replaced = _bridge_chunk(job, number, start, ids, vectors, in_place)
            written |= replaced
            job.record(manifest, number, digest)
        start += len(ids)
        advance(len(ids))
    return written


def _bridge_chunk(
    job: _Job, number: int, start: int, ids: np.ndarray, vectors: np.ndarray, in_place: StoreWriter | None
) -> tuple[str, set[str]]:
    """One chunk bridged, its re-embedded items' true vectors put back, written (at its rows of an in-place
    output, else as the work folder's chunk files): its digest and the re-embedded ids it held."""
    out = job.migration.transform_corpus(vectors, device=job.device)
    replaced = replace_sampled(out, ids, job.replacements)
    if in_place is None:
        return write_chunk_files(job.work, number, ids, out), replaced
    in_place.write_at(start, out)
    return chunk_digest(out), replaced


def _build_from_chunks(job: _Job) -> StoreWriter:
    """The new store written from the work folder's chunk files, in order (not closed yet)."""
    _remove(job.staged)  # a store an interrupted run had begun building from the chunks: built again
    writer = job.new_writer()
    if writer.ids_first:  # every id first: the batches then stream
        writer.begin(np.concatenate([chunk_ids(job.work, number) for number in range(job.total)]))
    start = 0
    for number in range(job.total):
        ids, vectors = chunk_ids(job.work, number), chunk_vectors(job.work, number)
        if writer.in_place:
            writer.write_at(start, vectors)
        else:
            writer.add(ids, vectors)
        start += len(ids)
    return writer


def _finish(job: _Job, manifest: dict) -> Path:
    """The run's manifest, complete, written beside the output: its path."""
    final = {**manifest, "output": str(job.output), "status": "complete"}
    path = job.output.with_name(job.output.name + ".manifest.json")
    write_text(path, json.dumps(final, indent=1) + "\n", option="output")
    return path


def _warn_unwritten(missing: set[str], total: int) -> None:
    """Warn when re-embedded items given to apply are not in the store (their true vectors went nowhere)."""
    if missing:
        warnings.warn(
            f"sample_ids: {len(missing)} of the {total} re-embedded ids are not in the store "
            f"({', '.join(sorted(missing)[:5])}{' ...' if len(missing) > 5 else ''}); their new vectors were not "
            "written: are they the store's ids?",
            MigrationWarning,
            stacklevel=4,
        )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _drop_unverified(manifest: dict, work: Path, in_place, chunk_rows: int) -> None:
    """Forget the chunks whose bytes are not the ones the manifest recorded (a file lost, cut or overwritten, an
    in-place output recreated empty): they are bridged again, never trusted."""
    for number, digest in list(manifest["done"].items()):
        if in_place is not None:
            good = chunk_digest(in_place.read_at(int(number) * chunk_rows, chunk_rows)) == digest
        else:
            good = verified_chunk(work, int(number), digest)
        if not good:
            del manifest["done"][number]


def _open_manifest(work: Path, given: dict) -> dict:
    """The work folder's manifest: a fresh one, or the interrupted run's when it was given the same."""
    path = work / MANIFEST
    if path.exists():
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            recorded = {k: manifest["hashes"][k] if k in ("bridge", "source") else manifest[k] for k in given}
            done = manifest["done"]
        except (ValueError, KeyError, TypeError):
            raise ValueError(
                f"output: the partial apply in {str(work)!r} has a damaged or older manifest; remove that folder to "
                "start again"
            ) from None
        differs = [k for k in given if recorded[k] != given[k]]
        if differs:
            words = ", ".join(dict.fromkeys(GIVEN[k] for k in differs))
            raise ValueError(
                f"output: the partial apply in {str(work)!r} was made with another {words}; remove that folder to "
                "start again, or resume with the same migration, index, sample, kind, chunk_rows and cluster setting"
            )
        if not isinstance(done, dict):
            raise ValueError(f"output: the partial apply in {str(work)!r} has a damaged manifest; remove that folder")
        return manifest
    hashes = {"bridge": given["bridge"], "source": given["source"]}
    manifest = {"hashes": hashes, **{k: v for k, v in given.items() if k not in hashes}, "done": {}}
    write_text(path, json.dumps(manifest, indent=1), option="output")
    return manifest


def _sample_digest(replacements: dict[str, np.ndarray] | None) -> str | None:
    """The digest of the re-embedded sample as apply uses it (ids and their vectors, in id order)."""
    if not replacements:
        return None
    digest = hashlib.sha256()
    for key in sorted(replacements):
        digest.update(key.encode("utf-8") + b"\0" + np.ascontiguousarray(replacements[key], np.float32).tobytes())
    return digest.hexdigest()


def _refuse_lost_ids(store: VectorStore, output: Path, kind: str) -> None:
    """Ids the output cannot hold, refused before anything is bridged: a kind that refuses the store's kind of id
    (FAISS: integers only; Qdrant: unsigned integers or UUIDs), or a ``.npy`` output (no ids: its ids are its row
    numbers) for a store with ids of its own. A store mixing integer and text ids (``VectorStore.mixed_ids``, read
    as text) is written only to its own kind, which gives each id its type back."""
    if store.mixed_ids:
        if kind != store.kind:
            raise ValueError(
                f"output: the store ({store.describe()}) mixes integer and text ids (read as text); a {kind} output "
                f"holds one type of id and would keep its integers as text: write a {store.kind} output, which gives "
                "each id its own type back"
            )
        return
    first = next(iter(store.batches(256)), None)  # the ids' type: one kind of id per store
    why = None if first is None else cannot_hold(kind, first[0])
    if why:
        raise ValueError(
            f"output: {str(output)!r}: {why}; the store ({store.describe()}) has such ids: write a kind that keeps "
            "them (a .parquet file or LanceDB)"
        )
    if writes_in_place(kind, output) and not store.ids_are_rows:
        raise ValueError(
            f"output: {str(output)!r} is a .npy file, which holds no ids (its ids are its row numbers), but the "
            f"store ({store.describe()}) has ids of its own: they would be lost; write a format that keeps them "
            f"(a .parquet, .npz or .safetensors file, or a {store.kind} store)"
        )


def _rows_of_sample(sample_ids: np.ndarray, store: VectorStore) -> None:
    """A store whose ids are its row numbers is given its re-embedded items by row number: other ids (a document's
    own id) would replace the wrong rows."""
    if sample_ids.dtype.kind not in "iu":
        raise ValueError(
            f"sample_ids: the store ({store.describe()}) has no ids of its own, its ids are its row numbers, but "
            f"sample_ids holds text ids (e.g. {str(sample_ids[0])!r}); give each re-embedded item's row number in "
            "the store"
        )
    outside = (sample_ids < 0) | (sample_ids >= store.count)
    if outside.any():
        raise ValueError(
            f"sample_ids: the store ({store.describe()}) has no ids of its own, its ids are its row numbers 0 to "
            f"{store.count - 1}, but {int(outside.sum())} sample ids are not (e.g. {int(sample_ids[outside][0])}); "
            "give each re-embedded item's row number in the store"
        )


def _replacements(migration: Migration, sample_ids, sample_new, store: VectorStore) -> dict[str, np.ndarray] | None:
    if sample_ids is None:
        return None
    new = check_vectors(
        sample_new,
        "sample_new",
        metric=migration.metric,
        width=migration.new_dimension,
        width_of="like the migration's new model",
    )
    sample_ids = check_ids(sample_ids, "sample_ids", count=len(new), count_name="sample_new")
    if store.ids_are_rows and len(sample_ids):
        _rows_of_sample(sample_ids, store)
    vectors = prepare(new, migration.metric).numpy()
    return {str(i): vectors[row] for row, i in enumerate(sample_ids.tolist())}
