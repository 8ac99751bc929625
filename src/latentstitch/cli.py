"""The ``latentstitch`` command line.

Each subcommand lives in its own module, which defines ``HELP`` (one line), ``add_arguments(parser)`` and
``main(args) -> int``. Adding a command is one entry in ``COMMANDS``.

A user error (a bad option value, a missing or malformed file, an argument the library rejects) is printed as one
line naming the option or file, with exit code 2 and no traceback; ``latentstitch --debug COMMAND ...`` shows the
traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from latentstitch._cli import UsageError

COMMANDS: dict[str, str] = {
    "demo": "latentstitch.experiments.demo",
    "reproduce": "latentstitch.experiments.reproduce",
    "bridge": "latentstitch.commands.bridge",
    "compare": "latentstitch.commands.compare",
    "report": "latentstitch.report.command",
}

# Errors that mean "this input cannot be used": the library raises ValueError/TypeError naming the argument at
# fault; OSError covers files that cannot be read or written.
USER_ERRORS = (UsageError, ValueError, TypeError, OSError)


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
        return int(args._module.main(args) or 0)
    except USER_ERRORS as error:
        if args.debug:
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"latentstitch {args.command}: error: {message} (--debug shows the traceback)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"latentstitch {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
