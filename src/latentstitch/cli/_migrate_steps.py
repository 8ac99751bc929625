"""The work of ``latentstitch migrate ACTION`` (imported once the options are checked: it loads the library)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from latentstitch._core.atomic import atomic_path
from latentstitch._core.tables import print_tables, write_json
from latentstitch.cli.options import UsageError, option_errors
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
    "device": "--device",
    "id_column": "--id-column",  # the embedding readers and writers (INDEX as a file, the NEW file apply writes)
    "ids": "--id-column",
    "output": "--output",
    "chunk_rows": "--chunk-rows",
    "thresholds": "--threshold",
}


def run(args: argparse.Namespace, output: Path) -> int:
    with option_errors(OPTIONS):
        return {"plan": plan, "fit": fit, "certify": certify, "apply": apply}[args.action](args, output)


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
    chosen = plan_sample(
        ids, vectors, budget, strategy=args.strategy, holdout=args.holdout, metric=store.metric, seed=args.seed
    )
    save_plan(chosen, output)
    print(
        f"plan ({args.strategy}): re-embed {len(chosen.ids)} of {len(ids)} documents, {len(chosen.fit_ids)} to "
        f"fit and {len(chosen.holdout_ids)} held out for certify: written {output}"
    )
    return 0


def fit(args: argparse.Namespace, output: Path) -> int:
    store = _store(args)
    ids, vectors = store.read()
    sample_ids, sample_new = _sample(args, args.sample, "SAMPLE")
    holdout = load_plan(args.plan)[1] if args.plan else ()
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
        print(learning)
    print(f"written: {output} (and its bridges beside it)")
    return 0


def certify(args: argparse.Namespace, output: Path) -> int:
    migration = Migration.load(args.migration, "MIGRATION")
    store = _store(args)
    ids, vectors = store.read()
    sample_ids, sample_new = _sample(args, args.sample, "SAMPLE")
    _, holdout = load_plan(args.plan)
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
    print(f"written: {output}, " + ", ".join(str(p) for p in charts.values()))
    return 0


def apply(args: argparse.Namespace, output: Path) -> int:
    migration = Migration.load(args.migration, "MIGRATION")
    store = _store(args)
    sample_ids = sample_new = None
    if args.sample:
        sample_ids, sample_new = _sample(args, args.sample, "--sample")
    with option_errors({"sample_ids": "--sample", "sample_new": "--sample"}):  # apply's sample is an option
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
