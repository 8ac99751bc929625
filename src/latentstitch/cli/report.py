"""Render result files into one self-contained HTML page.

    latentstitch report [RESULTS_DIR] [-o report.html]

Reads every result JSON under RESULTS_DIR: the results.json of each reproduction (latentstitch reproduce) and the
JSON outputs of `latentstitch bridge fit`, `compare` and `layers`. The page shows, per reproduction, the paper's
patterns beside ours with held / not held marks, the setting and how it differs from the paper, the tables and the
figures, with a table of contents in a sidebar. Figures are embedded, so the file can be mailed or opened offline.

RESULTS_DIR defaults to ./latentstitch-results (where reproduce writes) when it exists, else ./results (the
repository's committed full runs).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from latentstitch.cli.options import UsageError, output_file, refuse_overwrite

HELP = "one self-contained HTML page over reproductions' results and bridge/compare/layers outputs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results_dir",
        nargs="?",
        type=Path,
        default=None,
        metavar="RESULTS_DIR",
        help="folder searched for result JSON files (default ./latentstitch-results if it exists, else ./results)",
    )
    parser.add_argument("-o", "--output", type=Path, default=Path("report.html"), help="HTML file (report.html)")
    parser.add_argument("--title", default="latentstitch results", help="page title")


def main(args: argparse.Namespace) -> int:
    source = args.results_dir
    if source is None:
        source = Path("latentstitch-results") if Path("latentstitch-results").is_dir() else Path("results")
    if not source.exists():
        raise UsageError(f"RESULTS_DIR: no such folder: {str(source)!r}")
    if args.output.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"--output: the report is an HTML page; give a file name ending in .html, got {args.output}")
    target = output_file(args.output, "--output")

    from latentstitch._core.atomic import write_text
    from latentstitch.report import collect, find_results, render_collection, render_html

    if source.is_dir():  # every result read once: collect finds what the page shows and what it cannot
        found = collect(source)
        count = len(found.results)
        refuse_overwrite({"--output": target}, found.files())
        page = render_collection(found, title=args.title, source=str(source))
    else:
        refuse_overwrite({"--output": target}, {"RESULTS_DIR": source})
        paths = find_results(source)
        count = len(paths)
        page = render_html(paths, title=args.title, source=str(source)) if paths else ""
    if not count:
        unreadable = found.unreadable if source.is_dir() else []
        why = f"; {unreadable[0].path}: {unreadable[0].reason}" if unreadable else ""
        raise UsageError(
            f"RESULTS_DIR: no result JSON file under {str(source)!r} (expected results.json files of "
            f"`latentstitch reproduce`, or bridge/compare JSON outputs){why}"
        )
    write_text(target, page, option="--output")
    print(f"written: {target} ({count} result file(s) from {source}, {target.stat().st_size / 1e6:.1f} MB)")
    return 0
