"""``apply`` on a Dask cluster: the chunks are bridged by the cluster's workers, each written by its worker into the
work folder with the same atomic protocol as in process (``ids-NNNNNN.npy`` and ``chunk-NNNNNN.npy``, then the
manifest entry, written here once the chunk is on disk), so an interrupted run resumes the same way and the result
has the same bytes (the same chunks through the same kernels, on workers of the same kind of CPU).

This process reads the source index chunk by chunk and keeps at most two chunks per worker in flight, so its memory
is bounded by the chunk, not the index. The workers write into the work folder beside the output: on a cluster of
several machines it must be on a file system they all share (the usual setting for an index larger than one
machine's memory)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.extras import require
from latentstitch.distributed import client_scope
from latentstitch.migrate._chunks import replace_sampled, write_chunk_files
from latentstitch.migrate._migration import Migration
from latentstitch.migrate.stores import VectorStore, exact_batches


def bridge_chunk(
    migration: Migration,
    replacements: dict | None,
    device: str | None,
    work: str,
    number: int,
    ids: np.ndarray,
    vectors: np.ndarray,
) -> str:
    """On a worker: bridge one chunk, put the re-embedded items' true vectors back, write it; its digest."""
    out = migration.transform_corpus(vectors, device=device)
    replace_sampled(out, ids, replacements)
    return write_chunk_files(Path(work), number, ids, out)


def bridge_on_cluster(
    client: Any,
    workers: int | None,
    migration: Migration,
    store: VectorStore,
    chunk_rows: int,
    work: Path,
    done: dict[str, str],
    replacements: dict | None,
    device: str | None,
    record: Callable[[int, str], None],
    advance: Callable[[int], None],
) -> None:
    """Bridge every chunk of ``store`` not in ``done`` on the cluster (``client``/``workers`` as
    ``latentstitch.distributed.get_client`` reads them); ``record(number, digest)`` runs here as each chunk is
    written, ``advance(rows)`` as each chunk (done before or now) is counted."""
    distributed = require("distributed", "dask")
    with client_scope(None if client == "local" else client, workers) as active:
        window = 2 * max(1, len(active.scheduler_info().get("workers", {})))
        shared = active.scatter([migration, replacements], broadcast=True, hash=False)
        running: dict[Any, tuple[int, int]] = {}
        pending = distributed.as_completed()

        def collect(block: bool) -> None:
            while running and (block or len(running) >= window):
                future = next(pending)
                number, rows = running.pop(future)
                record(number, future.result())  # a worker's error (a full disk, ...) is raised here
                advance(rows)

        try:
            for number, (ids, vectors) in enumerate(exact_batches(store.batches(chunk_rows), chunk_rows)):
                if str(number) in done:
                    advance(len(ids))
                    continue
                chunk = active.scatter([np.asarray(ids), np.ascontiguousarray(vectors)], hash=False)
                future = active.submit(bridge_chunk, *shared, device, str(work), number, *chunk, pure=False)
                running[future] = (number, len(ids))
                pending.add(future)
                collect(block=False)
            collect(block=True)
        finally:
            active.cancel(list(running))
