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
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Comparison operators a ``Rule`` may use.
OPERATORS = (">=", "<=", ">", "<")


def mean_std(values: list[float] | tuple[float, ...]) -> tuple[float, float]:
    """Mean and (population) standard deviation of a list of runs."""
    n = len(values)
    if n == 0:
        raise ValueError("values: need at least one run")
    mean = sum(values) / n
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / n)


def format_value(value: Any, digits: int = 3) -> str:
    """Floats with ``digits`` decimals, (mean, std) pairs as ``mean ± std``, None as "n/a"."""
    if value is None:
        return "n/a"
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return f"{value[0]:.{digits}f} ± {value[1]:.{digits}f}"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def format_number(value: float | None) -> str:
    """A measured value as a verdict shows it: three significant digits, "n/a" when missing or not a number."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, bool):
        return str(value)
    return f"{value:.3g}"


@dataclass
class ResultTable:
    """A table of results. Cells are strings, floats, ``(mean, std)`` pairs or None (not applicable)."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""
    digits: int = 3

    def markdown(self) -> str:
        def cell(text: str) -> str:  # a "|" inside a cell would split it
            return text.replace("|", "\\|")

        lines = [
            f"**{self.title}**",
            "",
            "| " + " | ".join(map(cell, self.columns)) + " |",
            "|" + "---|" * len(self.columns),
        ]
        for row in self.rows:
            lines.append("| " + " | ".join(cell(format_value(v, self.digits)) for v in row) + " |")
        if self.note:
            lines += ["", self.note]
        return "\n".join(lines)

    def rich(self):
        from rich.table import Table

        table = Table(title=self.title, caption=self.note or None)
        for i, column in enumerate(self.columns):
            table.add_column(column, justify="left" if i == 0 else "right")
        for row in self.rows:
            table.add_row(*(format_value(v, self.digits) for v in row))
        return table


@dataclass(frozen=True)
class Rule:
    """``ours OP threshold`` decides whether a pattern holds (``unit`` is only for display: "x", " points")."""

    op: str
    threshold: float
    unit: str = ""

    def __post_init__(self):
        if self.op not in OPERATORS:
            raise ValueError(f"op: expected one of {', '.join(OPERATORS)}, got {self.op!r}")
        if not math.isfinite(self.threshold):
            raise ValueError(f"threshold: expected a finite number, got {self.threshold!r}")

    def holds(self, value: float | None) -> bool | None:
        """Whether ``value`` satisfies the rule; None when there is no value to judge (None or NaN)."""
        if value is None or math.isnan(float(value)):
            return None
        value = float(value)
        return {
            ">=": value >= self.threshold,
            "<=": value <= self.threshold,
            ">": value > self.threshold,
            "<": value < self.threshold,
        }[self.op]

    def text(self) -> str:
        return f"{self.op} {self.threshold:g}{self.unit}"


def at_least(threshold: float, unit: str = "") -> Rule:
    return Rule(">=", threshold, unit)


def at_most(threshold: float, unit: str = "") -> Rule:
    return Rule("<=", threshold, unit)


def above(threshold: float, unit: str = "") -> Rule:
    return Rule(">", threshold, unit)


def below(threshold: float, unit: str = "") -> Rule:
    return Rule("<", threshold, unit)


@dataclass(frozen=True)
class Pattern:
    """An expected pattern from the paper, declared once per reproduction.

    ``claim``: the pattern in words; ``paper``: the paper's number(s) for it (or what the paper says); ``measure``:
    what our number is; ``rule``: how our number decides it. ``headline`` patterns are also judged by the quick run
    (whose smaller setting is built to show them; CI fails when one does not hold there).
    """

    key: str
    claim: str
    paper: str
    measure: str
    rule: Rule
    headline: bool = False

    def judge(self, ours: float | None, detail: str = "") -> Verdict:
        """The verdict on our measured value (None or NaN: not computable, which does not hold)."""
        value = None if ours is None or (isinstance(ours, float) and math.isnan(ours)) else float(ours)
        holds = self.rule.holds(value)
        return Verdict(
            key=self.key,
            claim=self.claim,
            paper=self.paper,
            measure=self.measure,
            rule=self.rule.text(),
            ours=value,
            holds=bool(holds),
            detail=detail if holds is not None else (detail or "not computable in this run"),
            headline=self.headline,
        )


@dataclass
class Verdict:
    """A pattern judged on one run: our value beside the paper's, and whether the rule holds."""

    key: str
    claim: str
    paper: str
    measure: str
    rule: str
    ours: float | None
    holds: bool
    detail: str = ""
    headline: bool = False

    def line(self) -> str:
        status = "holds" if self.holds else "DOES NOT HOLD"
        text = (
            f"{self.claim}: {status} ({self.measure} {format_number(self.ours)}, rule {self.rule}; paper {self.paper})"
        )
        return text + (f"; {self.detail}" if self.detail else "")


def judge(patterns: list[Pattern] | tuple[Pattern, ...], measured: dict[str, Any], *, quick: bool) -> list[Verdict]:
    """Verdicts of ``patterns`` on ``measured`` (key -> value or (value, detail)); a quick run judges the headline
    patterns only. Every judged pattern must have a measurement (a missing key is a programming error)."""
    keys = [p.key for p in patterns]
    if len(set(keys)) != len(keys):
        raise ValueError(f"patterns: keys must be unique, got {keys}")
    verdicts = []
    for pattern in patterns:
        if quick and not pattern.headline:
            continue
        if pattern.key not in measured:
            raise KeyError(f"measured: no value for pattern {pattern.key!r}")
        entry = measured[pattern.key]
        ours, detail = entry if isinstance(entry, tuple) else (entry, "")
        verdicts.append(pattern.judge(ours, detail))
    return verdicts


@dataclass
class Expectation:
    """A check of the demo (not a reproduction: reproductions declare ``Pattern`` s and judge ``Verdict`` s)."""

    description: str
    holds: bool
    detail: str = ""

    def line(self) -> str:
        status = "holds" if self.holds else "DOES NOT HOLD"
        return f"{self.description}: {status}" + (f" ({self.detail})" if self.detail else "")


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

    def write(self, out_dir: Path | str) -> Path:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        payload = {"kind": self.kind, **asdict(self)}
        payload["figures"] = {caption: Path(path).name for caption, path in self.figures.items()}
        (out / "results.json").write_text(json.dumps(payload, indent=2, default=_jsonable, allow_nan=True) + "\n")
        (out / "results.md").write_text(self.markdown())
        return out

    def print(self, out_dir: Path | str | None = None) -> None:
        from rich.console import Console

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


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
