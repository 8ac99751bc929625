"""Reproduce an experiment of the papers, scaled to run on a CPU.

    latentstitch reproduce --list
    latentstitch reproduce NAME [--quick] [--out FOLDER]
    latentstitch reproduce --all --quick --check
    latentstitch reproduce frankenstein --out results/frankenstein --resume   # go on after an interruption

Each reproduction writes ./latentstitch-results/NAME/ (or --out FOLDER): results.json (every number), results.md
(the paper's patterns with their verdicts, tables with the paper's numbers beside ours, how the setting differs from
the paper) and PNG plots, and prints the tables. `latentstitch report` turns such folders into one HTML page.

The committed full runs in the repository's results/NAME/ are written only when asked for by name
(--out results/NAME); a --quick run never replaces a full run's results (--overwrite to force it).

--quick runs a smaller but real version of each experiment (a minute or two on 2 cores) that judges the headline
patterns only; --check exits with status 1 when a headline pattern does not hold (CI runs
`reproduce --all --quick --check`).

The runs of hours (RESUMABLE) keep their finished stages in FOLDER/checkpoint while they run; after an interruption
(a closed session, Ctrl-C) --resume goes on from there with the same settings, giving the numbers an uninterrupted run
gives. Without --resume a run starts over.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from pathlib import Path
from types import ModuleType

from latentstitch._cli import UsageError, output_folder, positive_int

HELP = "reproduce a paper experiment (--list shows them)"

#: Where runs go unless --out says otherwise (the repository's committed full runs live in results/).
DEFAULT_ROOT = Path("latentstitch-results")

# name -> module (a package per reproduction). It defines HELP (one line), PAPER (the citation) and
# run(*, quick: bool, out_dir: Path, progress: bool) -> latentstitch.experiments._report.Report.
REPRODUCTIONS: dict[str, str] = {
    "ae-stitching": "latentstitch.experiments.ae_stitching",
    "cross-architecture-text": "latentstitch.experiments.cross_architecture_text",
    "cross-architecture-vision": "latentstitch.experiments.cross_architecture_vision",
    "cross-lingual": "latentstitch.experiments.cross_lingual",
    "frankenstein": "latentstitch.experiments.frankenstein",
    "latent-similarity-proxy": "latentstitch.experiments.latent_similarity_proxy",
    "latent-similarity-proxy-graph": "latentstitch.experiments.latent_similarity_proxy_graph",
    "relative-training": "latentstitch.experiments.relative_training",
    "robust-relative": "latentstitch.experiments.robust_relative",
    "word-embeddings": "latentstitch.experiments.word_embeddings",
}

#: Reproductions whose run(...) also takes ``resume: bool`` (a checkpoint of finished stages in OUT/checkpoint).
RESUMABLE: tuple[str, ...] = ("ae-stitching", "frankenstein")


def load(name: str) -> ModuleType:
    if name not in REPRODUCTIONS:
        known = ", ".join(sorted(REPRODUCTIONS)) or "none yet"
        raise UsageError(f"NAME: unknown reproduction {name!r}; available: {known}")
    return importlib.import_module(REPRODUCTIONS[name])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="which reproduction (see --list)")
    parser.add_argument("--list", action="store_true", help="list the reproductions and exit")
    parser.add_argument("--all", action="store_true", help="run every reproduction, one after the other")
    parser.add_argument(
        "--quick", action="store_true", help="smaller version (a minute or two): judges the headline patterns only"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"output folder (default {DEFAULT_ROOT}/NAME); with --all, the parent of one folder per reproduction. "
        "The committed full runs are written by naming them: --out results/NAME",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="let a --quick run replace the results of a full run in --out"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on with an interrupted run from the checkpoint in its --out folder (the runs of hours: "
        f"{', '.join(RESUMABLE)}); without it a run starts over",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit with status 1 when a headline pattern does not hold (or a run fails)"
    )
    parser.add_argument("--threads", type=positive_int, default=1, help="torch and BLAS threads (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="run the independent trainings (the grids of latent-similarity-proxy(-graph), the layers of "
        "frankenstein's sweeps) as tasks on a local Dask cluster of N worker processes (needs the dask extra; "
        "docs/distributed.md)",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="as --workers, on an existing Dask cluster (scheduler address, e.g. tcp://host:8786)",
    )


def main(args: argparse.Namespace) -> int:
    if args.list or (not args.name and not args.all):
        _print_list()
        return 0
    if args.all and args.name:
        raise UsageError("NAME and --all: give one reproduction or --all, not both")
    if args.workers is not None and args.scheduler is not None:
        raise UsageError("--workers and --scheduler: give one (a local cluster of N workers, or an existing one)")
    names = sorted(REPRODUCTIONS) if args.all else [args.name]
    modules = {name: load(name) for name in names}
    if args.resume and not args.all and args.name not in RESUMABLE:
        raise UsageError(f"--resume: {args.name} keeps no checkpoint; the runs that do: {', '.join(RESUMABLE)}")
    if args.all:
        root = args.out if args.out is not None else DEFAULT_ROOT
        folders = {name: root / name for name in names}
    else:
        folders = {args.name: args.out if args.out is not None else DEFAULT_ROOT / args.name}
    for folder in folders.values():  # every folder checked before any work starts
        check_replaceable(folder, quick=args.quick, overwrite=args.overwrite)
        output_folder(folder, "--out")

    from latentstitch._core.device import set_threads
    from latentstitch.experiments._grid import grid_cluster

    set_threads(args.threads)
    outcomes = []
    with grid_cluster(args.scheduler, args.workers):
        for name, module in modules.items():
            started = time.perf_counter()
            try:
                resume = {"resume": args.resume} if name in RESUMABLE else {}
                report = module.run(quick=args.quick, out_dir=folders[name], progress=not args.quiet, **resume)
            except KeyboardInterrupt:
                if name in RESUMABLE:
                    _resume_hint(name, folders[name], args.quick)
                raise
            except Exception as error:  # with --all, one failed run must not hide the others
                if not args.all:
                    raise
                outcomes.append((name, None, time.perf_counter() - started, f"{type(error).__name__}: {error}"))
                continue
            report.write(folders[name])
            report.print(folders[name])
            outcomes.append((name, report, time.perf_counter() - started, ""))
    if args.all:
        _print_summary(outcomes, args.quick)
    failed = [name for name, report, _, error in outcomes if report is None or report.headline_failures]
    return 1 if args.check and failed else 0


def _resume_hint(name: str, folder: Path, quick: bool) -> None:
    import sys

    from latentstitch.experiments._checkpoint import FOLDER

    if (folder / FOLDER).is_dir():
        command = f"latentstitch reproduce {name}{' --quick' if quick else ''} --out {folder} --resume"
        print(f"{name}: its finished stages are kept in {folder / FOLDER}; `{command}` goes on", file=sys.stderr)


def check_replaceable(folder: Path, *, quick: bool, overwrite: bool) -> None:
    """A quick run must not replace a full run's results by accident (e.g. the committed results/NAME)."""
    saved = folder / "results.json"
    if not quick or overwrite or not saved.is_file():
        return
    try:
        previous = json.loads(saved.read_text())
    except (OSError, ValueError):
        return
    if isinstance(previous, dict) and not previous.get("quick", False):
        raise UsageError(
            f"--out: {str(folder)!r} holds the results of a full run; a --quick run would replace them. Choose "
            "another folder (the default is latentstitch-results/NAME) or pass --overwrite"
        )


def _print_list() -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="reproductions: latentstitch reproduce NAME [--quick]")
    table.add_column("name")
    table.add_column("what")
    for name in sorted(REPRODUCTIONS):
        table.add_row(name, load(name).HELP)
    Console().print(table)


def _print_summary(outcomes: list, quick: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{'quick' if quick else 'full'} runs: headline patterns (★) and all patterns judged")
    for column in ("reproduction", "time (s)", "★ held", "all held", "status"):
        table.add_column(column, justify="left" if column in ("reproduction", "status") else "right")
    for name, report, seconds, error in outcomes:
        if report is None:
            table.add_row(name, f"{seconds:.0f}", "-", "-", f"FAILED: {error}")
            continue
        headline = [v for v in report.patterns if v.headline]
        table.add_row(
            name,
            f"{seconds:.0f}",
            f"{sum(v.holds for v in headline)}/{len(headline)}" if headline else "-",
            f"{sum(v.holds for v in report.patterns)}/{len(report.patterns)}" if report.patterns else "-",
            "smoke test (no verdicts)"
            if report.smoke
            else ("ok" if not report.headline_failures else "HEADLINE PATTERN NOT HELD"),
        )
    Console(width=120).print(table)
