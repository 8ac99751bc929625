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
from pathlib import Path

from latentstitch.cli.options import UsageError, option_errors, output_folder, positive_int

HELP = "reproduce a paper experiment (--list shows them)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from latentstitch.experiments.registry import DEFAULT_ROOT, RESUMABLE  # a small module: no heavy imports

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
        "--device",
        default="cpu",
        help="where the long trainings run (ae-stitching, frankenstein): cpu (default) or cuda[:N]; the other "
        "reproductions run on the CPU",
    )
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
    from latentstitch.experiments import registry

    if args.list or (not args.name and not args.all):
        from latentstitch.experiments.reproduce import print_list

        print_list()
        return 0
    if args.all and args.name:
        raise UsageError("NAME and --all: give one reproduction or --all, not both")
    if args.workers is not None and args.scheduler is not None:
        raise UsageError("--workers and --scheduler: give one (a local cluster of N workers, or an existing one)")
    if not args.all:
        with option_errors({"name": "NAME"}):
            registry.check_name(args.name)
    if args.resume and not args.all and args.name not in registry.RESUMABLE:
        raise UsageError(
            f"--resume: {args.name} keeps no checkpoint; the runs that do: {', '.join(registry.RESUMABLE)}"
        )
    if args.device != "cpu":
        on_device = set(registry.ON_DEVICE)
        if not args.all and args.name not in on_device:
            raise UsageError(
                f"--device: {args.name} runs on the CPU only; --device applies to {', '.join(registry.ON_DEVICE)}"
            )
        with option_errors({"device": "--device"}):
            from latentstitch._core.params import check_device

            check_device(args.device, "device")
    if args.all:
        root = args.out if args.out is not None else registry.DEFAULT_ROOT
        folders = {name: root / name for name in sorted(registry.REPRODUCTIONS)}
    else:
        folders = {args.name: args.out if args.out is not None else registry.DEFAULT_ROOT / args.name}

    from latentstitch._core.device import set_threads
    from latentstitch.experiments.reproduce import holds_full_run, print_summary, run_reproductions

    for folder in folders.values():  # every folder checked before any work starts
        if args.quick and not args.overwrite and holds_full_run(folder):
            raise UsageError(
                f"--out: {str(folder)!r} holds the results of a full run; a --quick run would replace them. Choose "
                "another folder (the default is latentstitch-results/NAME) or pass --overwrite"
            )
        output_folder(folder, "--out")
    set_threads(args.threads)
    with option_errors({"resume": "--resume", "device": "--device"}):  # a run's errors name its arguments
        outcomes = run_reproductions(
            folders,
            quick=args.quick,
            progress=not args.quiet,
            resume=args.resume,
            keep_going=args.all,
            scheduler=args.scheduler,
            workers=args.workers,
            device=args.device,
        )
    if args.all:
        print_summary(outcomes, args.quick)
    return 1 if args.check and any(outcome.failed for outcome in outcomes) else 0
