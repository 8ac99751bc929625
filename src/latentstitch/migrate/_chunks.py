"""One chunk of ``apply``: the re-embedded items' true vectors put back, the chunk's files written atomically into
the work folder, and the digest the manifest records (shared by the in-process and the Dask paths)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from latentstitch._core.atomic import atomic_path


def chunk_digest(out: np.ndarray) -> str:
    """The manifest's digest of one bridged chunk."""
    return hashlib.sha256(np.ascontiguousarray(out).data).hexdigest()[:16]


def write_chunk_files(work: Path, number: int, ids, out: np.ndarray) -> str:
    """Write chunk ``number``'s ids and vectors into the work folder, each file atomically; its digest."""
    with atomic_path(work / f"ids-{number:06d}.npy", option="--output") as temporary:
        np.save(temporary, np.asarray(ids), allow_pickle=False)
    with atomic_path(work / f"chunk-{number:06d}.npy", option="--output") as temporary:
        np.save(temporary, out, allow_pickle=False)
    return chunk_digest(out)


def replace_sampled(out: np.ndarray, ids, replacements: dict | None) -> None:
    """Put the re-embedded items' true new vectors in place of their bridged ones (``out`` in place)."""
    if not replacements:
        return
    for row, value in enumerate(np.asarray(ids).tolist()):
        vector = replacements.get(str(value))
        if vector is not None:
            out[row] = vector
