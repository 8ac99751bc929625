"""LanceDB tables (``lancedb``): a database folder (``--collection`` names the table; the only one by default) or
a ``NAME.lance`` table folder. The vectors are the table's fixed-size-list column (``vector`` by default), the
ids its ``id`` column (or ``id_column``). A table has no metric of its own (LanceDB takes it at search time): give
``metric=``, else unit rows read as cosine and others as inner product (LanceDB's ``dot``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.extras import require
from latentstitch.migrate._retrieval import check_metric
from latentstitch.migrate.stores._protocol import BATCH_ROWS, StoreWriter, VectorStore, check_ids, unit_norm

LANCE_METRICS = {"cosine": "cosine", "ip": "dot", "l2": "l2"}


def lancedb():
    return require("lancedb", "lancedb", package="lancedb")


def _only(names: list[str], collection: str | None, error) -> str:
    if collection is not None:
        if collection not in names:
            raise error(f"has no table/collection {collection!r} (it has: {', '.join(names) or 'none'})")
        return collection
    if len(names) != 1:
        raise error(f"holds {len(names)} tables/collections ({', '.join(names) or 'none'}); name one (--collection)")
    return names[0]


class LanceStore(VectorStore):
    kind = "lancedb"
    has_search = True

    def __init__(self, path: Path, option: str, *, collection=None, metric=None, id_column=None, **_):
        super().__init__(path, option, collection)
        folder, names = (path.parent, [path.stem]) if path.suffix == ".lance" else (path, None)
        self.db = lancedb().connect(str(folder))
        listed = self.db.list_tables()
        names = names or list(getattr(listed, "tables", listed))
        self.collection = _only(names, collection or (names[0] if path.suffix == ".lance" else None), self.error)
        self.table = self.db.open_table(self.collection)
        arrow = self.table.to_arrow()
        vector_columns = [f.name for f in arrow.schema if str(f.type).startswith("fixed_size_list")]
        if not vector_columns:
            raise self.error(f"table {self.collection!r} has no fixed-size vector column")
        self.vector_column = "vector" if "vector" in vector_columns else vector_columns[0]
        self.id_column = id_column or "id"
        if self.id_column not in arrow.column_names:
            raise self.error(f"table {self.collection!r} has no id column {self.id_column!r} (--id-column)")
        self.ids = arrow.column(self.id_column).to_numpy(zero_copy_only=False)
        column = arrow.column(self.vector_column).combine_chunks()
        self.count, self.dimension = len(arrow), column.type.list_size
        self.vectors = column.flatten().to_numpy().astype(np.float32).reshape(self.count, self.dimension)
        check_ids(self.ids, self.error)
        self.metric = check_metric(metric, "metric") if metric else ("cosine" if unit_norm(self.vectors) else "ip")

    def batches(self, rows: int = BATCH_ROWS):
        for start in range(0, self.count, rows):
            yield self.ids[start : start + rows], self.vectors[start : start + rows]

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
