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
QUADRATIC = ("rbf_cka", "rsa", "mutual_knn")  # N x N memory or time
UNPAIRED_P = 0.05  # every permutation p-value at least this: the rows look unpaired


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

    import numpy as np
    from rich.console import Console

    from latentstitch._core.progress import new_progress
    from latentstitch._core.tables import print_tables, table, write_json
    from latentstitch.similarity import DEFAULT_MEASURES, MEASURES, SAME_SPACE_MEASURES

    if args.measures is not None:
        for name in args.measures:
            if name not in MEASURES:
                raise UsageError(f"--measures: unknown measure {name!r}; known: {', '.join(sorted(MEASURES))}")
    pin_threads(args)
    a, b, described = read_pair(args, ("a", "b"))
    n, widths = a.shape[0], (a.shape[1], b.shape[1])
    names = args.measures or list(DEFAULT_MEASURES + (SAME_SPACE_MEASURES if widths[0] == widths[1] else ()))
    subset = None
    if n > args.max_rows and any(name in QUADRATIC for name in names):
        subset = np.sort(np.random.default_rng(args.seed).choice(n, args.max_rows, replace=False))
    rows, values, tests, notes = [], {}, {}, []
    progress = new_progress(console=Console(stderr=True), transient=True, disable=args.quiet)
    with progress:
        steps = progress.add_task("compare", total=len(names) + 1)
        pairing = pairing_check(a, b, args.seed)
        progress.advance(steps)
        for name in names:
            progress.update(steps, description=f"compare: {name}")
            row, values[name], test = measure_row(args, name, a, b, subset, progress)
            progress.advance(steps)
            if args.permutations:
                tests[name] = None if test is None else {"p_value": test.p_value, "calibrated": test.calibrated}
            rows.append(row)
    notes.append(f"N = {n} paired items; A has {widths[0]} features, B has {widths[1]}")
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
    result = table(
        "Similarity of the two embeddings (latentstitch.similarity)",
        [*columns, "note"],
        rows,
        "similarity: larger = more alike; distance: smaller = more alike. Conventions of each measure: "
        "latentstitch.similarity.MEASURES, by name.",
    )
    print("\n".join(f"read {line}" for line in described))
    print_tables([result], notes)
    if unpaired:
        print(
            "the rows look unpaired: no measure is more alike than shuffled rows (every permutation p >= "
            f"{UNPAIRED_P}); check the row order of A and B or use --id-column"
        )
    if report_path is not None:
        payload = {
            "kind": "compare",
            "title": f"Similarity of {Path(args.a).name} and {Path(args.b).name}",
            "tables": [result],
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


def pairing_check(a, b, seed: int) -> float | None:
    """The closed-form permutation p-value of linear CKA between A and B (None below 8 rows or when undefined)."""
    import warnings

    from latentstitch.similarity import permutation_test

    if a.shape[0] < 8:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return permutation_test(a, b, "linear_cka", method="moments", seed=seed).p_value
    except ValueError:  # a constant side: CKA is undefined, the measures say so themselves
        return None


def measure_row(args, name: str, a, b, subset, progress) -> tuple[list, float | None, object]:
    """One measure's table row, value and permutation test."""
    from latentstitch.similarity import get_measure, is_trivial, permutation_test

    n, widths = a.shape[0], (a.shape[1], b.shape[1])
    spec = get_measure(name)
    note, value, test = "", None, None
    if spec.same_space and widths[0] != widths[1]:
        note = f"compares rows in one space; the widths differ ({widths[0]} vs {widths[1]})"
    elif n < spec.min_samples:
        note = f"needs at least {spec.min_samples} items, got {n}"
    elif n <= spec.trivial_samples:
        note = f"not shown: with N = {n} items this measure reaches 'identical' on any data; use more items"
    elif is_trivial(spec, n, *widths):
        note = (
            f"not shown: with N = {n} items <= d + 1 = {max(widths) + 1} this fitted measure reaches "
            "'identical' on any data; use more items than features + 1"
        )
    else:
        rows_a, rows_b = (a, b) if subset is None or name not in QUADRATIC else (a[subset], b[subset])
        try:
            if args.permutations:
                test = permutation_test(
                    rows_a, rows_b, name, permutations=args.permutations, seed=args.seed, progress=progress
                )
                value = test.value
            else:
                value = float(spec(rows_a, rows_b))
        except ValueError as error:  # e.g. a constant representation: undefined for this measure
            note = "undefined here: " + " ".join(str(error).split())
        if value is not None and subset is not None and name in QUADRATIC:
            note = f"on a random {len(subset)} of the {n} items (--max-rows)"
    low, high = spec.value_range
    row = [name, value, spec.kind, f"[{low:g}, {high:g}]"]
    if args.permutations:
        row += [None, None] if test is None else [test.p_value, test.calibrated]
    return [*row, note], value, test
