"""What every experiment writes and prints: tables with the paper's numbers beside ours, the expected pattern
checked honestly, how the setting differs from the paper, and every number as JSON.

An experiment builds a ``Report`` and calls ``report.write(out_dir)`` and ``report.print()``; the files are
``results.json`` (every number), ``results.md`` (the tables, differences and checks, with links to the PNGs).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return f"{value[0]:.{digits}f} ± {value[1]:.{digits}f}"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


@dataclass
class ResultTable:
    """A table of results. Cells are strings, floats, ``(mean, std)`` pairs or None (not applicable)."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""
    digits: int = 3

    def markdown(self) -> str:
        lines = [f"**{self.title}**", "", "| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        for row in self.rows:
            lines.append("| " + " | ".join(format_value(v, self.digits) for v in row) + " |")
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


@dataclass
class Expectation:
    """An expected pattern from the paper, and whether our run shows it."""

    description: str
    holds: bool
    detail: str = ""

    def line(self) -> str:
        status = "holds" if self.holds else "DOES NOT HOLD"
        return f"{self.description}: {status}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class Report:
    name: str
    title: str
    paper: str
    setting: dict[str, Any]
    differences: list[str] = field(default_factory=list)
    tables: list[ResultTable] = field(default_factory=list)
    expectations: list[Expectation] = field(default_factory=list)
    figures: dict[str, str] = field(default_factory=dict)
    numbers: dict[str, Any] = field(default_factory=dict)
    seconds: float | None = None

    def markdown(self) -> str:
        parts = [f"# {self.title}", "", f"Paper: {self.paper}", "", "## Setting", ""]
        parts += [f"- {key}: {value}" for key, value in self.setting.items()]
        if self.differences:
            parts += ["", "## How this differs from the paper", ""] + [f"- {d}" for d in self.differences]
        parts += ["", "## Results", ""]
        for table in self.tables:
            parts += [table.markdown(), ""]
        if self.expectations:
            parts += ["## Expected pattern", ""] + [f"- {e.line()}" for e in self.expectations] + [""]
        for caption, path in self.figures.items():
            parts += [f"![{caption}]({Path(path).name})", ""]
        if self.seconds is not None:
            parts.append(f"Run time: {self.seconds:.0f} s.")
        return "\n".join(parts).rstrip() + "\n"

    def write(self, out_dir: Path | str) -> Path:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        payload = asdict(self)
        (out / "results.json").write_text(json.dumps(payload, indent=2, default=_jsonable) + "\n")
        (out / "results.md").write_text(self.markdown())
        return out

    def print(self, out_dir: Path | str | None = None) -> None:
        from rich.console import Console

        console = Console(width=max(120, Console().width))
        console.rule(self.title)
        for table in self.tables:
            console.print(table.rich())
        for expectation in self.expectations:
            console.print(("✓ " if expectation.holds else "✗ ") + expectation.line())
        if self.differences:
            console.print("differs from the paper: " + "; ".join(self.differences))
        if out_dir is not None:
            console.print(f"written: {Path(out_dir) / 'results.json'}, {Path(out_dir) / 'results.md'}")
        for caption, path in self.figures.items():
            console.print(f"figure ({caption}): {path}")


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def pyplot():
    """matplotlib.pyplot with the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure: Any, path: Path, dpi: int = 100) -> str:
    """Save a matplotlib figure as PNG (creating the folder), close it, return the path as a string."""
    plt = pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return str(path)
