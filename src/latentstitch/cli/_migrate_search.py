"""``latentstitch migrate search`` and ``migrate status``: cascade search over the old index, the new collection
filled as the queries touch documents, and how far it is (its options here; the work imported once they are
checked, so that --help imports nothing heavy).

    latentstitch migrate search migration.json INDEX NEW QUERIES --new-vectors docs_new.parquet -o results.json
    latentstitch migrate search migration.json INDEX NEW queries.txt --encoder minilm-l6 --documents docs.csv
    latentstitch migrate status migration.json INDEX NEW [--queries-new Q.parquet --queries-relevant COLUMN]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from latentstitch.cli.options import UsageError, input_file, output_file, positive_int, refuse_overwrite

#: ``migrate.COLLECTION_KINDS`` (tests/cli hold the copies equal).
COLLECTION_KINDS = ("npy", "faiss", "lancedb", "qdrant")
TEXT_SUFFIXES = (".txt", ".csv", ".parquet")


def _documents_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the candidates' new vectors (those not yet in NEW)")
    group.add_argument(
        "--new-vectors",
        type=Path,
        default=None,
        metavar="FILE",
        help="an embedding file of the documents' new-model vectors with their ids (--new-vectors-id-column)",
    )
    group.add_argument("--new-vectors-id-column", default="id", metavar="NAME", help="its id column (default id)")
    group.add_argument(
        "--documents",
        type=Path,
        default=None,
        metavar="FILE",
        help="the documents' texts (.csv or .parquet with an id and a text column), embedded with --encoder as the "
        "queries touch them",
    )
    group.add_argument("--text-column", default="text", metavar="NAME", help="the text column (default text)")
    group.add_argument("--documents-id-column", default="id", metavar="NAME", help="the id column (default id)")
    group.add_argument(
        "--encoder",
        default=None,
        metavar="NAME",
        help="the new model, a library encoder (latentstitch.encoders, e.g. minilm-l6): embeds text QUERIES and "
        "--documents",
    )
    group.add_argument(
        "--new-kind", choices=COLLECTION_KINDS, default=None, help="the kind of NEW (default: from its suffix or INDEX)"
    )


def add_arguments(actions, sub, index_options, add_run_options) -> None:
    """The ``search`` and ``status`` actions of ``latentstitch migrate`` (``sub``, ``index_options``: its helpers)."""
    search = sub(actions, "search", "cascade search: the old index recalls, the new model ranks; NEW fills as it goes")
    search.add_argument("migration", metavar="MIGRATION", help="written by `migrate fit`")
    index_options(search)
    search.add_argument("new_collection", metavar="NEW", help="the new collection (created on first use)")
    search.add_argument(
        "queries",
        metavar="QUERIES",
        help="the queries: an embedding file of new-model vectors, or texts with --encoder (.txt one a line, or "
        ".csv/.parquet with --query-column)",
    )
    search.add_argument("--query-column", default="text", metavar="NAME", help="QUERIES' text column (default text)")
    search.add_argument("-k", type=positive_int, default=10, help="results per query (default 10)")
    search.add_argument("--depth", type=positive_int, default=100, help="candidates recalled per query (default 100)")
    search.add_argument(
        "--collection-search",
        choices=("auto", "exact", "lists", "off"),
        default="auto",
        help="how NEW's own search recalls candidates beside the old store's: auto (default) reads every row of a "
        "small NEW and inverted lists of a large FAISS one, exact always every row, lists always the lists, off none",
    )
    search.add_argument(
        "--old-store-only",
        action="store_true",
        help="recall candidates from the old store alone (--collection-search off)",
    )
    search.add_argument("-o", "--output", type=Path, default=None, help="write the results (.json)")
    _documents_options(search)
    add_run_options(search)

    status = sub(actions, "status", "how far NEW is re-embedded, candidate reuse, and the cascade's quality by depth")
    status.add_argument("migration", metavar="MIGRATION", help="written by `migrate fit`")
    index_options(status)
    status.add_argument("new_collection", metavar="NEW", help="the collection `migrate search` fills")
    group = status.add_argument_group("the cascade's quality against its depth (optional; NEW is not written)")
    group.add_argument(
        "--queries-new", type=Path, default=None, metavar="FILE", help="queries embedded by the new model"
    )
    group.add_argument(
        "--queries-relevant",
        default=None,
        metavar="COLUMN",
        help="the column of --queries-new holding each query's relevant id: Recall@10 by depth; without it, "
        "overlap@10 with the full re-embed (needs every document's new vector: --new-vectors)",
    )
    group.add_argument(
        "--depths", type=positive_int, nargs="+", default=[50, 100, 200], help="depths measured (default 50 100 200)"
    )
    group.add_argument("--sample", type=positive_int, default=200, help="queries measured at most (default 200)")
    status.add_argument("-o", "--output", type=Path, default=None, help="write the status (.json)")
    _documents_options(status)
    add_run_options(status)


def check(args: argparse.Namespace) -> Path | None:
    """The options' own checks, before the library is imported; the output path (or None)."""
    for path, option in ((args.index, "INDEX"), (args.migration, "MIGRATION")):
        input_file(path, option)
    if getattr(args, "queries", None) is not None:
        input_file(args.queries, "QUERIES")
    for option in ("new_vectors", "documents", "queries_new"):
        if getattr(args, option, None) is not None:
            input_file(getattr(args, option), "--" + option.replace("_", "-"))
    if args.documents is not None and args.encoder is None:
        raise UsageError("--documents: give --encoder too (the new model that embeds the documents' texts)")
    if args.documents is not None and args.new_vectors is not None:
        raise UsageError("--new-vectors and --documents: give one (vectors computed already, or texts to embed)")
    if getattr(args, "queries_relevant", None) and args.queries_new is None:
        raise UsageError("--queries-relevant: give --queries-new too (the queries it labels)")
    inputs = {"INDEX": args.index, "MIGRATION": args.migration, "--new-vectors": args.new_vectors}
    refuse_overwrite({"NEW": args.new_collection}, inputs)
    if args.output is None:
        return None
    refuse_overwrite({"--output": args.output}, {**inputs, "NEW": args.new_collection})
    return output_file(args.output, "--output")


def main(args: argparse.Namespace) -> int:
    output = check(args)
    from latentstitch.cli import _migrate_cascade

    return _migrate_cascade.run(args, output)


__all__: list[Any] = ["add_arguments", "main"]
