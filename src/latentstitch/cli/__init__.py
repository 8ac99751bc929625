"""The ``latentstitch`` command line.

Each subcommand is a module of this package (``cli/demo.py`` is ``latentstitch demo``) that defines ``HELP`` (one
line), ``add_arguments(parser)`` and ``main(args) -> int``; its docstring is the command's ``--help`` text. Adding a
command is one entry in ``COMMANDS``.

The command line answers at once: a command module imports only the standard library and ``cli.options`` at module
level and imports the library (torch, the math) inside ``main``, after its options and files are checked. So
``latentstitch --help``, every ``COMMAND --help`` and every user error caught by those checks never load torch,
scikit-learn, scipy or matplotlib (``tests/test_cli.py`` checks it; ``python -m benchmarks cli_startup`` times it).

A user error (a bad option value, a missing or malformed file, an argument the library rejects) is printed as one
line naming the option or file, with exit code 2 and no traceback; ``latentstitch --debug COMMAND ...`` shows the
traceback instead. A warning of the library during a command is one line, ``latentstitch COMMAND: warning: ...``,
through ``logging`` (the logger ``latentstitch.cli``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from latentstitch.cli.options import UsageError

COMMANDS: dict[str, str] = {
    "demo": "latentstitch.cli.demo",
    "reproduce": "latentstitch.cli.reproduce",
    "bridge": "latentstitch.cli.bridge",
    "compare": "latentstitch.cli.compare",
    "layers": "latentstitch.cli.layers",
    "report": "latentstitch.cli.report",
}

# Errors that mean "this input cannot be used": the library raises ValueError/TypeError naming the argument at
# fault; OSError covers files that cannot be read or written.
USER_ERRORS = (UsageError, ValueError, TypeError, OSError)

#: The logger the library's warnings go to during a command (one line each on stderr).
LOGGER = logging.getLogger("latentstitch.cli")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``latentstitch COMMAND: error: ...`` and exit code 2 (argparse's own code),
    pointing at ``--help`` instead of printing the whole usage."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from latentstitch._version import __version__

    parser = _Parser(
        prog="latentstitch",
        description="Latent space communication: relative representations, model stitching, similarity indices.",
    )
    parser.add_argument("--version", action="version", version=f"latentstitch {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(
            name, help=module.HELP, description=module.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        module.add_arguments(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        with warnings_as_log_lines(args.command):
            return int(args._module.main(args) or 0)
    except (*USER_ERRORS, ModuleNotFoundError) as error:
        # a missing optional extra is a user error too: its message names the pip command (_core.extras.require)
        missing_extra = isinstance(error, ModuleNotFoundError) and "pip install" in str(error)
        if args.debug or (isinstance(error, ModuleNotFoundError) and not missing_extra):
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"latentstitch {args.command}: error: {message} (--debug shows the traceback)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"latentstitch {args.command}: interrupted", file=sys.stderr)
        return 130


class _LineFormatter(logging.Formatter):
    """``latentstitch COMMAND: warning: the message on one line``."""

    def __init__(self, command: str):
        super().__init__()
        self.command = command

    def format(self, record: logging.LogRecord) -> str:
        message = " ".join(record.getMessage().split())
        return f"latentstitch {self.command}: {record.levelname.lower()}: {message}"


@contextmanager
def warnings_as_log_lines(command: str) -> Iterator[logging.Logger]:
    """While a command runs, each warning the library emits (after the usual filters: once per place) is logged to
    ``LOGGER`` as one line, ``latentstitch COMMAND: warning: <message>``, on stderr: no source line, no category,
    no ``sys.exit(main())`` attribution. Restored afterwards (``main`` may run several times in one process)."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        LOGGER.warning("%s", message)

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LineFormatter(command))
    previous_show, previous_propagate = warnings.showwarning, LOGGER.propagate
    LOGGER.addHandler(handler)
    LOGGER.propagate = False
    warnings.showwarning = show
    try:
        yield LOGGER
    finally:
        warnings.showwarning = previous_show
        LOGGER.removeHandler(handler)
        LOGGER.propagate = previous_propagate
