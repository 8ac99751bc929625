"""Stream an old index through a corpus-side bridge into a **new** collection, never touching the old one.

Chunks of ``chunk_rows`` vectors are bridged (float32 out; re-embedded items keep their true new vectors) and
written into a work folder beside the output, ``.NAME.partial-apply``, whose ``manifest.json`` lists the chunks
done with the sha256 of the bridge files and of the source index. An interrupted run (Ctrl-C, a kill, a full
disk) leaves that folder, named as partial; the same command resumes it and gives the identical result, and refuses
it if the bridge or the index changed. At the end the new store is built in the work folder and renamed onto the
output in one step; the manifest is written beside it (``OUTPUT.manifest.json``)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.atomic import PARTIAL_MARK, atomic_path, commit_staged, refuse_inputs, write_text
from latentstitch._core.progress import progress_bar
from latentstitch.migrate._migration import Migration
from latentstitch.migrate._retrieval import prepare
from latentstitch.migrate.stores import VectorStore, create_writer

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
    progress: bool = False,
) -> ApplyResult:
    """Bridge every vector of ``store`` with ``migration``'s corpus-side bridge into a new store at ``output``
    (``kind``: the source's by default); ``sample_ids``/``sample_new``: re-embedded items, written with their true
    new vectors. See the module docstring for resuming and what is written."""
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
    if output.exists():
        raise FileExistsError(f"--output: {str(output)!r} exists; apply writes a new collection, never over one")
    refuse_inputs({"--output": output}, {"INDEX": store.path, "MIGRATION": migration_path})
    if not output.parent.is_dir():
        raise FileNotFoundError(f"--output: the folder {str(output.parent)!r} does not exist")
    replacements = _replacements(migration, sample_ids, sample_new)
    hashes = {"bridge": migration.bridge_sha256(migration_path), "source": store.fingerprint()}
    work = work_folder(output)
    manifest = _open_manifest(work, hashes, store, chunk_rows, migration)
    kind = kind or store.kind
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
    in_place = getattr(writer, "in_place", False)
    total = -(-store.count // chunk_rows)
    resumed = len(manifest["done"])
    with progress_bar(bool(progress)) as bar:
        task = None if bar is None else bar.add_task(f"migrating {store.path.name}", total=store.count)
        start = 0
        for number, (ids, vectors) in enumerate(store.batches(chunk_rows)):
            if str(number) not in manifest["done"]:
                out = migration.transform_corpus(vectors, device=device)
                _replace(out, ids, replacements, migration.metric)
                try:
                    digest = _write_chunk(writer, in_place, work, number, start, ids, out)
                    manifest["done"][str(number)] = digest
                    write_text(work / MANIFEST, json.dumps(manifest, indent=1), option="--output")
                except OSError as error:
                    if error.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise _disk_full(error, work, len(manifest["done"]), total) from None
                    raise
            start += len(ids)
            if bar is not None:
                bar.advance(task, len(ids))
    try:
        if not in_place:
            for number in range(total):
                ids = np.load(work / f"ids-{number:06d}.npy", allow_pickle=False)
                writer.add(ids, np.load(work / f"chunk-{number:06d}.npy", allow_pickle=False))
        writer.close()
        commit_staged(work / staged_name, output)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _disk_full(error, work, total, total) from None
        raise
    record = {**manifest, "output": str(output), "kind": kind, "status": "complete"}
    manifest_path = output.with_name(output.name + ".manifest.json")
    write_text(manifest_path, json.dumps(record, indent=1) + "\n", option="--output")
    shutil.rmtree(work, ignore_errors=True)
    return ApplyResult(
        output, manifest_path, store.count, migration.new_dimension, total, resumed, time.perf_counter() - started
    )


def _open_manifest(work: Path, hashes: dict, store: VectorStore, chunk_rows: int, migration: Migration) -> dict:
    expected = {
        "hashes": hashes,
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
                "that folder to start again, or resume with the same bridge, index and --chunk-rows"
            )
        return manifest
    work.mkdir(exist_ok=True)
    manifest = {**expected, "done": {}}
    write_text(path, json.dumps(manifest, indent=1), option="--output")
    return manifest


def _write_chunk(writer, in_place: bool, work: Path, number: int, start: int, ids, out) -> str:
    if in_place:
        writer.write_at(start, out)
    else:
        with atomic_path(work / f"ids-{number:06d}.npy", option="--output") as temporary:
            np.save(temporary, np.asarray(ids), allow_pickle=False)
        with atomic_path(work / f"chunk-{number:06d}.npy", option="--output") as temporary:
            np.save(temporary, out, allow_pickle=False)
    return hashlib.sha256(np.ascontiguousarray(out).data).hexdigest()[:16]


def _replacements(migration: Migration, sample_ids, sample_new) -> dict[str, np.ndarray] | None:
    if sample_ids is None:
        return None
    new = np.asarray(sample_new, dtype=np.float32)
    if new.ndim != 2 or new.shape[1] != migration.new_dimension or len(new) != len(sample_ids):
        raise ValueError(
            f"sample_new: expected one {migration.new_dimension}-feature vector per sample id, got {new.shape}"
        )
    vectors = prepare(new, migration.metric).numpy()
    return {str(i): vectors[row] for row, i in enumerate(np.asarray(sample_ids).tolist())}


def _replace(out: np.ndarray, ids, replacements, metric: str) -> None:
    if not replacements:
        return
    for row, value in enumerate(np.asarray(ids).tolist()):
        vector = replacements.get(str(value))
        if vector is not None:
            out[row] = vector
