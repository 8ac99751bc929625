"""What every experiment writes and prints: tables with the paper's numbers beside ours, the paper's patterns judged
by declared rules, how the setting differs from the paper, and every number as JSON.

A reproduction declares its expected patterns once (``Pattern``: the paper's claim, the paper's number, what our
number is, and the ``Rule`` that decides whether it holds) and judges them on its measurements
(``Pattern.judge(ours) -> Verdict``). The verdicts, and nothing else, feed the printed table, ``results.md``,
``results.json`` and the HTML report (``latentstitch report``), so a pattern is written in one place.

A quick run (``--quick``) judges only the *headline* patterns, the ones its smaller setting is built to show; a
quick run that cannot show anything is a *smoke test* (``Report.smoke``): it prints and writes no verdicts.

An experiment builds a ``Report`` and calls ``report.write(out_dir)`` and ``report.print()``; the files are
``results.json`` (every number, ``"kind": "reproduction"``) and ``results.md`` (the tables, differences and
verdicts, with links to the PNGs).

This module holds ``Report`` (what a run shows, and writing it); the tables are in ``_tables`` (``ResultTable``,
``mean_std``, cell formatting) and the patterns in ``_patterns`` (``Pattern``, ``Rule``, ``Verdict``, ``judge``,
``Expectation``). The reproductions import all of them from here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from latentstitch._core.atomic import write_text
from latentstitch._core.provenance import with_provenance
from latentstitch.experiments._patterns import (
    OPERATORS,
    Expectation,
    Pattern,
    Rule,
    Verdict,
    above,
    at_least,
    at_most,
    below,
    judge,
)
from latentstitch.experiments._tables import ResultTable, format_number, format_value, mean_std

__all__ = [
    "OPERATORS",
    "Expectation",
    "Pattern",
    "Report",
    "ResultTable",
    "Rule",
    "Verdict",
    "above",
    "at_least",
    "at_most",
    "below",
    "format_number",
    "format_value",
    "jsonable",
    "judge",
    "mean_std",
]


@dataclass
class Report:
    """Everything a run shows. ``patterns``: the verdicts of the declared patterns (a quick run: the headline ones);
    ``smoke``: a quick run too small to show anything, which then has no verdicts and says so."""

    name: str
    title: str
    paper: str
    setting: dict[str, Any]
    differences: list[str] = field(default_factory=list)
    tables: list[ResultTable] = field(default_factory=list)
    patterns: list[Verdict] = field(default_factory=list)
    expectations: list[Expectation] = field(default_factory=list)
    figures: dict[str, str] = field(default_factory=dict)
    numbers: dict[str, Any] = field(default_factory=dict)
    seconds: float | None = None
    quick: bool = False
    smoke: bool = False
    kind: str = "reproduction"
    #: ``registry.settings_digest`` of the settings the run used (a report flags results whose settings changed).
    settings_digest: str | None = None

    def __post_init__(self):
        if self.smoke and self.patterns:
            raise ValueError("patterns: a smoke test judges no pattern (its numbers mean nothing)")

    @property
    def headline_failures(self) -> list[Verdict]:
        """Headline verdicts that do not hold (what ``reproduce --check`` fails on)."""
        return [v for v in self.patterns if v.headline and not v.holds]

    def status(self) -> str:
        """One line: which run this was and how many verdicts hold."""
        run = "quick run" if self.quick else "full run"
        if self.smoke:
            return f"{run}, smoke test only: its numbers mean nothing and no pattern is judged"
        if not self.patterns:
            return run
        held = sum(v.holds for v in self.patterns)
        scope = "headline patterns" if self.quick else "patterns"
        return f"{run}: {held} of {len(self.patterns)} {scope} hold"

    def patterns_table(self) -> ResultTable:
        rows = [
            [
                ("★ " if v.headline else "") + v.claim,
                v.paper,
                f"{v.measure}: {format_number(v.ours)}",
                v.rule,
                "holds" if v.holds else "DOES NOT HOLD",
            ]
            for v in self.patterns
        ]
        note = "★ headline pattern: also judged by the quick run (CI fails when it does not hold there)."
        if self.quick:
            note += " A quick run judges the headline patterns only; the full run judges every pattern."
        return ResultTable(
            "Expected patterns: the paper's, ours, and the rule that decides", _PATTERN_COLUMNS, rows, note
        )

    def markdown(self) -> str:
        parts = [f"# {self.title}", "", f"Paper: {self.paper}", "", f"Run: {self.status()}."]
        if self.smoke:
            parts += [
                "",
                "**Smoke test**: this quick run only checks that the code runs end to end; run without "
                "`--quick` for numbers that mean something.",
            ]
        parts += ["", "## Setting", ""]
        parts += [f"- {key}: {value}" for key, value in self.setting.items()]
        if self.differences:
            parts += ["", "## How this differs from the paper", ""] + [f"- {d}" for d in self.differences]
        if self.patterns:
            table = self.patterns_table()
            parts += ["", "## Expected patterns", "", *table.markdown().splitlines()[2:]]
            details = [f"- {v.claim}: {v.detail}" for v in self.patterns if v.detail]
            if details:
                parts += ["", "Details:", "", *details]
        if self.expectations:
            parts += ["", "## Expected pattern", ""] + [f"- {e.line()}" for e in self.expectations]
        parts += ["", "## Results", ""]
        for table in self.tables:
            parts += [table.markdown(), ""]
        for caption, path in self.figures.items():
            parts += [f"![{caption}]({Path(path).name})", ""]
        if self.seconds is not None:
            parts.append(f"Run time: {self.seconds:.0f} s.")
        return "\n".join(parts).rstrip() + "\n"

    def command(self, out_dir: Path | str) -> str:
        """The command line that makes this run into ``out_dir`` (a reproduction's; the demo passes its own)."""
        return f"latentstitch reproduce {self.name}{' --quick' if self.quick else ''} --out {Path(out_dir)}"

    def write(self, out_dir: Path | str, command: str | None = None) -> Path:
        """results.json and results.md into ``out_dir``; results.md names under its title the command that made it
        (``command``, else ``self.command(out_dir)``) and the commit it ran at."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        payload = {"kind": self.kind, **asdict(self)}
        payload["figures"] = {caption: Path(path).name for caption, path in self.figures.items()}
        write_text(out / "results.json", json.dumps(payload, indent=2, default=jsonable, allow_nan=True) + "\n")
        write_text(out / "results.md", with_provenance(self.markdown(), command or self.command(out)))
        return out

    def print(self, out_dir: Path | str | None = None) -> None:
        from rich.console import Console  # deferred: reproduce.py (the CLI) imports this module

        console = Console(width=max(120, Console().width))
        console.rule(self.title)
        for table in self.tables:
            console.print(table.rich())
        if self.patterns:
            console.print(self.patterns_table().rich())
        for expectation in self.expectations:
            console.print(("✓ " if expectation.holds else "✗ ") + expectation.line())
        if self.differences:
            console.print("differs from the paper: " + "; ".join(self.differences))
        console.print(self.status())
        if out_dir is not None:
            console.print(f"written: {Path(out_dir) / 'results.json'}, {Path(out_dir) / 'results.md'}")
        for caption, path in self.figures.items():
            console.print(f"figure ({caption}): {path}")


_PATTERN_COLUMNS = ["pattern (★ headline)", "paper", "ours", "rule", "verdict"]


def jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
