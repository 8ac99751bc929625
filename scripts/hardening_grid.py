"""Run the contract grid (tests/contract) and count every input by outcome: clear error, warning with a sensible
result, correct, silently wrong, unhelpful crash (issue 18's closing-note measurement).

    PYTHONPATH=src python scripts/hardening_grid.py              # this checkout
    PYTHONPATH=/path/to/other/src python scripts/hardening_grid.py --list wrong,unhelpful

The grid is the one the contract tests draw from; run it against another checkout's sources (e.g. a
``git worktree`` of the base commit) by pointing PYTHONPATH there. Cases of the scale-safety kernels owned by the
issue-21 branch are counted in their own columns.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "contract"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", default="", help="print the cases of these outcomes (comma-separated prefixes)")
    parser.add_argument("--family", default=None, help="only this family (measure, projection, file, cli, ...)")
    parser.add_argument("--skip-slow", action="store_true", help="leave out the slow cases (a demo smoke run)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    os.environ.setdefault("MPLBACKEND", "Agg")
    from contract_cases import OUTCOMES, run_case
    from contract_grid_io import all_cases

    import latentstitch

    started = time.perf_counter()
    cases = [
        c for c in all_cases() if (args.family is None or c.family == args.family) and not (args.skip_slow and c.slow)
    ]
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    listed = [p.strip() for p in args.list.split(",") if p.strip()]
    for case in cases:
        outcome, detail = run_case(case)
        column = "issue-21" if case.owner else "ours"
        counts[column][outcome] += 1
        counts[f"{case.family}/{column}"][outcome] += 1
        if any(outcome.startswith(prefix) for prefix in listed):
            print(f"[{outcome}] {case.id}{' (issue 21)' if case.owner else ''}: {detail}")
    print(
        f"\nlatentstitch from {Path(latentstitch.__file__).parent}; {len(cases)} inputs in "
        f"{time.perf_counter() - started:.0f} s\n"
    )
    header = f"| {'outcome':<16} | {'this issue':>10} | {'issue 21 (scale-safety)':>23} | {'all':>5} |"
    print(header)
    print("|" + "---|" * 4)
    for outcome in OUTCOMES:
        ours, theirs = counts["ours"][outcome], counts["issue-21"][outcome]
        print(f"| {outcome:<16} | {ours:>10} | {theirs:>23} | {ours + theirs:>5} |")
    total_ours, total_theirs = sum(counts["ours"].values()), sum(counts["issue-21"].values())
    print(f"| {'total':<16} | {total_ours:>10} | {total_theirs:>23} | {total_ours + total_theirs:>5} |")
    print(
        "\nby family (this issue's inputs): "
        + "; ".join(
            f"{key.split('/')[0]} " + ", ".join(f"{o.split()[0]} {n}" for o, n in sorted(counts[key].items()))
            for key in sorted(counts)
            if key.endswith("/ours")
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
