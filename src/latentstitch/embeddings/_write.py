"""Writing embeddings: the same formats as the readers, streamed chunk by chunk where the format allows it (``.npy``
through a memory map, ``.parquet`` by row groups, ``.csv`` line by line), so a bridged file larger than memory is
written without holding it.

Every format is written into a temporary file beside the destination and renamed onto it at ``close()``
(``latentstitch._core.atomic``): until then the destination keeps its previous content, and an error, Ctrl-C or a
kill half-way leaves it as it was (a killed process leaves its hidden ``.NAME.partial-HOST-PID-XXXX.SUFFIX`` file,
which the next writer of the same destination removes, with a warning, once that process no longer runs)."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.arrays import to_numpy
from latentstitch._core.atomic import PendingFile
from latentstitch._core.extras import require
from latentstitch.embeddings._base import EmbeddingFileError

WRITABLE = (".npy", ".npz", ".safetensors", ".pt", ".parquet", ".csv", ".tsv")


def check_room_for_ids(suffix: str, ids: np.ndarray | None, option: str) -> None:
    """Ids are never dropped in silence: a format with no room for them (``.npy``: one array; ``.safetensors``:
    numeric tensors only, so no string ids) is an error naming the output and the ids' origin (``ids=``)."""
    if ids is None:
        return
    kind = np.asarray(ids).dtype.kind
    if suffix == ".npy" or (suffix == ".safetensors" and kind not in "iu"):
        what = "holds one array and no ids" if suffix == ".npy" else "holds numeric tensors only, not these (text) ids"
        raise EmbeddingFileError(
            f"{option}: a {suffix} file {what}, so the ids (ids=) would be lost; write to .npz, "
            ".pt, .parquet or .csv to keep them, or leave out ids="
        )


class EmbeddingWriter:
    """Write ``n_rows`` x ``n_features`` vectors to ``path`` in chunks: ``write(block)`` in row order, then
    ``close()``, which moves the finished file onto ``path`` in one step (an error before it, or ``discard()``,
    leaves ``path`` as it was). ``ids`` (one per row) are written beside the vectors (``.npz``, ``.safetensors`` for
    integer ids, ``.pt``, ``.parquet`` and ``.csv`` columns); a format with no room for them is an error
    (``check_room_for_ids``). ``key``: the array / column name of the vectors (default "embeddings"); the ids are
    always named "id" (read them back with ``id_column="id"``). Use as a context manager."""

    def __init__(
        self,
        path: str | os.PathLike,
        n_rows: int,
        n_features: int,
        dtype: Any = np.float32,
        *,
        ids: np.ndarray | None = None,
        key: str = "embeddings",
        option: str = "path",
    ):
        self.path = Path(os.fspath(path))
        self.suffix = self.path.suffix.lower()
        if self.suffix not in WRITABLE:
            raise EmbeddingFileError(
                f"{option}: cannot write {self.suffix or 'a file without suffix'!r}; writable: {', '.join(WRITABLE)}"
            )
        check_room_for_ids(self.suffix, ids, option)
        self.n_rows, self.n_features, self.dtype = n_rows, n_features, np.dtype(dtype)
        self.ids, self.key, self.option = ids, key, option
        self.written = 0
        self._held: list[np.ndarray] = []
        self._handle: Any = None
        self._file: Any = None
        self._pending = PendingFile(self.path, option=option, clear_stale=True)
        try:
            self._open(ids, key, n_rows, n_features)
        except BaseException:
            self.discard()
            raise

    def _open(self, ids: np.ndarray | None, key: str, n_rows: int, n_features: int) -> None:
        temporary = self._pending.path
        if self.suffix == ".npy":
            self._handle = np.lib.format.open_memmap(temporary, mode="w+", dtype=self.dtype, shape=(n_rows, n_features))
        elif self.suffix == ".parquet":
            pa = require("pyarrow", "files", package="pyarrow")
            pq = require("pyarrow.parquet", "files", package="pyarrow")
            fields = [] if ids is None else [pa.field("id", pa.array(np.asarray(ids)[:1]).type)]
            fields.append(pa.field(key, pa.list_(pa.from_numpy_dtype(self.dtype), n_features)))
            self._schema = pa.schema(fields)
            self._handle = pq.ParquetWriter(str(temporary), self._schema)
        elif self.suffix in (".csv", ".tsv"):
            self._file = open(temporary, "w", newline="", encoding="utf-8")
            self._handle = csv.writer(self._file, delimiter="\t" if self.suffix == ".tsv" else ",")
            self._handle.writerow((["id"] if ids is not None else []) + [f"dim_{j}" for j in range(n_features)])

    def write(self, block: np.ndarray) -> None:
        block = np.asarray(block, dtype=self.dtype)
        start, stop = self.written, self.written + len(block)
        if block.ndim != 2 or block.shape[1] != self.n_features or stop > self.n_rows:
            raise ValueError(
                f"block: expected at most {self.n_rows - start} rows of {self.n_features}, got {block.shape}"
            )
        ids = None if self.ids is None else np.asarray(self.ids)[start:stop]
        if self.suffix == ".npy":
            self._handle[start:stop] = block
        elif self.suffix == ".parquet":
            pa = require("pyarrow", "files", package="pyarrow")
            vectors = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), self.n_features)
            columns = ([] if ids is None else [pa.array(ids)]) + [vectors]
            self._handle.write_table(pa.Table.from_arrays(columns, schema=self._schema))
        elif self.suffix in (".csv", ".tsv"):
            for i, row in enumerate(block):
                self._handle.writerow(([ids[i]] if ids is not None else []) + [repr(float(v)) for v in row])
        else:
            self._held.append(block)
        self.written = stop

    def close(self) -> Path:
        """Finish the file and move it onto ``path``; on any error ``path`` keeps its previous content."""
        try:
            if self.written != self.n_rows:
                raise ValueError(f"{self.option}: wrote {self.written} of {self.n_rows} rows to {str(self.path)!r}")
            if self.suffix == ".npy":
                self._handle.flush()
                self._handle = None  # drops the memory map
            elif self.suffix == ".parquet":
                self._handle.close()
            elif self.suffix in (".csv", ".tsv"):
                self._file.close()
            else:
                held = np.concatenate(self._held) if self._held else np.empty((0, self.n_features), self.dtype)
                self._write_held(held, self._pending.path)
            return self._pending.commit()
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Stop writing: close what is open and remove the temporary file; ``path`` keeps its previous content."""
        handle, self._handle = self._handle, None
        try:
            if self.suffix == ".parquet" and handle is not None:
                handle.close()
            if self._file is not None:
                self._file.close()
        except Exception:
            pass
        finally:
            del handle
            self._held = []
            self._pending.discard()

    def _write_held(self, vectors: np.ndarray, target: Path) -> None:
        ids = None if self.ids is None else np.asarray(self.ids)
        if self.suffix == ".npz":
            with open(target, "wb") as handle:  # a handle: numpy would add ".npz" to a name ending otherwise
                np.savez(handle, **{self.key: vectors}, **({} if ids is None else {"id": ids}))
        elif self.suffix == ".safetensors":
            from safetensors.numpy import save_file

            arrays = {self.key: np.ascontiguousarray(vectors)}
            if ids is not None and ids.dtype.kind in "iu":
                arrays["id"] = ids.astype(np.int64)
            save_file(arrays, str(target))
        else:  # .pt: tensors and plain lists, readable with torch.load(weights_only=True)
            import torch

            payload: dict[str, Any] = {self.key: torch.from_numpy(np.ascontiguousarray(vectors))}
            if ids is not None:
                payload["id"] = torch.from_numpy(ids.astype(np.int64)) if ids.dtype.kind in "iu" else ids.tolist()
            torch.save(payload, target)

    def __enter__(self) -> EmbeddingWriter:
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.discard()


def write_embeddings(
    path: str | os.PathLike, vectors: Any, *, ids: np.ndarray | None = None, key: str = "embeddings"
) -> Path:
    """Write (n, d) vectors (numpy or torch) to ``path`` in the format of its suffix (``EmbeddingWriter``)."""
    array = to_numpy(vectors, "vectors") if not isinstance(vectors, np.ndarray) else vectors
    if array.ndim != 2:
        raise ValueError(f"vectors: expected (rows, features), got shape {array.shape}")
    with EmbeddingWriter(path, array.shape[0], array.shape[1], array.dtype, ids=ids, key=key) as writer:
        writer.write(array)
    return writer.path
