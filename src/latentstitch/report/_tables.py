"""Tables as HTML tables: numbers right-aligned in tabular figures, text left, and each paper's column moved beside
the column of ours it reports (``absolute`` | ``paper absolute``), shaded so the two read as a pair."""

from __future__ import annotations

import math
import re
from typing import Any

from latentstitch._core.tables import format_cell
from latentstitch.report._html import escape

# A text cell that is a number as a table shows it: 0.93, -1.2e-3, +0.0025, 1,200, 12%, 17.5x, 0.93 ± 0.01, 4/6, n/a.
_MINUS, _TIMES, _DASHES = "\u2212", "\u00d7", "\u2013\u2014"
_NUMBER = rf"[+\-{_MINUS}]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:e[+\-]?\d+)?\s*(?:%|x|{_TIMES})?"
_NUMERIC_TEXT = re.compile(rf"^(?:{_NUMBER}(?:\s*(?:±|\+-|/)\s*{_NUMBER})?|n/a|nan|[-{_DASHES}])$", re.IGNORECASE)
_PAPER = re.compile(r"\bpaper\b:?", re.IGNORECASE)
_OURS = re.compile(r"\(ours\)|\bours\b:?", re.IGNORECASE)


def cell_text(value: Any, digits: int = 3) -> tuple[str, bool]:
    """The text of a cell and whether it is a number (right-aligned): numbers with ``digits`` decimals,
    ``[mean, std]`` as "mean ± std", None and NaN as "n/a"."""
    if isinstance(value, bool):
        return str(value), False
    if isinstance(value, float) and math.isnan(value):
        return "n/a", True
    if isinstance(value, (int, float)) or (
        isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value)
    ):
        return format_cell(value, digits), True
    if value is None:
        return "n/a", True
    text = str(value)
    return text, bool(_NUMERIC_TEXT.match(text.strip()))


def _name(column: str) -> str:
    """A column's name without "ours" / "paper" and brackets, for matching a paper's column to ours."""
    bare = _OURS.sub(" ", _PAPER.sub(" ", column)).lower()
    return re.sub(r"[\s()\[\]:]+", " ", bare).strip()


def paper_order(columns: list[str]) -> tuple[list[int], set[int]]:
    """The column order that puts each paper column right after the one column of ours it names, and the paper
    columns (by original index). A paper column with no or several matches stays where it is."""
    papers = {i for i, c in enumerate(columns) if _PAPER.search(c)}
    order = [i for i in range(len(columns)) if i not in papers]
    for j in sorted(papers):
        base = _name(columns[j])
        matches = [
            i
            for i in order
            if i not in papers and base and (_name(columns[i]) == base or _name(columns[i]).startswith(base))
        ]
        exact = [i for i in matches if _name(columns[i]) == base]
        matches = exact or matches
        if len(matches) == 1:
            at = order.index(matches[0]) + 1
            while at < len(order) and order[at] in papers:  # after the paper columns already placed there
                at += 1
            order.insert(at, j)
        else:
            order.insert(_home(order, j), j)
    return order, papers


def _home(order: list[int], j: int) -> int:
    """Where column ``j`` goes when it stays in place: after the columns that came before it."""
    return sum(1 for i in order if i < j)


def html_table(table: dict[str, Any], css: str = "") -> str:
    """``{"title", "columns", "rows", "note", "digits"}`` as a captioned ``<table>`` in a sideways-scrolling box."""
    columns = [str(c) for c in table.get("columns", [])]
    rows = [row if isinstance(row, list) else [row] for row in table.get("rows", [])]
    width = max([len(columns), *(len(row) for row in rows)], default=0)
    columns += [""] * (width - len(columns))
    order, papers = paper_order(columns)
    digits = int(table.get("digits", 3))
    texts = [[cell_text(row[i] if i < len(row) else "", digits) for i in range(width)] for row in rows]
    numeric_column = [
        any(cells[i][1] for cells in texts) and all(cells[i][1] or not cells[i][0] for cells in texts)
        for i in range(width)
    ]
    head = "".join(f'<th{_class(i in papers, numeric_column[i])} scope="col">{escape(columns[i])}</th>' for i in order)
    body = [
        "<tr>" + "".join(f"<td{_class(i in papers, cells[i][1])}>{escape(cells[i][0])}</td>" for i in order) + "</tr>"
        for cells in texts
    ]
    title = table.get("title") or ""
    caption = f"<caption>{escape(title)}</caption>" if title else ""
    note = f'<p class="note">{escape(table["note"])}</p>' if table.get("note") else ""
    attribute = f' class="{css}"' if css else ""
    return (
        f'<div class="scroll"><table{attribute}>{caption}<thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>{note}"
    )


def _class(paper: bool, numeric: bool) -> str:
    names = [name for name, on in (("num", numeric), ("paper", paper)) if on]
    return f' class="{" ".join(names)}"' if names else ""
