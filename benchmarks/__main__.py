"""Run the benchmarks: ``python -m benchmarks [NAME ...] [--threads N] [--repeats R] [--quick]``.

Each module in this folder with a ``run(args)`` function is a benchmark; with no names, all of them run except those
that set ``RUN_BY_DEFAULT = False`` (``distributed_scale``: its full size takes an hour on two cores). A module may
define ``add_arguments(parser)`` for options of its own (``distributed_scale``: ``--rows``, ``--workers``).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import shlex
import sys
from pathlib import Path

from benchmarks._harness import set_threads


def available() -> list[str]:
    folder = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(folder)]) if not m.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "names", nargs="*", help=f"benchmarks to run, of {', '.join(available())} (default: all but distributed_scale)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch/BLAS threads (default 1: stable timings)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions; medians are reported")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    # A benchmark may add its own options (add_arguments(parser)): import the ones named before parsing.
    argv = sys.argv[1:] if argv is None else argv
    named = [name for name in argv if name in available()]
    # Import first, pin threads after: threadpoolctl only limits the BLAS/OpenMP libraries already loaded, and a
    # benchmark's imports (scipy, sklearn) may load their own.
    if named:
        modules = [importlib.import_module(f"benchmarks.{name}") for name in named]
    else:
        modules = [importlib.import_module(f"benchmarks.{name}") for name in available()]
        modules = [module for module in modules if getattr(module, "RUN_BY_DEFAULT", True)]
    for module in modules:
        if hasattr(module, "add_arguments"):
            module.add_arguments(parser)
    args = parser.parse_args(argv)
    args.command = shlex.join(["python", "-m", "benchmarks", *argv])  # named in the results pages written
    unknown = sorted(set(args.names) - set(available()))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available())}")
    print(set_threads(args.threads))
    for module in modules:
        module.run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
