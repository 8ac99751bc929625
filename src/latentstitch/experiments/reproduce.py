"""Reproduce an experiment of the papers, scaled to run on a CPU.

    latentstitch reproduce --list
    latentstitch reproduce NAME [--quick] [--out results/NAME]

Each reproduction writes results/NAME/: results.json (every number), results.md (tables with the paper's numbers
beside ours, how the setting differs from the paper, whether the expected pattern holds) and PNG plots, and prints
the tables. --quick runs a reduced version (fewer seeds, samples and epochs) in CI time.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from types import ModuleType

from latentstitch._cli import UsageError, output_folder, positive_int

HELP = "reproduce a paper experiment (--list shows them)"

# name -> module. A reproduction module defines HELP (one line), PAPER (the citation) and
# run(*, quick: bool, out_dir: Path, progress: bool) -> latentstitch.experiments._report.Report.
REPRODUCTIONS: dict[str, str] = {
    "ae-stitching": "latentstitch.experiments.ae_stitching",
    "cross-architecture-text": "latentstitch.experiments.cross_architecture_text",
    "cross-architecture-vision": "latentstitch.experiments.cross_architecture_vision",
    "cross-lingual": "latentstitch.experiments.cross_lingual",
    "frankenstein": "latentstitch.experiments.frankenstein",
    "latent-similarity-proxy": "latentstitch.experiments.latent_similarity_proxy",
    "latent-similarity-proxy-graph": "latentstitch.experiments.graph_similarity",
    "relative-training": "latentstitch.experiments.relative_training",
    "robust-relative": "latentstitch.experiments.robust_relative",
    "word-embeddings": "latentstitch.experiments.word_embeddings",
}


def load(name: str) -> ModuleType:
    if name not in REPRODUCTIONS:
        known = ", ".join(sorted(REPRODUCTIONS)) or "none yet"
        raise UsageError(f"NAME: unknown reproduction {name!r}; available: {known}")
    return importlib.import_module(REPRODUCTIONS[name])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="which reproduction (see --list)")
    parser.add_argument("--list", action="store_true", help="list the reproductions and exit")
    parser.add_argument("--quick", action="store_true", help="reduced version: fewer seeds, samples, epochs")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default results/NAME)")
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
    if args.list or not args.name:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="reproductions: latentstitch reproduce NAME [--quick]")
        table.add_column("name")
        table.add_column("what")
        for name in sorted(REPRODUCTIONS):
            table.add_row(name, load(name).HELP)
        Console().print(table)
        return 0
    from latentstitch._backend import set_threads
    from latentstitch.experiments._grid import grid_cluster

    if args.workers is not None and args.scheduler is not None:
        raise UsageError("--workers and --scheduler: give one (a local cluster of N workers, or an existing one)")
    module = load(args.name)
    set_threads(args.threads)
    out_dir = output_folder(args.out or Path("results") / args.name, "--out")
    with grid_cluster(args.scheduler, args.workers):
        report = module.run(quick=args.quick, out_dir=out_dir, progress=not args.quiet)
    report.write(out_dir)
    report.print(out_dir)
    return 0
