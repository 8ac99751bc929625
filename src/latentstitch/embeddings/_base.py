"""What every reader of an embedding file shares: the shape, optional ids, chunks of rows, and errors that name the
file and the option that pointed at it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.progress import progress_bar

#: Rows per chunk when a file is read piece by piece: 2 Mi values (8 MiB in float32) per chunk at any width.
CHUNK_VALUES = 1 << 21


class EmbeddingFileError(ValueError):
    """A file (or the option that names it) cannot be read as embeddings; the message names both."""


class EmbeddingFile:
    """An embedding file opened for reading: ``n_rows`` x ``n_features`` vectors, optional ``ids``.

    ``chunks()`` yields ``(start_row, (rows, features) float array)`` a few rows at a time (memory-mapped ``.npy``,
    sliced ``.safetensors``, parquet row groups, CSV lines), so a file larger than memory can be streamed;
    ``read()`` returns the whole array. Every chunk is checked for NaN and inf. Subclasses implement
    ``_read_rows(start, stop)`` (or override ``chunks``).
    """

    format = "embeddings"

    def __init__(self, path: Path, option: str):
        self.path = path
        self.option = option
        self.n_rows = 0
        self.n_features = 0
        self.dtype = np.dtype(np.float32)
        self.ids: np.ndarray | None = None

    # --- errors ----------------------------------------------------------------------------------------------------
    def error(self, message: str) -> EmbeddingFileError:
        return EmbeddingFileError(f"{self.option}: {str(self.path)!r} {message}")

    def _check_vectors(self, array: Any, what: str) -> None:
        """The array of vectors: 2-D, floating point (or integers / bools refused with a hint), not empty."""
        dtype = np.dtype(array.dtype)
        if dtype.kind in "iub":
            raise self.error(
                f"holds {dtype} values in {what}, not floating-point vectors (an id or label column?); "
                "embeddings must be floats"
            )
        if dtype.kind != "f":
            raise self.error(f"holds {dtype} values in {what}, not floating-point vectors")
        if len(array.shape) != 2:
            raise self.error(
                f"holds {what} of shape {tuple(array.shape)}; expected (rows, features), one vector per row"
            )
        if array.shape[0] == 0 or array.shape[1] == 0:
            raise self.error(f"holds {what} of shape {tuple(array.shape)}: no vectors")

    def _set_shape(self, n_rows: int, n_features: int, dtype: Any) -> None:
        self.n_rows, self.n_features = int(n_rows), int(n_features)
        dtype = np.dtype(dtype)
        self.dtype = np.dtype(np.float32) if dtype.itemsize < 4 else dtype  # float16 is widened

    def _set_ids(self, ids: Any, what: str) -> None:
        values = np.asarray(ids)
        if values.ndim != 1 or values.shape[0] != self.n_rows:
            raise self.error(f"{what}: expected one id per row ({self.n_rows}), got shape {values.shape}")
        if values.dtype.kind == "f":
            raise self.error(f"{what} holds floating-point values; ids must be integers or strings")
        self.ids = values

    # --- reading -------------------------------------------------------------------------------------------------
    def chunk_rows(self) -> int:
        return max(1, CHUNK_VALUES // max(self.n_features, 1))

    def chunks(self, rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        step = rows or self.chunk_rows()
        for start in range(0, self.n_rows, step):
            stop = min(start + step, self.n_rows)
            yield start, self._checked(self._read_rows(start, stop), start)

    def _read_rows(self, start: int, stop: int) -> np.ndarray:
        raise NotImplementedError

    def _checked(self, block: np.ndarray, start: int) -> np.ndarray:
        block = np.asarray(block)
        if block.dtype != self.dtype:
            block = block.astype(self.dtype)
        if block.ndim != 2 or block.shape[1] != self.n_features:
            raise self.error(f"has rows of {block.shape[-1]} values where earlier rows had {self.n_features}")
        if not np.isfinite(block.sum()) and not np.isfinite(block).all():
            bad = int(np.flatnonzero(~np.isfinite(block).all(axis=1))[0])
            raise self.error(f"holds NaN or inf in row {start + bad} (counting from 0)")
        return block

    def read(self, progress: bool = False) -> np.ndarray:
        """Every row, as one (n_rows, n_features) array (read chunk by chunk, with a progress bar if asked)."""
        out = np.empty((self.n_rows, self.n_features), dtype=self.dtype)
        with progress_bar(progress) as bar:
            task = None if bar is None else bar.add_task(f"reading {self.path.name}", total=self.n_rows)
            for start, block in self.chunks():
                out[start : start + len(block)] = block
                if bar is not None:
                    bar.advance(task, len(block))
        return out

    def describe(self) -> str:
        ids = "" if self.ids is None else ", with ids"
        return f"{self.path.name}: {self.n_rows} x {self.n_features} {self.dtype}{ids}"


class TableFile(EmbeddingFile):
    """A table (parquet, CSV, save_to_disk): the vectors are one list column (``vector_column``) or numbered columns,
    the ids another column (``id_key``). ``key`` picks a split where the format has splits (``has_splits``) and is
    refused elsewhere. Subclasses read the file in ``_open``."""

    has_splits = False

    def __init__(
        self,
        path: Path,
        option: str,
        *,
        key: str | None = None,
        id_key: str | None = None,
        vector_column: str | None = None,
    ):
        super().__init__(path, option)
        if key is not None and not self.has_splits:
            raise self.error(f"is a {path.suffix} file: name the vector column with vector_column=, not key=")
        self._open(key, id_key, vector_column)

    def _open(self, key: str | None, id_key: str | None, vector_column: str | None) -> None:
        raise NotImplementedError


def as_path(path: str | os.PathLike, option: str) -> Path:
    target = Path(os.fspath(path))
    if not target.exists():
        raise EmbeddingFileError(f"{option}: no such file: {str(target)!r}")
    if not os.access(target, os.R_OK):
        raise EmbeddingFileError(f"{option}: {str(target)!r} is not readable")
    return target
