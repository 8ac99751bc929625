"""Readers of Arrow tables: ``.parquet`` (read by row groups) and Hugging Face ``save_to_disk`` folders (``.csv`` /
``.tsv`` are read by ``_csv.py``). The vectors are one list column (``vector_column``, or the only list column) or
numbered columns (``0, 1, 2...`` or a shared prefix and a number, ``dim_0, dim_1...``, ordered by their number);
``id_column`` names the ids. Other columns are ignored.

Dtype: the file's stored type decides (float32 lists or columns give float32 vectors, float64 give float64; float16
is widened to float32, integers are read as float32), whatever a tool shows of them when it reads them back (pandas
turns float32 columns into float64 in some paths; the stored parquet type is what counts)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from latentstitch._core.extras import require
from latentstitch.data import read_hf_tables
from latentstitch.embeddings._base import TableFile

_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def numbered_columns(names: list[str], candidates: set[str]) -> list[str]:
    """The columns among ``candidates`` named by a number (after a common prefix), ordered by that number."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for name in names:
        match = _NUMBERED.match(name)
        if name in candidates and match:
            groups.setdefault(match.group(1), []).append((int(match.group(2)), name))
    if not groups:
        return []
    best = max(groups.values(), key=len)
    return [name for _, name in sorted(best)]


class _ArrowFile(TableFile):
    """Vectors from Arrow record batches (parquet row groups, a save_to_disk table)."""

    def _select(self, schema: Any, vector_column: str | None, id_column: str | None) -> None:
        pa = require("pyarrow", "files", package="pyarrow")
        names = list(schema.names)
        if id_column is not None and id_column not in names:
            raise self.error(f"has no column {id_column!r} (given by id_column=); its columns are: {', '.join(names)}")
        lists = [f.name for f in schema if _is_list(pa, f.type) and f.name != id_column]
        numeric = {f.name for f in schema if (pa.types.is_floating(f.type) or pa.types.is_integer(f.type))}
        if vector_column is not None:
            if vector_column not in names:
                raise self.error(
                    f"has no column {vector_column!r} (given by vector_column=); its columns are: {', '.join(names)}"
                )
            if vector_column not in lists:
                raise self.error(
                    f"column {vector_column!r} holds {schema.field(vector_column).type}, not lists of numbers"
                )
            self.columns = [vector_column]
        elif len(lists) == 1:
            self.columns = lists
        elif len(lists) > 1:
            raise self.error(
                f"has several list columns ({', '.join(lists)}); say which holds the vectors with vector_column="
            )
        else:
            self.columns = numbered_columns(names, numeric - {id_column})
            if not self.columns:
                raise self.error(
                    f"has no list column and no numbered columns (0, 1, ... or dim_0, dim_1, ...); its columns are: "
                    f"{', '.join(names)}"
                )
        self.list_mode = bool(lists) and self.columns[0] in lists
        if self.list_mode:
            value_type = schema.field(self.columns[0]).type.value_type
            if not (pa.types.is_floating(value_type) or pa.types.is_integer(value_type)):
                raise self.error(f"column {self.columns[0]!r} holds lists of {value_type}, not numbers")
            dtype = value_type.to_pandas_dtype() if pa.types.is_floating(value_type) else np.float32
        else:
            types = [schema.field(c).type for c in self.columns]
            dtype = np.result_type(*[t.to_pandas_dtype() if pa.types.is_floating(t) else np.float32 for t in types])
        self.id_column = id_column
        self._dtype_hint = np.dtype(dtype)

    def _block(self, batch: Any, start: int) -> np.ndarray:
        """One record batch's vectors as a (rows, features) array; ragged lists and nulls are errors."""
        pa = require("pyarrow", "files", package="pyarrow")
        if self.list_mode:
            column = batch.column(self.columns[0])
            if column.null_count:
                bad = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
                raise self.error(f"has no vector in row {start + bad} (column {self.columns[0]!r} is null there)")
            if pa.types.is_fixed_size_list(column.type):
                width = column.type.list_size
            else:
                lengths = np.diff(column.offsets.to_numpy())
                width = int(lengths[0]) if len(lengths) else self.n_features
                if np.any(lengths != (self.n_features or width)):
                    bad = int(np.flatnonzero(lengths != (self.n_features or width))[0])
                    raise self.error(
                        f"has ragged vectors: row {start + bad} has {int(lengths[bad])} values where row "
                        f"{0 if self.n_features else start} has {self.n_features or width}"
                    )
            values = column.flatten()
            if values.null_count:
                raise self.error(f"has a missing value inside a vector of column {self.columns[0]!r}")
            # writable: a zero-copy view of Arrow's buffer is read-only, and torch warns on every read-only array
            return values.to_numpy(zero_copy_only=False, writable=True).reshape(len(column), width)
        arrays = []
        for name in self.columns:
            column = batch.column(name)
            if column.null_count:
                bad = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
                raise self.error(f"has no value in row {start + bad}, column {name!r}")
            arrays.append(column.to_numpy(zero_copy_only=False))
        return np.column_stack(arrays)

    def chunks(self, rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        start = 0
        for batch in self._batches(rows or self.chunk_rows()):
            yield start, self._checked(self._block(batch, start), start)
            start += batch.num_rows

    def _batches(self, rows: int) -> Iterator[Any]:
        raise NotImplementedError

    def _first_width(self, batch: Any) -> int:
        if batch.num_rows == 0:
            raise self.error("has no rows")
        return self._block(batch.slice(0, 1), 0).shape[1]


def _is_list(pa: Any, kind: Any) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)


class ParquetFile(_ArrowFile):
    format = ".parquet"

    def _open(self, key: str | None, id_key: str | None, vector_column: str | None) -> None:
        pq = require("pyarrow.parquet", "files", package="pyarrow")
        try:
            self.file = pq.ParquetFile(str(self.path))
            schema = self.file.schema_arrow
        except Exception as error:  # pyarrow's ArrowInvalid and friends
            raise self.error(f"is not a readable parquet file ({' '.join(str(error).split())})") from None
        self._select(schema, vector_column, id_key)
        rows = self.file.metadata.num_rows
        if rows == 0:
            raise self.error("has no rows")
        first = next(self.file.iter_batches(batch_size=1, columns=self.columns))
        self._set_shape(rows, self._first_width(first), self._dtype_hint)
        if id_key is not None:
            ids = self.file.read(columns=[id_key]).column(0)
            self._set_ids(ids.to_numpy(zero_copy_only=False), f"column {id_key!r}")

    def _batches(self, rows: int) -> Iterator[Any]:
        return self.file.iter_batches(batch_size=rows, columns=self.columns)  # row group by row group


class HuggingFaceFolder(_ArrowFile):
    format = "save_to_disk folder"

    has_splits = True

    def _open(self, key: str | None, id_key: str | None, vector_column: str | None) -> None:
        try:
            splits = read_hf_tables(self.path)
        except FileNotFoundError:
            raise self.error("is a folder but not a Hugging Face save_to_disk folder (no state.json)") from None
        except (ValueError, OSError, KeyError, json.JSONDecodeError) as error:
            raise self.error(f"is not a readable save_to_disk folder ({' '.join(str(error).split())})") from None
        if key is None and len(splits) > 1:
            raise self.error(f"holds the splits {', '.join(splits)}; say which with key=")
        if key is not None and key not in splits:
            raise self.error(f"has no split {key!r} (given by key=); its splits are: {', '.join(splits)}")
        self.table = splits[key] if key is not None else next(iter(splits.values()))
        self._select(self.table.schema, vector_column, id_key)
        if self.table.num_rows == 0:
            raise self.error("has no rows")
        self._set_shape(
            self.table.num_rows, self._first_width(self.table.slice(0, 1).to_batches()[0]), self._dtype_hint
        )
        if id_key is not None:
            self._set_ids(self.table.column(id_key).to_numpy(), f"column {id_key!r}")

    def _batches(self, rows: int) -> Iterator[Any]:
        return iter(self.table.select(self.columns).to_batches(max_chunksize=rows))
