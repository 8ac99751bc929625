"""The tables every reproduction shows (``ResultTable``: ours beside the paper's) and how their cells read:
``mean_std`` over runs, ``format_value`` for cells, ``format_number`` for a verdict's measured value."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table


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

    def rich(self) -> Table:
        from rich.table import Table  # deferred with Console: reproduce.py (the CLI) imports this module

        table = Table(title=self.title, caption=self.note or None)
        for i, column in enumerate(self.columns):
            table.add_column(column, justify="left" if i == 0 else "right")
        for row in self.rows:
            table.add_row(*(format_value(v, self.digits) for v in row))
        return table
