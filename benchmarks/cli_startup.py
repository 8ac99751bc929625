"""Start-up of the command line: ``latentstitch --help``, ``COMMAND --help`` and user errors, against a bare
``python -c pass`` measured in the same run.

Each case is a fresh ``python -m latentstitch ...`` process (what the console script runs), timed wall-clock; the
cases are interleaved round after round (``_harness.interleaved_times``), so load on a shared machine hits them alike.
Shown: the median seconds, and the median over rounds of (case - floor), the command line's own cost.
``--before SRC`` also times another source tree (e.g. a checkout of the old code: ``--before /tmp/before/src``) in
the same rounds. Target (issue 25): under one second each, i.e. no torch / scikit-learn / scipy / matplotlib import
before a command's work starts (tests/test_cli.py checks that structurally).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

CASES = {
    "--help": ["--help"],
    "demo --help": ["demo", "--help"],
    "bridge fit --help": ["bridge", "fit", "--help"],
    "compare --help": ["compare", "--help"],
    "reproduce --help": ["reproduce", "--help"],
    "error: missing input file": ["compare", "no-such-a.npy", "no-such-b.npy"],
    "error: bad option value": ["demo", "--epochs", "0"],
}


def add_arguments(parser) -> None:
    group = parser.add_argument_group("cli_startup")
    group.add_argument(
        "--before", default=None, metavar="SRC", help="also time the command line of this source tree (its src/)"
    )


def _source_tree() -> str:
    import latentstitch  # the package root imports nothing heavy

    return str(Path(latentstitch.__file__).resolve().parents[1])


def _runner(argv: list[str], src: str | None):
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    command = [sys.executable, *argv]

    def run() -> None:
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    return run


def run(args) -> None:
    from benchmarks._harness import interleaved_times, print_table

    trees = {"ours": _source_tree()}
    if getattr(args, "before", None):
        trees["before"] = str(Path(args.before).resolve())
    runs = {"floor": _runner(["-c", "pass"], None)}
    for label, src in trees.items():
        for name, argv in CASES.items():
            runs[f"{label}: {name}"] = _runner(["-m", "latentstitch", *argv], src)
    repeats = 3 if args.quick else args.repeats
    times = interleaved_times(runs, repeats=repeats, warmup=1)
    floor = times["floor"]
    rows = [["python -c pass (floor)", statistics.median(floor), 0.0]]
    for name, values in times.items():
        if name != "floor":
            own = statistics.median(t - f for t, f in zip(values, floor, strict=True))
            rows.append([f"latentstitch {name}", statistics.median(values), own])
    print_table(
        f"command-line start-up, wall seconds, median of {repeats} interleaved rounds (a fresh process each)",
        ["case", "seconds", "seconds over the floor"],
        rows,
    )
