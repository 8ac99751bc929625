"""Similarity indices between two embedding files of the same items (CKA, the CCA family, Procrustes, RSA, k-NN).

    latentstitch compare A B [--measures linear_cka mutual_knn ...] [--permutations 1000] [--json results.json]

Rows are paired by order, or matched with --id-column. Each measure is printed with its kind (similarity or
distance) and range. Fitted measures (R^2 of a linear fit, the CCA family) reach their "identical" end on any data
once the items are no more than the features of a side plus one (N <= d + 1, ``similarity.is_trivial``): for them a
note replaces the meaningless value. ``--permutations K`` adds, per measure, the p-value of a permutation test (B's
rows shuffled K times: is A more alike B than with no pairing?) and the calibrated value (0 = the null's mean,
1 = identical; ``similarity.permutation_test``: closed-form permutation moments for linear, debiased and RBF CKA, K
drawn permutations for the others). Whatever the options, a closed-form permutation test of linear CKA checks the
pairing: when no tested measure is more alike than shuffled rows (every p >= 0.05), one line says that the rows look
unpaired. A progress bar with the time remaining runs on stderr over the measures and permutations (--quiet: none).
Measures that need N x N memory (RBF CKA, RSA) and mutual k-NN run on a random subset of --max-rows rows.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from latentstitch.cli.files import add_pair_arguments, add_run_options, check_inputs, pin_threads, read_pair
from latentstitch.cli.options import (
    UsageError,
    nonnegative_int,
    output_file,
    positive_int,
    refuse_overwrite,
    seed,
)

HELP = "similarity indices between two embedding files of the same items"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pair_arguments(parser, "a", "b", "one model's vectors of N items", "another model's vectors of the same items")
    parser.add_argument(
        "--measures",
        nargs="+",
        default=None,
        metavar="NAME",
        help="measures to compute (default: every default measure of latentstitch.similarity, plus the same-space "
        "ones when the widths agree)",
    )
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the results as JSON")
    parser.add_argument(
        "--max-rows",
        type=positive_int,
        default=5000,
        help="rows used by the N x N measures (rbf_cka, rsa, mutual_knn): a seeded random subset (default 5000)",
    )
    parser.add_argument(
        "--permutations",
        type=nonnegative_int,
        default=0,
        metavar="K",
        help="also test each measure against K permutations of B's rows: p-value and calibrated value (default 0: "
        "no test; 1000 gives p-values down to 0.001)",
    )
    parser.add_argument("--seed", type=seed, default=0, help="seed of that subset and of the permutations (default 0)")
    add_run_options(parser)


def main(args: argparse.Namespace) -> int:
    report_path = None if args.json is None else output_file(args.json, "--json")
    check_inputs(args, ("a", "b"))
    refuse_overwrite({"--json": report_path}, {"A": args.a, "B": args.b})

    import warnings

    from rich.console import Console

    from latentstitch._core.progress import new_progress
    from latentstitch._core.tables import print_tables, table, write_json
    from latentstitch.similarity import MEASURES, UNPAIRED_P, SmallSampleWarning, compare, pairing_p_value

    if args.measures is not None:
        for name in args.measures:
            if name not in MEASURES:
                raise UsageError(f"--measures: unknown measure {name!r}; known: {', '.join(sorted(MEASURES))}")
    pin_threads(args)
    a, b, described = read_pair(args, ("a", "b"))
    progress = new_progress(console=Console(stderr=True), transient=True, disable=args.quiet)
    with progress, warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)  # the table's notes say which values are not shown
        pairing = pairing_p_value(a, b, args.seed)
        result = compare(
            a,
            b,
            args.measures,
            skip_undefined=True,
            permutations=args.permutations,
            seed=args.seed,
            max_rows=args.max_rows,
            progress=progress,
        )
    n, widths = result.samples, result.widths
    names = result.measures
    values = {name: None if name in result.trivial else result.scores.get(name) for name in names}
    tests = {}
    if args.permutations:
        found = {name: result.tests.get(name) for name in names}
        tests = {
            name: None if t is None else {"p_value": t.p_value, "calibrated": t.calibrated} for name, t in found.items()
        }
    rows = [measure_row(result, name, values[name], tests.get(name), args.permutations) for name in names]
    notes = [f"N = {n} paired items; A has {widths[0]} features, B has {widths[1]}"]
    p_values = [t["p_value"] for t in tests.values() if t is not None] + ([] if pairing is None else [pairing])
    unpaired = bool(p_values) and min(p_values) >= UNPAIRED_P
    columns = ["measure", "value", "kind", "range"]
    if args.permutations:
        columns += ["p-value", "calibrated"]
        notes.append(
            f"p-value: closed-form permutation moments where the measure has them (linear, debiased, RBF CKA), else "
            f"(1 + the shuffles of B's rows at least as alike as the data) / (1 + {args.permutations}), the smallest "
            f"possible {1 / (args.permutations + 1):.2g}. calibrated: 0 = as alike as unpaired rows, 1 = identical"
        )
    report = table(
        "Similarity of the two embeddings (latentstitch.similarity)",
        [*columns, "note"],
        rows,
        "similarity: larger = more alike; distance: smaller = more alike. Conventions of each measure: "
        "latentstitch.similarity.MEASURES, by name.",
    )
    print("\n".join(f"read {line}" for line in described))
    print_tables([report], notes)
    if unpaired:
        print(
            "the rows look unpaired: no measure is more alike than shuffled rows (every permutation p >= "
            f"{UNPAIRED_P}); check the row order of A and B or use --id-column"
        )
    if report_path is not None:
        payload = {
            "kind": "compare",
            "title": f"Similarity of {Path(args.a).name} and {Path(args.b).name}",
            "tables": [report],
            "notes": notes,
            "values": values,
            **({"permutation_tests": tests, "permutations": args.permutations} if args.permutations else {}),
            "pairing_p_value": pairing,
            "rows_look_unpaired": unpaired,
            "n": n,
            "features": list(widths),
            "files": described,
        }
        write_json(payload, report_path)
        print(f"written: {report_path}")
    return 0


def measure_row(result, name: str, value: float | None, test: dict | None, permutations: int) -> list:
    """One measure's table row: what ``similarity.compare`` returned for it, and a note where it has no value."""
    from latentstitch.similarity import get_measure

    n, widths = result.samples, result.widths
    spec = get_measure(name)
    note = ""
    if name in result.trivial and n <= spec.trivial_samples:
        note = f"not shown: with N = {n} items this measure reaches 'identical' on any data; use more items"
    elif name in result.trivial:
        note = (
            f"not shown: with N = {n} items <= d + 1 = {max(widths) + 1} this fitted measure reaches "
            "'identical' on any data; use more items than features + 1"
        )
    elif name in result.skipped:
        note = result.skipped[name]
    elif result.subsampled(name):
        note = f"on a random {len(result.subset)} of the {n} items (--max-rows)"
    low, high = spec.value_range
    row = [name, value, spec.kind, f"[{low:g}, {high:g}]"]
    if permutations:
        row += [None, None] if test is None else [test["p_value"], test["calibrated"]]
    return [*row, note]
