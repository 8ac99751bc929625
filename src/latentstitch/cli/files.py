"""Options and reading shared by the commands that take embedding files (``bridge``, ``compare``). Standard library
at module level: the library is imported when the files are read."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from latentstitch.cli.options import input_file, option_errors, positive_int

if TYPE_CHECKING:
    import numpy as np


def add_pair_arguments(parser: argparse.ArgumentParser, first: str, second: str, first_help: str, second_help: str):
    parser.add_argument(first, metavar=first.upper(), help=first_help)
    parser.add_argument(second, metavar=second.upper(), help=second_help)
    add_file_options(parser, sides=(first.lower(), second.lower()))


def add_file_options(parser: argparse.ArgumentParser, sides: tuple[str, ...] = ()) -> None:
    files = parser.add_argument_group("reading the files")
    files.add_argument(
        "--key",
        default=None,
        help="the array holding the vectors in .npz / .safetensors / .pt files, or the split of a save_to_disk "
        "folder (default: the only one, or one named embeddings / embedding / vectors / features / x)",
    )
    for side in sides:
        files.add_argument(f"--{side}-key", default=None, metavar="KEY", help=f"as --key, for {side.upper()} only")
    files.add_argument(
        "--id-column",
        default=None,
        metavar="NAME",
        help="pair rows by the ids in this column (tables) or array (.npz / .safetensors / .pt) instead of by order",
    )
    files.add_argument(
        "--vector-column",
        default=None,
        metavar="NAME",
        help="the column of lists of numbers in parquet / CSV / save_to_disk tables (default: the only list column, "
        "else the numbered columns 0, 1, ... or dim_0, dim_1, ...)",
    )


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=positive_int, default=1, help="torch and BLAS threads (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def pin_threads(args: argparse.Namespace) -> None:
    from latentstitch._core.device import set_threads

    set_threads(args.threads)


def key_for(args: argparse.Namespace, side: str) -> str | None:
    specific = getattr(args, f"{side}_key", None)
    return specific if specific is not None else args.key


def file_options(args: argparse.Namespace, side: str | None = None) -> dict[str, str]:
    """The embedding readers' and writers' arguments -> the options that set them (``option_errors``): ``key`` is
    ``--SIDE-key`` where that was given, the ids come from ``--id-column``."""
    specific = side is not None and getattr(args, f"{side}_key", None) is not None
    return {
        "key": f"--{side}-key" if specific else "--key",
        "id_column": "--id-column",
        "vector_column": "--vector-column",
        "by_ids": "--id-column",
        "ids": "--id-column",
    }


def check_inputs(args: argparse.Namespace, sides: tuple[str, ...]) -> None:
    """Every input file exists and is readable (before any library import: a missing file answers at once)."""
    for side in sides:
        input_file(getattr(args, side), side.upper())


def read_pair(args: argparse.Namespace, sides: tuple[str, str]) -> tuple[np.ndarray, np.ndarray, list]:
    """Both files' vectors as parallel rows (by order, or by ``--id-column``) and a line describing each file."""
    from latentstitch.embeddings import Embeddings, open_embeddings, pair_rows

    read = []
    for side in sides:
        path = input_file(getattr(args, side), side.upper())
        with option_errors(file_options(args, side)):
            opened = open_embeddings(
                path,
                key=key_for(args, side),
                id_column=args.id_column,
                vector_column=args.vector_column,
                option=side.upper(),
            )
            read.append((opened, Embeddings(opened.read(progress=not args.quiet), opened.ids, opened.path)))
    first, second = (embeddings for _, embeddings in read)
    with option_errors(file_options(args)):
        a, b, _ = pair_rows(first, second, by_ids=args.id_column is not None, names=tuple(s.upper() for s in sides))
    return a, b, [opened.describe() for opened, _ in read]
