"""LanceDB tables (``lancedb``): a database folder (``collection=`` names the table; the only one by default) or
a ``NAME.lance`` table folder. The vectors are the table's fixed-size-list column (``vector`` by default), the
ids its ``id`` column (or ``id_column``). A table has no metric of its own (LanceDB takes it at search time): give
``metric=``, else unit rows read as cosine (all three metrics rank unit vectors alike) and others as l2, LanceDB's
default search metric (what ``table.search(query)`` ranks by unless told otherwise), with a warning that says so.

The table is streamed (LanceDB's scan as Arrow record batches): opening it reads its schema, its row count and the
id column (to check the ids), never all its vectors; ``batches`` holds one batch at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.callsite import warn_at_caller
from latentstitch._core.extras import require
from latentstitch.migrate._retrieval import check_metric
from latentstitch.migrate.stores._protocol import (
    BATCH_ROWS,
    StoreWriter,
    VectorStore,
    check_ids,
    exact_batches,
    unit_norm,
)

LANCE_METRICS = {"cosine": "cosine", "ip": "dot", "l2": "l2"}


def lancedb():
    return require("lancedb", "lancedb", package="lancedb")


def _only(names: list[str], collection: str | None, error) -> str:
    if collection is not None:
        if collection not in names:
            raise error(f"has no table/collection {collection!r} (it has: {', '.join(names) or 'none'})")
        return collection
    if len(names) != 1:
        raise error(f"holds {len(names)} tables/collections ({', '.join(names) or 'none'}); name one with collection=")
    return names[0]


class LanceStore(VectorStore):
    kind = "lancedb"
    has_search = True

    def __init__(self, path: Path, option: str, *, collection=None, metric=None, id_column=None, **_):
        super().__init__(path, option, collection)
        try:  # a damaged folder: lance's own error (a RuntimeError or OSError naming its source files)
            folder, names = (path.parent, [path.stem]) if path.suffix == ".lance" else (path, None)
            self.db = lancedb().connect(str(folder))
            listed = self.db.list_tables()
            names = names or list(getattr(listed, "tables", listed))
            self.collection = _only(names, collection or (names[0] if path.suffix == ".lance" else None), self.error)
            self.table = self.db.open_table(self.collection)
            schema = self.table.schema
            vector_columns = [f.name for f in schema if str(f.type).startswith("fixed_size_list")]
            if not vector_columns:
                raise self.error(f"table {self.collection!r} has no fixed-size vector column")
            self.vector_column = "vector" if "vector" in vector_columns else vector_columns[0]
            self.id_column = id_column or "id"
            if self.id_column not in schema.names:
                raise self.error(f"table {self.collection!r} has no id column {self.id_column!r} (id_column=)")
            self.count = self.table.count_rows()
            self.dimension = schema.field(self.vector_column).type.list_size
            ids = [batch.column(0).to_numpy(zero_copy_only=False) for batch in self._scan([self.id_column], BATCH_ROWS)]
            check_ids(np.concatenate(ids) if ids else np.zeros(0, np.int64), self.error)
        except (RuntimeError, OSError) as error:
            raise self.error(
                "cannot be read as a LanceDB table: its files are damaged or not LanceDB's "
                f"({str(error).splitlines()[0][:160]})"
            ) from None
        if metric:
            self.metric = check_metric(metric, "metric")
        else:
            first = next(self.batches(4096), (None, np.zeros((0, self.dimension), np.float32)))[1]
            self.metric = "cosine" if unit_norm(first) else "l2"
            if self.metric == "l2":
                warn_at_caller(
                    f"metric: table {self.collection!r} of {str(path)!r} holds vectors that are not unit length and "
                    "a table has no metric of its own: l2 is assumed, LanceDB's default search metric; give metric "
                    "'ip' or 'cosine' if your searches use that",
                    UserWarning,
                )

    def _scan(self, columns: list[str], rows: int):
        """The table's rows in scan order (the same on every read of an unchanged table), as record batches."""
        return self.table.search().select(columns).limit(None).to_batches(rows)

    def batches(self, rows: int = BATCH_ROWS):
        def parts():
            for batch in self._scan([self.id_column, self.vector_column], rows):
                ids = batch.column(self.id_column).to_numpy(zero_copy_only=False)
                column = batch.column(self.vector_column)
                if column.null_count:
                    raise self.error(f"table {self.collection!r} has {column.null_count} rows without a vector")
                flat = column.flatten().to_numpy(zero_copy_only=False)
                yield ids, flat.astype(np.float32, copy=False).reshape(len(ids), self.dimension)

        return exact_batches(parts(), rows)

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        out = []
        for query in np.asarray(queries, dtype=np.float32):
            found = self.table.search(query, vector_column_name=self.vector_column)
            found = found.metric(LANCE_METRICS[self.metric]).limit(k).to_arrow()
            out.append(found.column(self.id_column).to_numpy(zero_copy_only=False))
        return np.stack(out)

    def fingerprint(self) -> str:
        from latentstitch.migrate.stores._protocol import fingerprint

        return fingerprint(self.path if self.path.suffix == ".lance" else self.path / f"{self.collection}.lance")


class LanceWriter(StoreWriter):
    """A new LanceDB database folder holding one table (``id``, ``vector``)."""

    def __init__(self, path: Path, dimension: int, metric: str, collection: str, **options: Any):
        super().__init__(path, dimension, metric, collection, **options)
        self.table = None
        self.db = lancedb().connect(str(path))

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        import pyarrow as pa

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), self.dimension)
        batch = pa.table({"id": pa.array(np.asarray(ids)), "vector": column})
        if self.table is None:
            self.table = self.db.create_table(self.collection, data=batch)
        else:
            self.table.add(batch)
