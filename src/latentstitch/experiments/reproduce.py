"""Running paper reproductions one after the other: what ``latentstitch reproduce`` does once its options are checked
(the command line itself is ``latentstitch.cli.reproduce``; the names are in ``registry``).

Each run writes OUT/results.json, results.md and its plots (``Report.write``) and prints its tables; with several
runs, one failed run does not stop the others (``keep_going``) and ``print_summary`` shows them all.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from latentstitch.experiments import registry
from latentstitch.experiments._report import Report
from latentstitch.experiments._run import Reproduction


@dataclass(frozen=True)
class Outcome:
    """One reproduction's run: its report (None when it failed), the seconds it took, and the error if it failed."""

    name: str
    report: Report | None
    seconds: float
    error: str = ""

    @property
    def failed(self) -> bool:
        """The run raised, or a headline pattern did not hold."""
        return self.report is None or bool(self.report.headline_failures)


def holds_full_run(folder: Path) -> bool:
    """Whether ``folder`` holds the results of a full (not --quick) run, which a quick run must not replace."""
    saved = Path(folder) / "results.json"
    if not saved.is_file():
        return False
    try:
        previous = json.loads(saved.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(previous, dict) and not previous.get("quick", False)


def run_reproductions(
    folders: Mapping[str, Path],
    *,
    quick: bool,
    progress: bool = True,
    resume: bool = False,
    keep_going: bool = False,
    scheduler: str | None = None,
    workers: int | None = None,
    device: str = "cpu",
) -> list[Outcome]:
    """Run each reproduction ``name`` of ``folders`` into its folder, in order; write and print each report.

    ``resume``: the RESUMABLE runs go on from their checkpoint. ``keep_going``: a run that raises is recorded as a
    failed ``Outcome`` and the next one runs (else the error propagates). ``scheduler`` / ``workers``: run the
    independent trainings on a Dask cluster (``experiments._grid.grid_cluster``)."""
    from latentstitch.experiments._grid import grid_cluster

    modules: dict[str, Reproduction] = {
        name: registry.load(name) for name in folders
    }  # every name checked before any work
    outcomes = []
    with grid_cluster(scheduler, workers):
        for name, module in modules.items():
            started = time.perf_counter()
            try:
                options = {"resume": resume} if name in registry.RESUMABLE else {}
                if name in registry.ON_DEVICE:
                    options["device"] = device
                report = module.run(quick=quick, out_dir=folders[name], progress=progress, **options)
            except KeyboardInterrupt:
                hint = resume_hint(name, folders[name], quick)
                if hint:
                    print(hint, file=sys.stderr)
                raise
            except Exception as error:  # with several runs, one failed run must not hide the others
                if not keep_going:
                    raise
                outcomes.append(Outcome(name, None, time.perf_counter() - started, f"{type(error).__name__}: {error}"))
                continue
            report.settings_digest = registry.settings_digest(name, quick)
            report.write(folders[name])
            report.print(folders[name])
            outcomes.append(Outcome(name, report, time.perf_counter() - started))
    return outcomes


def resume_hint(name: str, folder: Path, quick: bool) -> str | None:
    """The line telling how to go on with an interrupted RESUMABLE run (None when it kept no checkpoint)."""
    from latentstitch.experiments._checkpoint import FOLDER

    if name not in registry.RESUMABLE or not (folder / FOLDER).is_dir():
        return None
    command = f"latentstitch reproduce {name}{' --quick' if quick else ''} --out {folder} --resume"
    return f"{name}: its finished stages are kept in {folder / FOLDER}; `{command}` goes on"


def print_list() -> None:
    """The table of reproductions with their HELP lines (read without importing them)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="reproductions: latentstitch reproduce NAME [--quick]")
    table.add_column("name")
    table.add_column("what")
    for name in sorted(registry.REPRODUCTIONS):
        table.add_row(name, registry.help_line(name))
    Console().print(table)


def print_summary(outcomes: list[Outcome], quick: bool) -> None:
    """One row per run: time, headline patterns held, all patterns held, status."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{'quick' if quick else 'full'} runs: headline patterns (★) and all patterns judged")
    for column in ("reproduction", "time (s)", "★ held", "all held", "status"):
        table.add_column(column, justify="left" if column in ("reproduction", "status") else "right")
    for outcome in outcomes:
        report, seconds = outcome.report, f"{outcome.seconds:.0f}"
        if report is None:
            table.add_row(outcome.name, seconds, "-", "-", f"FAILED: {outcome.error}")
            continue
        headline = [v for v in report.patterns if v.headline]
        table.add_row(
            outcome.name,
            seconds,
            f"{sum(v.holds for v in headline)}/{len(headline)}" if headline else "-",
            f"{sum(v.holds for v in report.patterns)}/{len(report.patterns)}" if report.patterns else "-",
            "smoke test (no verdicts)"
            if report.smoke
            else ("ok" if not report.headline_failures else "HEADLINE PATTERN NOT HELD"),
        )
    Console(width=120).print(table)
