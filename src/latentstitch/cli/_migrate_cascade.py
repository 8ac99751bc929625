"""The work of ``latentstitch migrate search`` and ``migrate status`` (imported once the options are checked: it
loads the library)."""

from __future__ import annotations

import argparse
import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.atomic import atomic_path
from latentstitch._core.tables import print_tables, table, write_json
from latentstitch.cli._migrate_steps import _store
from latentstitch.cli.options import UsageError, option_errors
from latentstitch.embeddings import open_embeddings
from latentstitch.migrate import Migration, cascade_status, depth_curve, open_collection
from latentstitch.migrate import search as exact_search

OPTIONS = {
    "store": "INDEX",
    "new_store": "NEW",
    "new_queries": "QUERIES",
    "migration": "MIGRATION",
    "new_vectors": "--new-vectors or --documents",
    "depth": "--depth",
    "k": "-k",
    "relevant": "--queries-relevant",
    "id_column": "--id-column",
}


def run(args: argparse.Namespace, output: Path | None) -> int:
    with option_errors(OPTIONS):
        return {"search": search, "status": status}[args.action](args, output)


def _opened(args: argparse.Namespace):
    migration = Migration.load(args.migration, "MIGRATION")
    store = _store(args)  # as the other migrate actions open INDEX
    migration.check_index(store)
    collection = open_collection(
        args.new_collection, store, migration.new_dimension, migration.metric, kind=args.new_kind, option="NEW"
    )
    return migration, store, collection


def _texts(path: Path, column: str, id_column: str | None, option: str) -> tuple[list[Any] | None, list[str]]:
    """Ids (None for a .txt file) and texts of a .txt (one a line), .csv or .parquet file."""
    suffix = path.suffix.lower()
    if suffix == ".txt":
        return None, [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        names = list(rows[0]) if rows else []
        get = {name: [row[name] for row in rows] for name in names}
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        data = pq.read_table(path)
        names, get = data.column_names, {name: data.column(name).to_pylist() for name in data.column_names}
    else:
        raise UsageError(f"{option}: {str(path)!r} is not a .txt, .csv or .parquet file of texts")
    for name, flag in ((column, "--text-column" if option != "QUERIES" else "--query-column"), (id_column, None)):
        if name is not None and name not in names:
            raise UsageError(f"{flag or option}: {str(path)!r} has no column {name!r} (it has {', '.join(names)})")
    return (get[id_column] if id_column else None), [str(text) for text in get[column]]


def _encoder(args: argparse.Namespace):
    from latentstitch.encoders import get_encoder

    with option_errors({"name": "--encoder"}):
        return get_encoder(args.encoder)


def _by_id(ids: Any, rows: Callable[[np.ndarray], np.ndarray], option: str) -> Callable[[np.ndarray], np.ndarray]:
    """A ``new_vectors`` function over a table keyed by ``ids`` (compared as text: a CSV's ids are strings)."""
    where = {str(value): row for row, value in enumerate(np.asarray(ids).tolist())}

    def new_vectors(wanted: np.ndarray) -> np.ndarray:
        missing = [value for value in np.asarray(wanted).tolist() if str(value) not in where]
        if missing:
            raise UsageError(f"{option}: {len(missing)} candidate ids are not in it (e.g. {missing[0]!r})")
        return rows(np.asarray([where[str(value)] for value in np.asarray(wanted).tolist()], dtype=np.int64))

    return new_vectors


def _new_vectors(args: argparse.Namespace) -> Callable[[np.ndarray], np.ndarray] | None:
    if args.new_vectors is not None:
        with option_errors({"id_column": "--new-vectors-id-column"}):
            opened = open_embeddings(args.new_vectors, id_column=args.new_vectors_id_column, option="--new-vectors")
        if opened.ids is None:
            raise UsageError(
                f"--new-vectors: {str(args.new_vectors)!r} has no id column {args.new_vectors_id_column!r}"
            )
        vectors = opened.read()
        return _by_id(opened.ids, lambda rows: vectors[rows], "--new-vectors")
    if args.documents is not None:
        ids, texts = _texts(args.documents, args.text_column, args.documents_id_column, "--documents")
        encoder = _encoder(args)
        return _by_id(ids, lambda rows: encoder.encode([texts[r] for r in rows], progress=False), "--documents")
    return None


def _query_vectors(args: argparse.Namespace, path: Path, option: str) -> np.ndarray:
    if args.encoder is not None and Path(path).suffix.lower() in (".txt", ".csv", ".parquet"):
        _, texts = _texts(Path(path), args.query_column, None, option)
        if not texts:
            raise UsageError(f"{option}: {str(path)!r} holds no query text")
        return np.asarray(_encoder(args).encode(texts, progress=False), dtype=np.float32)
    if Path(path).suffix.lower() == ".txt":
        raise UsageError(f"{option}: {str(path)!r} holds texts; give --encoder (the new model that embeds them)")
    return open_embeddings(path, option=option).read()


def search(args: argparse.Namespace, output: Path | None) -> int:
    migration, store, collection = _opened(args)
    queries = _query_vectors(args, args.queries, "QUERIES")
    result = migration.search(
        queries,
        args.k,
        store=store,
        new_store=collection,
        depth=args.depth,
        new_vectors=_new_vectors(args),
        collection_search="off" if args.old_store_only else args.collection_search,
    )
    shown = min(len(queries), 5)
    rows = [[n, " ".join(map(str, result.ids[n].tolist())), f"{result.scores[n, 0]:.4f}"] for n in range(shown)]
    more = f"; {len(queries) - shown} more queries in --output" if len(queries) > shown and output else ""
    print_tables(
        [
            table(
                "cascade search",
                ["query", f"top {args.k} ids (best first)", "best score"],
                rows,
            )
        ],
        [],
        compact=True,
    )
    print(
        f"{len(queries)} queries, depth {args.depth}: {result.candidates} distinct candidates "
        f"({result.from_collection} recalled only by NEW's own search), {result.reused} already in NEW, "
        f"{result.embedded} embedded "
        f"({result.written} written by this search){more}"
    )
    if output is not None:
        payload = {"migration": str(args.migration), "index": str(args.index), "new": str(args.new_collection)}
        payload.update(k=args.k, depth=args.depth, **result.to_dict())
        with atomic_path(output, option="--output") as temporary:
            write_json(payload, temporary)
        print(f"written: {output}")
    print(cascade_status(store, collection).words())  # with the cut-over once NEW holds every id
    store.close()
    return 0


def status(args: argparse.Namespace, output: Path | None) -> int:
    migration, store, collection = _opened(args)
    state = cascade_status(store, collection)
    payload: dict[str, Any] = {"status": state.to_dict()}
    if args.queries_new is not None:
        relevant = reference = None
        if args.queries_relevant:
            with option_errors({"id_column": "--queries-relevant"}):
                opened = open_embeddings(args.queries_new, id_column=args.queries_relevant, option="--queries-new")
            queries, relevant = opened.read(), opened.ids
        else:
            queries = open_embeddings(args.queries_new, option="--queries-new").read()
        rng = np.random.default_rng(0)
        keep = np.sort(rng.choice(len(queries), min(args.sample, len(queries)), replace=False))
        queries = queries[keep]
        relevant = None if relevant is None else np.asarray(relevant)[keep]
        new_vectors = _new_vectors(args)
        if relevant is None:
            if new_vectors is None:
                raise UsageError(
                    "--queries-relevant: without labels the cascade is judged against the full re-embed, which needs "
                    "every document's new vector (--new-vectors)"
                )
            ids, _ = store.read()
            reference = ids[exact_search(queries, new_vectors(ids), 10, migration.metric)]
        curve = depth_curve(
            migration,
            queries,
            args.depths,
            store=store,
            new_store=collection,
            new_vectors=new_vectors,
            relevant=relevant,
            reference=reference,
        )
        measure = "recall@10" if relevant is not None else "overlap@10"
        rows = [
            [row["depth"], f"{row[measure]:.3f}", row["candidates"], row["from_collection"], f"{row['share']:.1%}"]
            for row in curve
        ]
        judged = "labelled queries" if relevant is not None else "the full re-embed's top 10"
        print_tables(
            [
                table(
                    "cascade by depth",
                    [
                        "depth",
                        measure.replace("recall", "Recall"),
                        "candidates touched",
                        "only from NEW's own search",
                        "share of the index",
                    ],
                    rows,
                    f"{len(queries)} queries, judged by {judged}; NEW not written",
                )
            ],
            [],
            compact=True,
        )
        payload["depths"] = curve
    print(state.words())
    if output is not None:
        with atomic_path(output, option="--output") as temporary:
            write_json(payload, temporary)
        print(f"written: {output}")
    store.close()
    return 0
