"""One chunk of ``apply``: the re-embedded items' true vectors put back, the chunk's files written atomically into
the work folder, and the digest the manifest records (shared by the in-process and the Dask paths).

A chunk is two files: ``chunk-NNNNNN.npy`` (its float32 vectors) and its ids, ``ids-NNNNNN.npy`` for integer ids or
``ids-NNNNNN.json`` (a list of strings) for any other (a string id of any length or alphabet keeps its text; numpy
would need pickle for them). The digest covers both, so a resume trusts a chunk only when its bytes are the ones
recorded (``verified_chunk``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from latentstitch._core.atomic import atomic_path, write_bytes


def _ids_payload(ids) -> tuple[np.ndarray, bytes]:
    """The ids as stored (integers as they are, anything else as strings) and the bytes the digest reads of them."""
    ids = np.asarray(ids)
    if ids.dtype.kind in "iu":
        return ids, ids.dtype.str.encode() + np.ascontiguousarray(ids).tobytes()
    values = ids.tolist()
    odd = next((v for v in values if not isinstance(v, str)), None)
    if odd is not None:
        raise ValueError(f"ids: expected integer or string ids, got the {type(odd).__name__} id {odd!r}")
    return np.asarray(values, dtype=object), json.dumps(values, ensure_ascii=False).encode("utf-8")


def _digest(vectors: np.ndarray, ids_bytes: bytes = b"") -> str:
    digest = hashlib.sha256(np.ascontiguousarray(vectors, dtype=np.float32).data)
    digest.update(ids_bytes)
    return digest.hexdigest()[:16]


def chunk_digest(out: np.ndarray, ids=None) -> str:
    """The manifest's digest of one bridged chunk: its vectors and (when they are stored beside them) its ids."""
    return _digest(out, b"" if ids is None else _ids_payload(ids)[1])


def write_chunk_files(work: Path, number: int, ids, out: np.ndarray) -> str:
    """Write chunk ``number``'s ids and vectors into the work folder, each file atomically; its digest."""
    ids, ids_bytes = _ids_payload(ids)
    if ids.dtype.kind in "iu":
        with atomic_path(work / f"ids-{number:06d}.npy", option="output") as temporary:
            np.save(temporary, ids, allow_pickle=False)
    else:
        write_bytes(work / f"ids-{number:06d}.json", ids_bytes, option="output")
    with atomic_path(work / f"chunk-{number:06d}.npy", option="output") as temporary:
        np.save(temporary, out, allow_pickle=False)
    return _digest(out, ids_bytes)


def chunk_ids(work: Path, number: int) -> np.ndarray:
    """The ids of chunk ``number`` as ``write_chunk_files`` wrote them (strings as an object array)."""
    numbers = work / f"ids-{number:06d}.npy"
    if numbers.exists():
        return np.load(numbers, allow_pickle=False)
    return np.asarray(json.loads((work / f"ids-{number:06d}.json").read_text(encoding="utf-8")), dtype=object)


def chunk_vectors(work: Path, number: int) -> np.ndarray:
    """The bridged vectors of chunk ``number``."""
    return np.load(work / f"chunk-{number:06d}.npy", allow_pickle=False)


def verified_chunk(work: Path, number: int, digest: str) -> bool:
    """Whether chunk ``number``'s files are whole and hold the bytes whose digest the manifest recorded."""
    try:
        ids_bytes = _ids_payload(chunk_ids(work, number))[1]
        vectors = chunk_vectors(work, number)
    except (OSError, ValueError, EOFError):
        return False
    return vectors.dtype == np.float32 and _digest(vectors, ids_bytes) == digest


def replace_sampled(out: np.ndarray, ids, replacements: dict | None) -> set[str]:
    """Put the re-embedded items' true new vectors in place of their bridged ones (``out`` in place); returns the
    ids replaced."""
    replaced: set[str] = set()
    if not replacements:
        return replaced
    for row, value in enumerate(np.asarray(ids).tolist()):
        vector = replacements.get(str(value))
        if vector is not None:
            out[row] = vector
            replaced.add(str(value))
    return replaced
