"""What every command of the ``latentstitch`` command line shares: option types that check their values, output
folders checked before any work starts, and the one kind of error that means "the user asked for something that
cannot be done" (printed as one line, exit code 2, no traceback; ``latentstitch --debug ...`` shows it).

A command module raises ``UsageError`` (or lets a library ``ValueError``/``TypeError``, which name the argument at
fault, pass through); ``latentstitch.cli.main`` turns both into one line on stderr and exit code 2.

Standard library only: the checks here run before a command imports the library, so a user error answers at once.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


class UsageError(ValueError):
    """A user error on the command line: the message names the option or file and what was expected."""


def _number(kind: Callable[[str], float | int], minimum: float, inclusive: bool, what: str) -> Callable[[str], float]:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        if value < minimum or (not inclusive and value == minimum):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


positive_int = _number(int, 1, True, "an integer >= 1")
nonnegative_int = _number(int, 0, True, "an integer >= 0")
positive_float = _number(float, 0.0, False, "a number > 0")
nonnegative_float = _number(float, 0.0, True, "a finite number >= 0")


#: The largest seed numpy, torch and scikit-learn all accept: ``latentstitch._core.params.MAX_SEED`` (not imported
#: from there, which loads torch; tests/test_cli.py checks that they agree).
MAX_SEED = 2**32 - 1


def seed(text: str) -> int:
    """A random seed: an integer in [0, 2**32 - 1], what numpy, torch and scikit-learn all accept."""
    value = nonnegative_int(text)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected a seed in [0, {MAX_SEED}], got {text!r}")
    return value


def probability(text: str) -> float:
    """A number in the open interval (0, 1), e.g. a confidence level."""
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1 (exclusive), got {text!r}")
    return value


@contextmanager
def option_errors(options: Mapping[str, str]) -> Iterator[None]:
    """Inside the block, a ValueError/TypeError of the library that names function arguments is raised again as a
    ``UsageError`` naming the command-line options they came from (``translate``), so the user reads the options
    they typed. Blocks nest: an inner table (one call's ``id_column``) is applied before an outer one. An
    ``OSError`` the library raised naming an argument (``"output: ... exists"``, ``OSError(ENOSPC, "output: the
    disk is full ...")``) is translated the same way; the system's own (no argument named) passes unchanged."""
    try:
        yield
    except (ValueError, TypeError, OSError) as error:
        numbered = isinstance(error, OSError) and error.errno is not None and bool(error.strerror)
        message = error.strerror if numbered else str(error)  # without the "[Errno 28] " of a numbered one
        translated = translate(message, options)
        if translated != message:
            raise UsageError(translated) from error
        raise


#: The library's way of naming its arguments in a message: ``"name: ..."`` or ``"x, y: ..."`` at the start (the
#: arguments at fault), and ``name=`` anywhere (an argument to give or leave out: ``"say which with key="``).
_LEADING = re.compile(r"^((?:[A-Za-z_][\w\[\]'\".-]*)(?:, [A-Za-z_][\w\[\]'\".-]*)*):")
_KEYWORD = re.compile(r"(?<![\w./\\=-])([A-Za-z_]\w*)=(?=$|[\s,;.)])")


def translate(message: str, options: Mapping[str, str]) -> str:
    """``message`` of the library with each argument of ``options`` (argument -> option, ``{"id_column":
    "--id-column"}``) replaced by its option: the names at the start (``"id_column: ..."`` -> ``"--id-column:
    ..."``; ``"a, b: ..."`` name by name) and each ``name=`` (``"with key="`` -> ``"with --key"``). Other words are
    left alone, so a file name or an English word equal to an argument is never rewritten."""
    leading = _LEADING.match(message)
    if leading is not None:
        names = ", ".join(_option(name, options) for name in leading.group(1).split(", "))
        message = names + message[leading.end(1) :]
    return _KEYWORD.sub(lambda match: options.get(match.group(1), match.group(0)), message)


def _option(name: str, options: Mapping[str, str]) -> str:
    """The option of the argument ``name``; an item of a list argument (``"thresholds[0]"``) keeps its index."""
    base, bracket, index = name.partition("[")
    return options.get(name) or (options[base] + bracket + index if base in options else name)


def output_folder(path: Path | str, option: str) -> Path:
    """Create ``path`` (and its parents) and check it can be written, before any work starts.

    Raises ``UsageError`` naming ``option`` when the path is a file, or cannot be created or written.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option}: {str(folder)!r} exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{option}: cannot create the folder {str(folder)!r} ({error.strerror or error})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option}: the folder {str(folder)!r} is not writable")
    return folder


def output_file(path: Path | str, option: str) -> Path:
    """Check that the file ``path`` can be written (its folder is created), before any work starts."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{option}: {str(target)!r} is a folder; give a file name")
    output_folder(target.parent if str(target.parent) else Path("."), option)
    return target


def refuse_overwrite(outputs: Mapping[str, Path | str | None], inputs: Mapping[str, Path | str | None]) -> None:
    """Refuse, naming the option, an output that is one of the command's inputs (the same path, a symlink or a hard
    link: ``latentstitch._core.atomic.refuse_inputs``), another output, or a file inside an input folder (a
    save_to_disk folder is read, never written into). Keys are the options as typed (``-o``, ``--json``,
    ``SOURCE``)."""
    from latentstitch._core.atomic import refuse_inputs, refuse_inside_inputs  # standard library only

    try:
        refuse_inputs(outputs, inputs)
        refuse_inside_inputs(outputs, inputs)
    except ValueError as error:
        raise UsageError(str(error)) from None


def input_file(path: Path | str, option: str) -> Path:
    """Check that ``path`` is an existing, readable file (or folder, for formats stored as folders)."""
    source = Path(path)
    if not source.exists():
        raise UsageError(f"{option}: no such file: {str(source)!r}")
    if not os.access(source, os.R_OK):
        raise UsageError(f"{option}: {str(source)!r} is not readable")
    return source
