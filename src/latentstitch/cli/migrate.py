"""Move a vector index to a new embedding model without re-embedding all of it.

    latentstitch migrate plan INDEX --budget 0.05 -o plan.csv
    (embed the plan's ids with the new model: SAMPLE, a table or .npz with an `id` column)
    latentstitch migrate fit INDEX SAMPLE --plan plan.csv -o migration.json
    latentstitch migrate certify migration.json INDEX SAMPLE --plan plan.csv -o certificate.json
    latentstitch migrate refit migration.json INDEX SAMPLE -o final.json   (once certified: fit on every item)
    latentstitch migrate apply migration.json INDEX -o NEW_INDEX --sample SAMPLE
    latentstitch migrate search migration.json INDEX NEW QUERIES --new-vectors FILE   (cascade: see below)
    latentstitch migrate status migration.json INDEX NEW

INDEX: a FAISS index file (flat, IVF, HNSW; bare or with an id map), a LanceDB table folder, a Chroma persistent
folder, a Qdrant local folder, a Milvus Lite .db file, or an embedding file (.npy, .parquet, .npz, ...), with the
old model's vectors. plan chooses which documents to re-embed (a held-out part is kept for certify). fit fits a
query-side bridge (new queries -> the old index, untouched) and a corpus-side one (the old index -> the new space)
and chooses by cross-validated MRR@10 over the whole index. certify measures the chosen setup on the held-out items
against the old model and the re-embedded reference, with bootstrap intervals, writes a certificate JSON and its
charts (shown by `latentstitch report`). refit, once certified, refits the bridges on every re-embedded item (the
held-out ones too) into a new migration file for apply and search; the certificate stays the one measured before
the refit. apply streams the old index into a NEW collection (the old one is never
modified), resumable: run the same command again after an interruption. search is the cascade: new-model QUERIES
are bridged into the old index, which recalls --depth candidates; the new model ranks them, their new vectors read
from NEW or computed (--new-vectors, or --documents with --encoder) and written to NEW, which fills as queries come;
status says how far NEW is filled (and, with --queries-new, the cascade's quality by depth).

Metrics: an index's own (FAISS, the databases); --metric for files. With cosine the bridges read and write unit
vectors; with ip and l2 raw vectors.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from latentstitch.cli.files import add_run_options, pin_threads
from latentstitch.cli.options import (
    UsageError,
    input_file,
    nonnegative_float,
    output_file,
    positive_float,
    positive_int,
    refuse_overwrite,
    seed,
)

HELP = "move a vector index to a new embedding model: plan, fit, certify, refit, apply"
#: ``migrate.METRICS``, ``migrate.KINDS`` and ``migrate.STRATEGIES``, copied so that --help and option errors import
#: nothing heavy (tests/test_cli.py holds the copies equal)
METRICS = ("ip", "cosine", "l2")
KINDS = ("file", "faiss", "lancedb", "chroma", "qdrant", "milvus")
STRATEGIES = ("random", "kmeans", "farthest", "access", "uncertainty")


def _index_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("index", metavar="INDEX", help="the old index (FAISS file, database folder, embedding file)")
    group = parser.add_argument_group("reading the index")
    group.add_argument("--kind", choices=KINDS, default=None, help="the kind of INDEX (default: guessed)")
    group.add_argument("--collection", default=None, help="the table / collection in INDEX (default: the only one)")
    group.add_argument(
        "--metric",
        choices=METRICS,
        default=None,
        help="the metric of a file or LanceDB INDEX (default: cosine for unit vectors, else ip for a file and l2, its "
        "default, for LanceDB); other stores say their own",
    )
    group.add_argument(
        "--id-column",
        default=None,
        metavar="NAME",
        help="the id column of a table INDEX (default: a column named id, else the row numbers)",
    )


def _sub(actions, name: str, help_text: str) -> argparse.ArgumentParser:
    return actions.add_parser(
        name, help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def _query_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("a sample of real queries (optional)")
    group.add_argument(
        "--queries-new", type=Path, default=None, metavar="FILE", help="queries embedded by the new model"
    )
    group.add_argument(
        "--queries-old",
        type=Path,
        default=None,
        metavar="FILE",
        help="the same queries (same rows) embedded by the old model",
    )
    group.add_argument(
        "--queries-relevant",
        default=None,
        metavar="COLUMN",
        help="the column of --queries-new holding each query's relevant document id (scores queries)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser), required=True)
    plan = _sub(actions, "plan", "choose which documents to re-embed, and which to hold out for certify")
    _index_options(plan)
    plan.add_argument(
        "--budget", type=positive_float, required=True, help="documents to re-embed: a share in (0, 1) or a count"
    )
    plan.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="kmeans",
        help="how to choose them (default kmeans: the item nearest each of BUDGET centroids). access: the documents "
        "--query-log reaches first, k-means coverage filling the rest. uncertainty, in two stages: (1) without "
        "--provisional: the held-out part and a k-means seed of --first-share of the rest; re-embed those and run "
        "`migrate fit INDEX SAMPLE --plan PLAN1 -o provisional.json`; (2) with --provisional provisional.json "
        "--first-plan PLAN1 (same INDEX and --budget: the whole budget): PLAN1's ids plus the documents whose "
        "neighbours the provisional bridge keeps least; re-embed the added ids and fit again on all",
    )
    plan.add_argument(
        "--query-log",
        type=Path,
        default=None,
        metavar="FILE",
        help="access: the users' queries embedded by the OLD model (an embedding file; a query asked n times given n "
        "times), or a .csv / .parquet table with an id column and an optional count column (accesses per document)",
    )
    plan.add_argument(
        "--provisional",
        type=Path,
        default=None,
        metavar="MIGRATION",
        help="uncertainty, second stage: the migration `migrate fit` wrote from the first stage's sample",
    )
    plan.add_argument(
        "--first-plan",
        type=Path,
        default=None,
        metavar="FILE",
        help="uncertainty, second stage: the first stage's plan",
    )
    plan.add_argument(
        "--first-share",
        type=positive_float,
        metavar="SHARE",
        default=0.5,
        help="uncertainty, first stage: the share of the fit part re-embedded first (default 0.5)",
    )
    plan.add_argument(
        "--holdout",
        type=nonnegative_float,
        default=0.3,
        help="share of the budget held out for certify, drawn at random (default 0.3)",
    )
    plan.add_argument("--seed", type=seed, default=0)
    plan.add_argument("-o", "--output", type=Path, required=True, help="the id list (.csv or .parquet)")
    add_run_options(plan)

    fit = _sub(actions, "fit", "fit both modes' bridges and choose one by cross-validation")
    _index_options(fit)
    fit.add_argument("sample", metavar="SAMPLE", help="the re-embedded documents: new vectors with their ids")
    fit.add_argument("--sample-id-column", default="id", metavar="NAME", help="SAMPLE's id column (default id)")
    fit.add_argument("--plan", type=Path, default=None, help="the plan: its held-out ids are not fitted on")
    fit.add_argument("--folds", type=positive_int, default=5, help="cross-validation folds (default 5)")
    fit.add_argument("--seed", type=seed, default=0)
    fit.add_argument("-o", "--output", type=Path, required=True, help="the migration (.json; bridges beside it)")
    _query_options(fit)
    add_run_options(fit)

    certify = _sub(actions, "certify", "measure the migration on the held-out re-embedded items")
    certify.add_argument("migration", metavar="MIGRATION", help="written by `migrate fit`")
    _index_options(certify)
    certify.add_argument("sample", metavar="SAMPLE", help="the re-embedded documents (as for fit)")
    certify.add_argument("--sample-id-column", default="id", metavar="NAME")
    certify.add_argument("--plan", type=Path, required=True, help="the plan whose certify ids are measured")
    certify.add_argument("--threshold", type=float, nargs="+", default=[], help="similarity cut-offs to remap")
    certify.add_argument(
        "--threshold-space", choices=("old", "new"), default="old", help="the space the cut-offs are in (default old)"
    )
    certify.add_argument("--seed", type=seed, default=0)
    certify.add_argument("-o", "--output", type=Path, required=True, help="the certificate (.json; charts beside)")
    _query_options(certify)
    add_run_options(certify)

    refit = _sub(actions, "refit", "once certified: refit the bridges on every re-embedded item, for apply")
    refit.add_argument("migration", metavar="MIGRATION", help="written by `migrate fit` (and certified)")
    _index_options(refit)
    refit.add_argument("sample", metavar="SAMPLE", help="the re-embedded documents, the held-out ones included")
    refit.add_argument("--sample-id-column", default="id", metavar="NAME")
    refit.add_argument("--seed", type=seed, default=0)
    refit.add_argument(
        "-o", "--output", type=Path, required=True, help="the refitted migration (.json; bridges beside it)"
    )
    _query_options(refit)
    add_run_options(refit)

    apply = _sub(actions, "apply", "stream the old index into a new collection through the corpus-side bridge")
    apply.add_argument("migration", metavar="MIGRATION", help="written by `migrate fit`")
    _index_options(apply)
    apply.add_argument("-o", "--output", type=Path, required=True, help="the new index / collection (must not exist)")
    apply.add_argument("--sample", default=None, help="re-embedded documents: written with their true new vectors")
    apply.add_argument("--sample-id-column", default="id", metavar="NAME")
    apply.add_argument("--output-kind", choices=KINDS, default=None, help="the kind of store written (default INDEX's)")
    apply.add_argument("--chunk-rows", type=positive_int, default=65_536, help="vectors per chunk (default 65536)")
    apply.add_argument("--device", default=None, help="where to run the bridge (cpu, cuda, ...; default cpu)")
    apply.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="bridge the chunks on a local Dask cluster of N worker processes (needs the dask extra); same result",
    )
    apply.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="as --workers, on an existing Dask cluster (tcp://host:8786); the workers write into a folder beside "
        "--output, which they must all reach",
    )
    add_run_options(apply)
    from latentstitch.cli import _migrate_search

    _migrate_search.add_arguments(actions, _sub, _index_options, add_run_options)


def main(args: argparse.Namespace) -> int:
    if args.action in ("search", "status"):
        from latentstitch.cli import _migrate_search

        pin_threads(args)
        return _migrate_search.main(args)
    input_file(args.index, "INDEX")
    if getattr(args, "migration", None):
        input_file(args.migration, "MIGRATION")
    if getattr(args, "sample", None):
        input_file(args.sample, "SAMPLE" if args.action != "apply" else "--sample")
    if getattr(args, "plan", None):
        input_file(args.plan, "--plan")
    if args.action == "plan":
        _check_plan_options(args)
    if getattr(args, "workers", None) is not None and getattr(args, "scheduler", None) is not None:
        raise UsageError("--workers and --scheduler: give one (a local cluster of N workers, or an existing one)")
    if (getattr(args, "queries_new", None) is None) != (getattr(args, "queries_old", None) is None):
        raise UsageError("--queries-old: give both --queries-new and --queries-old (the same queries, both models)")
    # the inputs first: an output that is an input store folder is refused for that cause, not as "a folder"
    refuse_overwrite(
        {"--output": args.output},
        {
            "INDEX": args.index,
            "SAMPLE": getattr(args, "sample", None),
            "MIGRATION": getattr(args, "migration", None),
            "--query-log": getattr(args, "query_log", None),
            "--provisional": getattr(args, "provisional", None),
            "--first-plan": getattr(args, "first_plan", None),
        },
    )
    output = output_file(args.output, "--output")
    pin_threads(args)
    from latentstitch.cli import _migrate_steps as steps

    return steps.run(args, output)


def _check_plan_options(args: argparse.Namespace) -> None:
    """The strategy-specific options of `migrate plan`: each given only with its strategy, and its files readable."""
    if args.strategy == "access" and args.query_log is None:
        raise UsageError("--query-log: --strategy access needs the users' query log (old-model query vectors, or ids)")
    if args.strategy != "access" and args.query_log is not None:
        raise UsageError(f"--query-log: only --strategy access reads a query log (--strategy is {args.strategy})")
    second = {"--provisional": args.provisional, "--first-plan": args.first_plan}
    for option, value in second.items():
        if value is not None and args.strategy != "uncertainty":
            raise UsageError(f"{option}: only --strategy uncertainty's second stage reads it")
    if (args.provisional is None) != (args.first_plan is None):
        raise UsageError(
            "--provisional: the second stage of --strategy uncertainty needs both --provisional (the migration fitted "
            "on the first stage's sample) and --first-plan (the first stage's plan)"
        )
    if not 0 < args.first_share <= 1:
        raise UsageError(f"--first-share: expected a share in (0, 1], got {args.first_share:g}")
    for option, value in {"--query-log": args.query_log, **second}.items():
        if value is not None:
            input_file(value, option)
