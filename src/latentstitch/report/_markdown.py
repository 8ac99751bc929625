"""The markdown of a measurement folder (``results.md``, ``table.md``) as HTML: headings, paragraphs, lists, code,
pipe tables as ``<table>`` elements, and images next to the file embedded. Only the markdown the repository's
measurement scripts write; everything is escaped first, so no HTML in a file reaches the page."""

from __future__ import annotations

import re
from pathlib import Path

from latentstitch.report._html import escape, figure, image_uri
from latentstitch.report._tables import html_table

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)\s]+)\)\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)$")
_SEPARATOR = re.compile(r"^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


def title_and_body(text: str) -> tuple[str | None, str]:
    """The first level-1 heading (the title) and the text without it."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.strip():
            match = _HEADING.match(line)
            if match and len(match.group(1)) == 1:
                return match.group(2), "\n".join(lines[index + 1 :])
            break
    return None, text


def inline(text: str) -> str:
    """One line of markdown text as HTML: escaped, then `code`, **bold** and [links](...) as their text."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if len(part) >= 2 and part.startswith("`") and part.endswith("`"):
            out.append(f"<code>{escape(part[1:-1])}</code>")
            continue
        piece = escape(part)
        piece = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", piece)
        piece = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r"\1 (\2)", piece)  # no live links out of the page
        out.append(piece)
    return "".join(out)


def _cells(line: str) -> list[str]:
    """A pipe-table row's cells; ``\\|`` is a bar inside a cell."""
    row = line.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)]


def markdown_html(text: str, folder: Path, used: set[str] | None = None) -> str:
    """``text`` as HTML; images are read from ``folder`` and their file names added to ``used``."""
    lines = text.splitlines()
    html: list[str] = []
    paragraph: list[str] = []
    index = 0

    def flush() -> None:
        if paragraph:
            html.append(f"<p>{inline(' '.join(paragraph))}</p>")
            paragraph.clear()

    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if not stripped:
            flush()
            index += 1
        elif stripped.startswith("```"):
            flush()
            end = index + 1
            while end < len(lines) and not lines[end].strip().startswith("```"):
                end += 1
            html.append(f"<pre>{escape(chr(10).join(lines[index + 1 : end]))}</pre>")
            index = end + 1
        elif heading := _HEADING.match(stripped):
            flush()
            level = min(len(heading.group(1)) + 1, 5)  # the section's title is the page's h2
            html.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
            index += 1
        elif image := _IMAGE.match(stripped):
            flush()
            name = Path(image.group(2)).name
            if used is not None:
                used.add(name)
            html.append(figure(image.group(1), image_uri(folder / name), name))
            index += 1
        elif stripped.startswith("|") and index + 1 < len(lines) and _SEPARATOR.match(lines[index + 1].strip()):
            flush()
            columns = _cells(stripped)
            end = index + 2
            rows = []
            while end < len(lines) and lines[end].strip().startswith("|"):
                rows.append(_cells(lines[end]))
                end += 1
            html.append(html_table({"title": "", "columns": columns, "rows": rows}))
            index = end
        elif _ITEM.match(line):
            flush()
            items = []
            while index < len(lines) and lines[index].strip():
                item = _ITEM.match(lines[index])
                if item:
                    items.append(item.group(1))
                elif items:
                    items[-1] += " " + lines[index].strip()  # a continuation line
                index += 1
            html.append('<ul class="compact">' + "".join(f"<li>{inline(i)}</li>" for i in items) + "</ul>")
        else:
            paragraph.append(stripped)
            index += 1
    flush()
    return "\n".join(html)
