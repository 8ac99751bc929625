"""Run the benchmarks: ``python -m benchmarks [NAME ...] [--threads N] [--repeats R] [--quick]``.

Each module in this folder with a ``run(args)`` function is a benchmark; with no names, all of them run.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

from benchmarks._harness import set_threads


def available() -> list[str]:
    folder = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(folder)]) if not m.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {', '.join(available())})")
    parser.add_argument("--threads", type=int, default=1, help="torch/BLAS threads (default 1: stable timings)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions; medians are reported")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(available()))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available())}")
    # Import first, pin threads after: threadpoolctl only limits the BLAS/OpenMP libraries already loaded, and a
    # benchmark's imports (scipy, sklearn) may load their own.
    modules = [importlib.import_module(f"benchmarks.{name}") for name in args.names or available()]
    print(set_threads(args.threads))
    for module in modules:
        module.run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
