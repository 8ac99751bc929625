"""The work of ``latentstitch migrate ACTION`` (imported once the options are checked: it loads the library)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from latentstitch._core.atomic import atomic_path
from latentstitch._core.tables import print_tables, write_json
from latentstitch.cli.options import UsageError, option_errors, translate
from latentstitch.embeddings import open_embeddings
from latentstitch.migrate import (
    Migration,
    QuerySample,
    apply_migration,
    certify_migration,
    fit_migration,
    load_plan,
    open_store,
    plan_sample,
    refit_migration,
    save_plan,
)

#: The library's argument names -> the options they came from.
OPTIONS = {
    "store": "INDEX",
    "index_vectors": "INDEX",
    "sample_ids": "SAMPLE",
    "sample_new": "SAMPLE",
    "holdout_ids": "--plan",
    "queries_new": "--queries-new",
    "queries_old": "--queries-old",
    "queries_relevant": "--queries-relevant",
    "budget": "--budget",
    "holdout": "--holdout",
    "folds": "--folds",
    "migration": "MIGRATION",
    "migration_path": "MIGRATION",
    "collection": "--collection",
    "device": "--device",
    "id_column": "--id-column",  # the embedding readers and writers (INDEX as a file, the NEW file apply writes)
    "ids": "--id-column",
    "output": "--output",
    "chunk_rows": "--chunk-rows",
    "thresholds": "--threshold",
    "query_log": "--query-log",
    "bridge": "--provisional",
    "previous": "--first-plan",
    "first_share": "--first-share",
}


def run(args: argparse.Namespace, output: Path) -> int:
    with option_errors(OPTIONS):
        steps = {"plan": plan, "fit": fit, "certify": certify, "refit": refit, "apply": apply}
        return steps[args.action](args, output)


def _store(args: argparse.Namespace):
    store = open_store(
        args.index,
        kind=args.kind,
        collection=args.collection,
        metric=args.metric,
        id_column=args.id_column,
        option="INDEX",
    )
    print(f"read INDEX: {store.describe()}")
    return store


def _sample(args: argparse.Namespace, path, option: str) -> tuple[np.ndarray, np.ndarray]:
    with option_errors({"id_column": "--sample-id-column"}):
        opened = open_embeddings(path, id_column=args.sample_id_column, option=option)
    if opened.ids is None:
        raise UsageError(
            f"{option}: {str(path)!r} has no id column {args.sample_id_column!r}; the re-embedded "
            "documents need their ids (--sample-id-column)"
        )
    return opened.ids, opened.read()


def _queries(args: argparse.Namespace) -> QuerySample | None:
    if args.queries_new is None:
        return None
    with option_errors({"id_column": "--queries-relevant"}):
        new = open_embeddings(args.queries_new, id_column=args.queries_relevant, option="--queries-new")
    old = open_embeddings(args.queries_old, option="--queries-old")
    if args.queries_relevant and new.ids is None:
        raise UsageError(f"--queries-relevant: {str(args.queries_new)!r} has no column {args.queries_relevant!r}")
    return QuerySample(new.read(), old.read(), new.ids if args.queries_relevant else None)


def plan(args: argparse.Namespace, output: Path) -> int:
    store = _store(args)
    ids, vectors = store.read()
    budget = args.budget if args.budget < 1 else int(args.budget)
    options = {}
    if args.strategy == "access":
        options["query_log"] = _query_log(args.query_log)
    if args.strategy == "uncertainty":
        options["first_share"] = args.first_share
        if args.provisional is not None:
            options["bridge"] = Migration.load(args.provisional, "--provisional")
            options["previous"] = load_plan(args.first_plan, "--first-plan")
    chosen = plan_sample(
        ids,
        vectors,
        budget,
        strategy=args.strategy,
        holdout=args.holdout,
        metric=store.metric,
        seed=args.seed,
        **options,
    )
    with option_errors({"path": "--output"}):
        save_plan(chosen, output)
    stage = {"first": ", first stage", "second": ", second stage"}.get(chosen.stage, "")
    print(
        f"plan ({args.strategy}{stage}): re-embed {len(chosen.ids)} of {len(ids)} documents, {len(chosen.fit_ids)} "
        f"to fit and {len(chosen.holdout_ids)} held out for certify: written {output}"
    )
    if chosen.stage == "first":
        print(
            f"next: re-embed these, run `latentstitch migrate fit {args.index} SAMPLE --plan {output} -o "
            f"provisional.json`, then this command again with --provisional provisional.json --first-plan {output} "
            "and another --output, for the rest of the budget"
        )
    if chosen.stage == "second":
        added = len(chosen.ids) - sum(len(part) for part in options["previous"])
        print(f"re-embed the {added} ids added to --first-plan's, then fit on all of them")
    return 0


def _query_log(path: Path):
    """--query-log: a table with an ``id`` column (and an optional ``count``) -> {id: accesses}; any other embedding
    file -> the old model's query vectors."""
    import csv

    columns: list[str] = []
    if path.suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8") as handle:
            columns = next(csv.reader(handle), [])
    elif path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        columns = pq.read_schema(path).names
    if "id" not in columns:
        return open_embeddings(path, option="--query-log").read()
    if not set(columns) <= {"id", "count"}:
        raise UsageError(f"--query-log: {str(path)!r} has an id column; expected only id and count, got {columns}")
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = (pacsv.read_csv(path) if path.suffix.lower() == ".csv" else pq.read_table(path)).to_pydict()
    counts: dict = {}
    for row, (key, count) in enumerate(zip(table["id"], table.get("count", [1] * len(table["id"])), strict=True)):
        if key is None or not isinstance(count, (int, float)) or isinstance(count, bool):
            raise UsageError(
                f"--query-log: {str(path)!r} row {row + 1}: expected an id and a count, got {key}, {count}"
            )
        counts[key] = counts.get(key, 0) + count
    return counts


def fit(args: argparse.Namespace, output: Path) -> int:
    store = _store(args)
    ids, vectors = store.read()
    sample_ids, sample_new = _sample(args, args.sample, "SAMPLE")
    holdout = load_plan(args.plan, "--plan")[1] if args.plan else ()
    migration = fit_migration(
        ids,
        vectors,
        sample_ids,
        sample_new,
        metric=store.metric,
        queries=_queries(args),
        holdout_ids=holdout,
        folds=args.folds,
        seed=args.seed,
    )
    migration.record_index(store)  # apply and search refuse another index
    with option_errors({"path": "--output"}):
        migration.save(output)
    summary = migration.to_dict()
    rows = [
        [m, summary["routes"][m], f"{np.mean(v):.3f} ± {np.std(v):.3f}", "yes" if m == migration.mode else ""]
        for m, v in migration.cv_mrr.items()
    ]
    from latentstitch._core.tables import table

    print_tables(
        [
            table(
                "migration modes",
                ["mode", "route", "held-out MRR@10 (mean ± sd over folds)", "chosen"],
                rows,
                f"metric: {summary['metric_assumed']}",
            )
        ],
        migration.notes,
        compact=True,
    )
    learning = migration.learning_words()
    if learning:
        print(translate(learning, OPTIONS))
    print(f"written: {output} (and its bridges beside it)")
    return 0


def certify(args: argparse.Namespace, output: Path) -> int:
    migration = Migration.load(args.migration, "MIGRATION")
    store = _store(args)
    ids, vectors = store.read()
    sample_ids, sample_new = _sample(args, args.sample, "SAMPLE")
    _, holdout = load_plan(args.plan, "--plan")
    certificate = certify_migration(
        migration,
        ids,
        vectors,
        sample_ids,
        sample_new,
        holdout,
        queries=_queries(args),
        thresholds=args.threshold,
        threshold_space=args.threshold_space,
        store=store,
        seed=args.seed,
    )
    with option_errors({"folder": "--output"}):
        charts = certificate.charts(output.parent, output.stem)
    payload = certificate.to_dict()
    payload.update(
        title=f"Migration certificate: {Path(args.index).name} ({certificate.mode}-side)",
        index=str(args.index),
        migration=str(args.migration),
        sample=str(args.sample),
        figures={caption: path.name for caption, path in charts.items()},
    )
    with atomic_path(output, option="--output") as temporary:
        write_json(payload, temporary)
    print_tables(certificate.tables(), certificate.notes, compact=True)
    print(f"decision: {certificate.decision['sentence']}")
    print(f"written: {output}, " + ", ".join(str(p) for p in charts.values()))
    return 0


def refit(args: argparse.Namespace, output: Path) -> int:
    migration = Migration.load(args.migration, "MIGRATION")
    store = _store(args)
    migration.check_index(store)  # refitted on the index it was fitted (and certified) on, not another
    ids, vectors = store.read()
    sample_ids, sample_new = _sample(args, args.sample, "SAMPLE")
    refitted = refit_migration(migration, ids, vectors, sample_ids, sample_new, queries=_queries(args), seed=args.seed)
    refitted.record_index(store)
    with option_errors({"path": "--output"}):
        refitted.save(output)
    record = refitted.refitted
    queries = f" and {record['n_queries']} queries" if record["n_queries"] else ""
    routes = ", ".join(f"{m}-side {b.route_}" for m, b in refitted.bridges.items())
    print(
        f"refitted ({routes}; mode {refitted.mode}-side, as fit chose) on all {record['n_sample']} re-embedded "
        f"items{queries}; the certificate's figures were measured on the bridge fitted on "
        f"{record['certified_n_sample']}, before this refit, and this migration cannot be certified again (it has "
        "seen the held-out items)"
    )
    print(f"written: {output} (and its bridges beside it)")
    return 0


def apply(args: argparse.Namespace, output: Path) -> int:
    migration = Migration.load(args.migration, "MIGRATION")
    store = _store(args)
    sample_ids = sample_new = None
    if args.sample:
        sample_ids, sample_new = _sample(args, args.sample, "--sample")
    # apply's sample is an option; its output's kind is --output-kind (INDEX's is --kind)
    with option_errors({"sample_ids": "--sample", "sample_new": "--sample", "kind": "--output-kind"}):
        result = apply_migration(
            migration,
            args.migration,
            store,
            output,
            kind=args.output_kind,
            sample_ids=sample_ids,
            sample_new=sample_new,
            chunk_rows=args.chunk_rows,
            device=args.device,
            client=args.scheduler or ("local" if args.workers is not None else None),
            workers=args.workers,
            progress=not args.quiet,
        )
    resumed = f", {result.resumed_chunks} chunks resumed" if result.resumed_chunks else ""
    print(
        f"migrated {result.rows} vectors ({result.dimension} features, float32) in {result.chunks} chunks"
        f"{resumed}, {result.seconds:.1f} s: written {result.output} and {result.manifest}"
    )
    return 0
