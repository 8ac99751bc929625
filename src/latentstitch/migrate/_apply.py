"""Stream an old index through a corpus-side bridge into a **new** collection, never touching the old one.

Chunks of ``chunk_rows`` vectors are bridged (float32 out; re-embedded items keep their true new vectors) and
written into a work folder beside the output, ``.NAME.partial-apply``, whose ``manifest.json`` lists the chunks
done with the sha256 of the bridge files and of the source index. An interrupted run (Ctrl-C, a kill, a full
disk) leaves that folder, named as partial; the same command resumes it and gives the identical result, and refuses
it if the bridge or the index changed. At the end the new store is built in the work folder and renamed onto the
output in one step; the manifest is written beside it (``OUTPUT.manifest.json``).

``client=``: the chunks are bridged on a Dask cluster (``"local"``: a ``LocalCluster`` of ``workers`` processes
started here; a ``distributed.Client`` or a scheduler address: that cluster), written by the workers with the same
protocol (see ``_apply_cluster``); the result has the same bytes as in process. ``device=``: where the bridge runs
("cuda" on a GPU; on a cluster, each worker's device)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.atomic import PARTIAL_MARK, commit_staged, refuse_inputs, write_text
from latentstitch._core.params import check_device
from latentstitch._core.progress import progress_bar
from latentstitch.migrate._chunks import chunk_digest, replace_sampled, write_chunk_files
from latentstitch.migrate._inputs import check_ids, check_vectors
from latentstitch.migrate._migration import Migration
from latentstitch.migrate._retrieval import prepare
from latentstitch.migrate.stores import VectorStore, create_writer, exact_batches

MANIFEST = "manifest.json"


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


def _disk_full(error: OSError, work: Path, done: int, total: int) -> OSError:
    return OSError(
        error.errno,
        f"--output: the disk is full after {done} of {total} chunks; the old index is untouched and the partial "
        f"output is kept in {str(work)!r}: free space and run the same command again to resume",
    )


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
    if client is None:
        check_device(device, "device")  # on a cluster, each worker checks its own
    if output.exists():
        raise FileExistsError(f"--output: {str(output)!r} exists; apply writes a new collection, never over one")
    refuse_inputs({"--output": output}, {"INDEX": store.path, "MIGRATION": migration_path})
    if not output.parent.is_dir():
        raise FileNotFoundError(f"--output: the folder {str(output.parent)!r} does not exist")
    replacements = _replacements(migration, sample_ids, sample_new)
    hashes = {"bridge": migration.bridge_sha256(migration_path), "source": store.fingerprint()}
    work = work_folder(output)
    kind = kind or store.kind
    work.mkdir(exist_ok=True)
    options = {**store.writer_options(), "rows": store.count}
    staged_name = "out" + (output.suffix if kind in ("file", "faiss", "milvus") else "")
    writer = create_writer(
        kind,
        work / staged_name,
        dimension=migration.new_dimension,
        metric=migration.metric,
        collection=output.stem,
        **options,
    )
    # in process, a writer that can write at an offset (a memory-mapped .npy) gets each chunk directly; on a cluster
    # the workers write chunk files, read here at the end
    in_place = getattr(writer, "in_place", False) and client is None
    layout = "in-place" if in_place else "chunk-files"
    manifest = _open_manifest(work, hashes, layout, store, chunk_rows, migration)
    total = -(-store.count // chunk_rows)
    resumed = len(manifest["done"])

    def record(number: int, digest: str) -> None:
        manifest["done"][str(number)] = digest
        write_text(work / MANIFEST, json.dumps(manifest, indent=1), option="--output")

    with progress_bar(bool(progress)) as bar:
        task = None if bar is None else bar.add_task(f"migrating {store.path.name}", total=store.count)

        def advance(rows: int) -> None:
            if bar is not None:
                bar.advance(task, rows)

        try:
            if client is not None:
                from latentstitch.migrate._apply_cluster import bridge_on_cluster

                done = dict(manifest["done"])
                bridge_on_cluster(
                    client, workers, migration, store, chunk_rows, work, done, replacements, device, record, advance
                )
            else:
                start = 0
                for number, (ids, vectors) in enumerate(exact_batches(store.batches(chunk_rows), chunk_rows)):
                    if str(number) not in manifest["done"]:
                        out = migration.transform_corpus(vectors, device=device)
                        replace_sampled(out, ids, replacements)
                        if in_place:
                            writer.write_at(start, out)
                            digest = chunk_digest(out)
                        else:
                            digest = write_chunk_files(work, number, ids, out)
                        record(number, digest)
                    start += len(ids)
                    advance(len(ids))
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise _disk_full(error, work, len(manifest["done"]), total) from None
            raise
    try:
        if not in_place:
            if writer.ids_first:  # every id first: the batches then stream
                writer.begin(np.concatenate([_chunk_ids(work, number) for number in range(total)]))
            start = 0
            for number in range(total):
                ids = _chunk_ids(work, number)
                vectors = np.load(work / f"chunk-{number:06d}.npy", allow_pickle=False)
                if getattr(writer, "in_place", False):
                    writer.write_at(start, vectors)
                else:
                    writer.add(ids, vectors)
                start += len(ids)
        writer.close()
        commit_staged(work / staged_name, output)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _disk_full(error, work, total, total) from None
        raise
    final = {**manifest, "output": str(output), "kind": kind, "status": "complete"}
    manifest_path = output.with_name(output.name + ".manifest.json")
    write_text(manifest_path, json.dumps(final, indent=1) + "\n", option="--output")
    shutil.rmtree(work, ignore_errors=True)
    return ApplyResult(
        output, manifest_path, store.count, migration.new_dimension, total, resumed, time.perf_counter() - started
    )


def _chunk_ids(work: Path, number: int) -> np.ndarray:
    return np.load(work / f"ids-{number:06d}.npy", allow_pickle=False)


def _open_manifest(
    work: Path, hashes: dict, layout: str, store: VectorStore, chunk_rows: int, migration: Migration
) -> dict:
    expected = {
        "hashes": hashes,
        "layout": layout,
        "source": str(store.path),
        "source_kind": store.kind,
        "rows": store.count,
        "chunk_rows": chunk_rows,
        "dimension": migration.new_dimension,
        "metric": migration.metric,
    }
    path = work / MANIFEST
    if path.exists():
        manifest = json.loads(path.read_text())
        differs = [k for k in expected if manifest.get(k) != expected[k]]
        if differs:
            raise ValueError(
                f"--output: the partial apply in {str(work)!r} was made with another {', '.join(differs)}; remove "
                "that folder to start again, or resume with the same bridge, index, --chunk-rows and cluster setting"
            )
        return manifest
    work.mkdir(exist_ok=True)
    manifest = {**expected, "done": {}}
    write_text(path, json.dumps(manifest, indent=1), option="--output")
    return manifest


def _replacements(migration: Migration, sample_ids, sample_new) -> dict[str, np.ndarray] | None:
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
    vectors = prepare(new, migration.metric).numpy()
    return {str(i): vectors[row] for row, i in enumerate(sample_ids.tolist())}
