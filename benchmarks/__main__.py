"""Run the benchmarks: ``python -m benchmarks [NAME ...] [--threads N] [--repeats R] [--quick]``.

Each module in this folder with a ``run(args)`` function is a benchmark; with no names, all of them run except those
that set ``RUN_BY_DEFAULT = False`` (``distributed_scale``: its full size takes an hour on two cores). A module may
define ``add_arguments(parser)`` for options of its own (``distributed_scale``: ``--rows``, ``--workers``), parsed
apart from the other benchmarks' (two may give one option its own meaning or default: ``--rows``, ``--device``);
``--help`` lists the options of the benchmarks named (of all, with none named).
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


def _own_parser(module) -> argparse.ArgumentParser:
    """The options of one benchmark (its ``add_arguments``), parsed apart from the others'."""
    name = module.__name__.rpartition(".")[2]
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {name}", add_help=False)
    if hasattr(module, "add_arguments"):
        module.add_arguments(parser.add_argument_group(f"options of {name}"))
    return parser


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
    own = {module.__name__.rpartition(".")[2]: _own_parser(module) for module in modules}
    if "-h" in argv or "--help" in argv:
        parser.print_help()
        for module in modules:
            if hasattr(module, "add_arguments"):
                print("\n" + own[module.__name__.rpartition(".")[2]].format_help().rstrip())
        return 0
    args, rest = parser.parse_known_args(argv)
    args.command = shlex.join(["python", "-m", "benchmarks", *argv])  # named in the results pages written
    unknown = sorted(set(args.names) - set(available()))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available())}")
    # each benchmark reads its own options (two may give one option other meanings or defaults: --rows, --device)
    spaces, left = {}, None
    for name, own_parser in own.items():
        space, not_its = own_parser.parse_known_args(rest, namespace=argparse.Namespace(**vars(args)))
        spaces[name] = space
        left = set(not_its) if left is None else left & set(not_its)
    stray = sorted(item for item in (left or ()) if item.startswith("-"))
    if stray:
        parser.error(f"unrecognised option(s) {', '.join(stray)} for {', '.join(own) or 'these benchmarks'}")
    print(set_threads(args.threads))
    for module in modules:
        module.run(spaces[module.__name__.rpartition(".")[2]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
