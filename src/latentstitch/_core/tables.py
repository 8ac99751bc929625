"""Tables of results as plain JSON (the shape the HTML report reads) and as rich tables on the terminal.

A table is ``{"title": str, "columns": [str], "rows": [[cell, ...]], "note": str}``; a cell is a string, a number,
None (not applicable: printed "n/a") or ``[mean, std]`` (printed "mean ± std"). A results file is
``{"kind": ..., "title": str, "tables": [table, ...], "notes": [str], ...}``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from latentstitch._core.atomic import write_text


def table(title: str, columns: list[str], rows: list[list[Any]], note: str = "") -> dict[str, Any]:
    return {"title": title, "columns": list(columns), "rows": [list(r) for r in rows], "note": note}


def format_cell(cell: Any, digits: int = 3, *, compact: bool = False) -> str:
    if cell is None:
        return "n/a"
    if isinstance(cell, (list, tuple)) and len(cell) == 2 and all(isinstance(v, (int, float)) for v in cell):
        joint = "±" if compact else " ± "
        return f"{format_cell(cell[0], digits)}{joint}{format_cell(cell[1], digits)}"
    if isinstance(cell, bool):
        return "yes" if cell else ""
    if isinstance(cell, float):
        return f"{cell:.{digits}f}" if math.isfinite(cell) else str(cell)
    return str(cell)


def print_tables(
    tables: list[dict[str, Any]], notes: list[str] = (), *, digits: int = 3, compact: bool = False
) -> None:
    """Print tables (and notes) with rich, wide enough not to wrap numbers (``compact``: "mean±std" cells)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(120, Console().width))
    for entry in tables:
        rendered = Table(title=entry["title"], caption=entry.get("note") or None, caption_justify="left")
        cells = [[format_cell(cell, digits, compact=compact) for cell in row] for row in entry["rows"]]
        for i, column in enumerate(entry["columns"]):
            numbers = [row[i] for row in cells if i < len(row)] if i > 0 else []
            width = max(map(len, numbers), default=0)  # short cells (numbers) are never cut: headers wrap instead
            width = width if 0 < width <= 20 else None
            justify = "right" if i > 0 and width is not None else "left"  # numbers right, text left
            rendered.add_column(column, justify=justify, no_wrap=i == 0, min_width=width)
        for row in cells:
            rendered.add_row(*row)
        console.print(rendered)
    for note in notes:
        console.print(f"- {note}", highlight=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no inf/NaN
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return _jsonable(value.tolist())
    return value


def write_json(payload: dict[str, Any], path: Path | str) -> Path:
    target = Path(path)
    write_text(target, json.dumps(_jsonable(payload), indent=2) + "\n")
    return target
