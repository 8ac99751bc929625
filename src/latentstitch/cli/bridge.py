"""Make a new model's embeddings usable where an old model's were, checked on parallel anchors.

    latentstitch bridge fit SOURCE TARGET -o bridge.safetensors
    latentstitch bridge apply bridge.safetensors NEW -o bridged.npy

fit: SOURCE holds the new model's vectors of some anchor items, TARGET the old model's vectors of the same items
(rows in the same order, or matched with --id-column). Every route (translation into TARGET's space: ridge on the
raw vectors, a low-rank affine map, Procrustes, a stacked blend; relative representations: cosine, centred,
robust) is scored by 5-fold cross-validation on the anchors, without labels: each held-out anchor is bridged by a
map fitted without it and ranked against every TARGET vector (MRR, top-1, Recall@10), its 10 nearest TARGET vectors
are compared with the true ones (kNN overlap), and R^2 is measured in TARGET's own units. With --target-pool
OLD_INDEX (the old model's vectors of your other items) the held-out anchors are ranked among those too: with few
anchors, the choice and the expected Recall@10 then read a search of your index's size. With --source-pool
NEW_UNPAIRED as well (the new model's vectors of whatever it has embedded), semi-supervised routes use both pools:
Procrustes refined by matching the pools, VecMap's self-learning, bootstrapped anchors (docs/bridge.md, "Pools").

The rule: among the routes clearly better than shuffled pairs (held-out MRR at least 3 standard errors above
chance), the highest held-out score of the consumer (--consumer: index, the default, reads MRR; scaled_head, a
classifier that standard-scales its input, R^2 of standard-scaled features; raw_head neighbourhood agreement: the
scores that ranked routes as those consumers did on the development half of benchmarks bridge_generalisation);
ties: the higher MRR, then the route order. A route's own parameter (ridge penalty, rank) is chosen on the same
score. First printed: the quality to expect (Recall@10 of the old index on bridged vectors, with a 90% bootstrap
interval over the held-out anchors);
then the route table, best first, the chosen route marked. The bridge is saved (safetensors, no pickle) with a
JSON report beside it. More: docs/bridge.md.

apply: bridges NEW (the new model's vectors of any items) and writes what the old model's consumer reads:
vectors in TARGET's space for a translation route, relative vectors for a relative route (train the consumer
on `apply --target` of the old model's labelled vectors). Large files are streamed chunk by chunk.

Formats: .npy, .npz, .safetensors, .pt (tensors only), .parquet, .csv/.tsv, Hugging Face save_to_disk folders.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from latentstitch.cli.files import (
    add_file_options,
    add_pair_arguments,
    add_run_options,
    check_inputs,
    file_options,
    key_for,
    pin_threads,
    read_pair,
)
from latentstitch.cli.options import (
    UsageError,
    input_file,
    option_errors,
    output_file,
    positive_int,
    refuse_overwrite,
    seed,
)

HELP = "fit a checked bridge between two models' embeddings (fit), or apply one to new vectors (apply)"
DEFAULT_BUDGET = (50, 100, 300)
#: ``bridge.CONSUMERS``, copied so that --help imports nothing heavy (tests/test_cli.py holds the copy equal)
CONSUMERS = ("index", "scaled_head", "raw_head")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser), required=True)
    fit = actions.add_parser(
        "fit",
        help="score every route on parallel anchors and save the chosen bridge",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_pair_arguments(
        fit,
        "source",
        "target",
        "the new model's vectors of the anchor items (the space you bridge from)",
        "the old model's vectors of the same items (the space your head or index reads)",
    )
    fit.add_argument("-o", "--output", required=True, type=Path, help="where to save the bridge (.safetensors)")
    fit.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="the JSON report (default: OUTPUT with suffix .json)"
    )
    fit.add_argument(
        "--routes",
        nargs="+",
        default=["auto"],
        metavar="ROUTE",
        help="routes to try (default: auto; `latentstitch bridge routes` lists them)",
    )
    fit.add_argument("--cv", type=positive_int, default=5, help="cross-validation folds over the anchors (default 5)")
    fit.add_argument("--seed", type=seed, default=0, help="seed of the folds and shuffles (default 0)")
    fit.add_argument(
        "--budget",
        type=positive_int,
        nargs="+",
        default=list(DEFAULT_BUDGET),
        metavar="N",
        help="anchor counts for the anchor-budget advice (default 50 100 300; counts not below the training "
        "anchors per fold are skipped)",
    )
    fit.add_argument("--no-budget", action="store_true", help="skip the anchor-budget advice")
    fit.add_argument(
        "--consumer",
        choices=CONSUMERS,
        default="index",
        help="what reads the bridged vectors, so the route is chosen on the score that predicts it: index (default; "
        "a nearest-neighbour index: held-out MRR), scaled_head (a classifier that standard-scales its input: R^2 of "
        "standard-scaled features), raw_head (a classifier on raw vectors: neighbourhood agreement)",
    )
    fit.add_argument(
        "--target-pool",
        type=Path,
        default=None,
        metavar="FILE",
        help="the old model's vectors of other items (your old index, any readable format; read with --key / "
        "--target-key and --vector-column): held-out anchors are ranked among these too, so the choice and the "
        "expected Recall@10 read a search of your index's size (at most 20,000 rows drawn at random are read); "
        "with --source-pool, also the target side of the semi-supervised routes",
    )
    fit.add_argument(
        "--source-pool",
        type=Path,
        default=None,
        metavar="FILE",
        help="the new model's vectors of other items, unpaired (whatever it has embedded; any readable format, read "
        "with --key / --source-key and --vector-column): with --target-pool, the semi-supervised routes "
        "(procrustes_pools, self_learning, bootstrap_pools, ridge_pools) are fitted on the anchors and both pools and "
        "join the cross-validated candidates (at most 20,000 rows drawn at random are read)",
    )
    add_run_options(fit)

    apply = actions.add_parser(
        "apply",
        help="bridge new vectors with a saved bridge",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    apply.add_argument("bridge", metavar="BRIDGE", help="a bridge saved by `latentstitch bridge fit`")
    apply.add_argument(
        "new", metavar="NEW", help="vectors to bridge: the new model's (or, with --target, the old model's)"
    )
    apply.add_argument(
        "-o",
        "--output",
        required=True,
        type=Path,
        help="where to write (.npy, .npz, .safetensors, .pt, .parquet, .csv)",
    )
    apply.add_argument(
        "--target",
        action="store_true",
        help="NEW holds the old model's vectors: write what a consumer of this route is trained on (relative "
        "vectors for a relative route, the vectors unchanged for a translation route)",
    )
    add_file_options(apply)
    add_run_options(apply)

    actions.add_parser("routes", help="list the routes a bridge can use", description="List the routes.")


def main(args: argparse.Namespace) -> int:
    if args.action == "routes":
        return list_routes()
    if args.action == "fit":
        return fit(args)
    return apply(args)


def list_routes() -> int:
    from latentstitch._core.tables import print_tables, table
    from latentstitch.bridge import AUTO_ROUTES, ROUTES

    rows = [
        [s.name, s.family, "yes" if s.auto or s.name in AUTO_ROUTES else "", s.description] for s in ROUTES.values()
    ]
    print_tables(
        [
            table(
                "bridge routes",
                ["route", "family", "auto", "what it does"],
                rows,
                "Also relative_<similarity> and relative_<similarity>_centered for every registered similarity.",
            )
        ]
    )
    return 0


def fit(args: argparse.Namespace) -> int:
    import warnings

    output = output_file(args.output, "--output")
    if output.suffix != ".safetensors":
        raise UsageError(f"--output: a bridge is saved as .safetensors, got {str(output)!r}")
    report_path = output_file(args.json if args.json is not None else output.with_suffix(".json"), "--json")
    check_inputs(args, ("source", "target"))
    inputs = {"SOURCE": args.source, "TARGET": args.target}
    for option, path in (("--target-pool", args.target_pool), ("--source-pool", args.source_pool)):
        if path is not None:
            inputs[option] = input_file(path, option)
    refuse_overwrite(
        {"--output": output, "--json" if args.json is not None else "--json (default: OUTPUT.json)": report_path},
        inputs,
    )

    from latentstitch._core.tables import print_tables, write_json
    from latentstitch.bridge import Bridge, BridgeWarning, bridge_report, resolve_routes

    # the library's errors about its parameters name the options they came from
    options = {
        "routes": "--routes",
        "cv": "--cv",
        "seed": "--seed",
        "budget": "--budget",
        "source_pool": "--source-pool",
        "target_pool": "--target-pool",
    }
    with option_errors(options):
        resolve_routes(args.routes)  # unknown names fail before any reading
    pin_threads(args)
    source, target, described = read_pair(args, ("source", "target"))
    pools = {}
    for side in ("target", "source"):
        if getattr(args, f"{side}_pool") is not None:
            pools[f"{side}_pool"], line = read_pool(args, len(target), side)
            described.append(line)
    bridge = Bridge(
        routes=args.routes,
        cv=args.cv,
        seed=args.seed,
        budget=None if args.no_budget else tuple(args.budget),
        consumer=args.consumer,
    )
    # and a side's errors (every feature constant) name its file
    files = {"source": f"SOURCE ({str(args.source)!r})", "target": f"TARGET ({str(args.target)!r})"}
    with warnings.catch_warnings(), option_errors({**options, **files}):
        warnings.simplefilter("ignore", BridgeWarning)  # its content is in the report's notes, printed below
        bridge.fit(source, target, **pools, progress=not args.quiet)
    bridge.save(output)
    report = bridge_report(
        bridge, cli=True, source=str(args.source), target=str(args.target), files=described, bridge_file=str(output)
    )
    write_json(report, report_path)
    print("\n".join(f"read {line}" for line in described))
    notes = report["notes"]
    if bridge.estimate_ is not None:
        print(notes[0])
        notes = notes[1:]
    print_tables(report["tables"], notes, compact=True)
    print(f"written: {output} (the bridge), {report_path} (the report)")
    return 0


def read_pool(args: argparse.Namespace, anchors: int, side: str = "target"):
    """The rows of ``--target-pool`` or ``--source-pool`` (``side``) the fit reads (``bridge.pieces.pool_draw``: all,
    or a seeded draw; only those are read from the file) and a line describing them."""
    import numpy as np

    from latentstitch.bridge.pieces import pool_draw
    from latentstitch.embeddings import open_embeddings

    option, path = f"--{side}-pool", getattr(args, f"{side}_pool")
    with option_errors(file_options(args, side)):
        opened = open_embeddings(path, key=key_for(args, side), vector_column=args.vector_column, option=option)
    drawn = pool_draw(opened.n_rows, anchors, args.seed)
    if drawn is None:
        return opened.read(progress=not args.quiet), f"{opened.describe()} (the {side} pool)"
    parts = []
    for start, block in opened.chunks():
        inside = drawn[(drawn >= start) & (drawn < start + len(block))]
        parts.append(block[inside - start])
    line = f"{opened.describe()} (the {side} pool: {len(drawn):,} rows drawn at random, --seed {args.seed})"
    return np.concatenate(parts), line


def apply(args: argparse.Namespace) -> int:
    bridge_path = input_file(args.bridge, "BRIDGE")
    output = output_file(args.output, "--output")
    new_path = input_file(args.new, "NEW")
    refuse_overwrite({"--output": output}, {"BRIDGE": bridge_path, "NEW": new_path})

    from latentstitch._core.progress import progress_bar
    from latentstitch.bridge import Bridge
    from latentstitch.embeddings import EmbeddingWriter, open_embeddings

    try:
        bridge = Bridge.load(bridge_path)
    except ValueError as error:
        raise UsageError(f"BRIDGE: {error}") from None
    pin_threads(args)
    with option_errors(file_options(args)):
        opened = open_embeddings(
            new_path, key=args.key, id_column=args.id_column, vector_column=args.vector_column, option="NEW"
        )
    side = "target" if args.target else "source"
    expected = bridge.n_features_target_ if args.target else bridge.n_features_source_
    if opened.n_features != expected:
        model = "old" if args.target else "new"
        raise UsageError(
            f"NEW: {opened.describe()} has {opened.n_features} features but the bridge expects the {model} model's "
            f"{expected}-feature vectors{'' if args.target else ' (use --target for the old model vectors)'}"
        )
    convert = bridge.transform_target if args.target else bridge.transform
    width = bridge._output_width() if (bridge.family_ == "relative" or not args.target) else expected
    with progress_bar(not args.quiet) as bar, option_errors(file_options(args)):
        task = None if bar is None else bar.add_task(f"bridging {new_path.name} ({side})", total=opened.n_rows)
        with EmbeddingWriter(output, opened.n_rows, width, opened.dtype, ids=opened.ids, option="--output") as writer:
            for _, block in opened.chunks():
                writer.write(convert(block))
                if bar is not None:
                    bar.advance(task, len(block))
    kind = "relative vectors" if bridge.family_ == "relative" else "vectors in the old model's space"
    print(f"bridged {opened.n_rows} rows with route {bridge.route_} ({kind}, {width} features): written {output}")
    return 0
