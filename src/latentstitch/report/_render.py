"""The HTML page: an index of every result with its verdicts, then one section per result (the paper's patterns
beside ours with held / not held marks, the setting and how it differs from the paper, the tables, the figures),
linked both ways. Static, one file, no network: figures are data URIs, the style is inline."""

from __future__ import annotations

import base64
import datetime
import html
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from latentstitch.experiments._report import format_number, format_value
from latentstitch.report._collect import ResultFile, find_results, load_result

_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml", ".gif": "image/gif"}

_STYLE = """
:root { --ok: #1a7f37; --bad: #b42318; --muted: #57606a; --line: #d0d7de; --soft: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328; }
main { max-width: 1240px; margin: 0 auto; padding: 16px 24px 64px; }
h1 { font-size: 26px; margin: 8px 0 4px; }
h2 { font-size: 21px; margin: 0 0 4px; }
h3 { font-size: 16px; margin: 20px 0 6px; }
a { color: #0969da; }
.muted { color: var(--muted); }
section.result { border-top: 3px solid var(--line); margin-top: 36px; padding-top: 14px; }
nav.pager { font-size: 13px; margin: 4px 0 10px; }
nav.pager a { margin-right: 14px; }
.badge { display: inline-block; font-size: 12px; padding: 1px 8px; border-radius: 10px; margin-left: 6px;
         border: 1px solid var(--line); background: var(--soft); vertical-align: middle; }
.badge.ok { color: #fff; background: var(--ok); border-color: var(--ok); }
.badge.bad { color: #fff; background: var(--bad); border-color: var(--bad); }
.scroll { overflow-x: auto; margin: 6px 0 4px; }
table { border-collapse: collapse; font-size: 13.5px; }
caption { text-align: left; font-weight: 600; padding: 4px 0; }
th, td { border: 1px solid var(--line); padding: 4px 8px; vertical-align: top; }
th { background: var(--soft); text-align: left; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr.held td.verdict { color: var(--ok); font-weight: 600; }
tr.missed td.verdict { color: var(--bad); font-weight: 600; }
td.verdict { white-space: nowrap; }
p.note { font-size: 13px; color: var(--muted); margin: 2px 0 12px; }
.columns { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 28px; }
@media (max-width: 900px) { .columns { grid-template-columns: 1fr; } }
ul.compact { margin: 4px 0; padding-left: 20px; font-size: 13.5px; }
ul.compact li { margin: 2px 0; }
figure { margin: 14px 0; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { font-size: 13px; color: var(--muted); }
details { margin: 6px 0; font-size: 13.5px; }
summary { cursor: pointer; color: var(--muted); }
.callout { border-left: 4px solid #bf8700; background: #fff8c5; padding: 6px 12px; margin: 8px 0; }
"""


def _escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "result"


def _cell(value: Any, digits: int) -> tuple[str, bool]:
    """The text of a table cell and whether it is numeric (right-aligned)."""
    if isinstance(value, bool):
        return str(value), False
    if isinstance(value, float) and math.isnan(value):
        return "n/a", True
    if isinstance(value, (int, float)) or (
        isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value)
    ):
        return format_value(tuple(value) if isinstance(value, list) else value, digits), True
    if value is None:
        return "n/a", False
    return str(value), False


def _table(table: dict[str, Any]) -> str:
    head = "".join(f"<th>{_escape(c)}</th>" for c in table["columns"])
    body = []
    for row in table["rows"]:
        cells = []
        for value in row if isinstance(row, list) else [row]:
            text, numeric = _cell(value, table["digits"])
            cells.append(f'<td class="num">{_escape(text)}</td>' if numeric else f"<td>{_escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = f'<p class="note">{_escape(table["note"])}</p>' if table["note"] else ""
    return (
        f'<div class="scroll"><table><caption>{_escape(table["title"])}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>{note}"
    )


def _counts(result: ResultFile) -> tuple[int, int, int, int]:
    """(held, judged, headline held, headline judged)."""
    verdicts = result.patterns
    headline = [v for v in verdicts if v.get("headline")]
    return (
        sum(bool(v.get("holds")) for v in verdicts),
        len(verdicts),
        sum(bool(v.get("holds")) for v in headline),
        len(headline),
    )


def _run_label(result: ResultFile) -> str:
    if result.kind in ("bridge", "compare"):
        return result.kind
    if result.smoke:
        return "quick run (smoke test)"
    return "quick run" if result.quick else "full run"


def _verdict_badge(result: ResultFile) -> str:
    held, judged, _, _ = _counts(result)
    if result.smoke:
        return '<span class="badge">smoke test: no verdicts</span>'
    if not judged:
        return ""
    css = "ok" if held == judged else "bad"
    return f'<span class="badge {css}">{held} / {judged} patterns hold</span>'


def _patterns(result: ResultFile) -> str:
    verdicts = result.patterns
    if result.smoke:
        return (
            '<p class="callout">Smoke test: this quick run only checks that the code runs end to end; its numbers '
            "mean nothing and no pattern is judged. Run without <code>--quick</code> for the real thing.</p>"
        )
    if not verdicts:
        return ""
    rows = []
    for verdict in verdicts:
        holds = bool(verdict.get("holds"))
        mark = "✓ held" if holds else "✗ not held"
        ours = verdict.get("ours")
        measure = verdict.get("measure")
        ours_text = f"{measure}: {format_number(ours)}" if measure else format_number(ours)
        star = "★ " if verdict.get("headline") else ""
        rows.append(
            f'<tr class="{"held" if holds else "missed"}"><td>{_escape(star + str(verdict.get("claim", "")))}</td>'
            f"<td>{_escape(verdict.get('paper') or 'n/a')}</td><td>{_escape(ours_text)}</td>"
            f'<td class="num">{_escape(verdict.get("rule") or "")}</td>'
            f'<td class="verdict">{mark}</td></tr>'
        )
    details = [
        f"<li><b>{_escape(v.get('claim', ''))}</b>: {_escape(v['detail'])}</li>" for v in verdicts if v.get("detail")
    ]
    quick_note = (
        " A quick run judges the headline patterns only; the full run judges every pattern." if result.quick else ""
    )
    how = ""
    if details:
        items = "".join(details)
        how = f'<details><summary>How each verdict came out</summary><ul class="compact">{items}</ul></details>'
    return (
        '<div class="scroll"><table class="patterns"><caption>The paper\'s patterns: the paper, ours, and the rule '
        "that decides</caption><thead><tr><th>pattern (★ headline)</th><th>paper</th><th>ours</th><th>rule</th>"
        f"<th>verdict</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        f'<p class="note">★ headline pattern: also judged by the quick run; CI fails when it does not hold there.'
        f"{quick_note}</p>{how}"
    )


def _setting(result: ResultFile) -> str:
    setting = result.data.get("setting") or {}
    differences = result.data.get("differences") or []
    if not setting and not differences:
        return ""
    left = "".join(f"<li><b>{_escape(k)}</b>: {_escape(_plain(v))}</li>" for k, v in setting.items())
    right = "".join(f"<li>{_escape(d)}</li>" for d in differences)
    return (
        '<div class="columns">'
        f'<div><h3>Setting</h3><ul class="compact">{left}</ul></div>'
        f'<div><h3>How this differs from the paper</h3><ul class="compact">{right}</ul></div></div>'
    )


def _plain(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_plain(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def _figures(result: ResultFile) -> str:
    parts = []
    for caption, path in result.figures.items():
        mime = _MIME.get(path.suffix.lower())
        if mime is None or not path.is_file():
            parts.append(
                f'<p class="note">figure not found next to {_escape(result.path.name)}: {_escape(path.name)}</p>'
            )
            continue
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        parts.append(
            f'<figure><img alt="{_escape(caption)}" src="data:{mime};base64,{data}">'
            f"<figcaption>{_escape(caption)} ({_escape(path.name)})</figcaption></figure>"
        )
    return "".join(parts)


def _section(result: ResultFile, anchor: str, previous: str | None, following: str | None) -> str:
    links = ['<a href="#index">↑ index</a>']
    if previous:
        links.append(f'<a href="#{previous}">← previous</a>')
    if following:
        links.append(f'<a href="#{following}">next →</a>')
    paper = result.data.get("paper")
    seconds = result.data.get("seconds")
    meta = [_run_label(result)]
    if isinstance(seconds, (int, float)):
        meta.append(f"{seconds:.0f} s")
    meta.append(f"from {result.path}")
    parts = [
        f'<section class="result" id="{anchor}">',
        f"<h2>{_escape(result.title)}{_verdict_badge(result)}</h2>",
        f'<nav class="pager">{"".join(links)}</nav>',
        f'<p class="muted">{_escape(" · ".join(meta))}</p>',
    ]
    if paper:
        parts.append(f"<p><b>Paper</b>: {_escape(paper)}</p>")
    parts.append(_patterns(result))
    parts.append(_setting(result))
    if result.notes:
        parts.append('<ul class="compact">' + "".join(f"<li>{_escape(n)}</li>" for n in result.notes) + "</ul>")
    if result.tables:
        parts.append("<h3>Results</h3>" + "".join(_table(t) for t in result.tables))
    figures = _figures(result)
    if figures:
        parts.append("<h3>Figures</h3>" + figures)
    parts.append("</section>")
    return "\n".join(parts)


def _index(results: list[ResultFile], anchors: list[str]) -> str:
    rows = []
    for result, anchor in zip(results, anchors, strict=True):
        held, judged, head_held, head_judged = _counts(result)
        if result.smoke:
            verdicts, headline = "smoke test", "-"
        else:
            verdicts = f"{held} / {judged}" if judged else "-"
            headline = f"{head_held} / {head_judged}" if head_judged else "-"
        css = "" if not judged else ("held" if held == judged else "missed")
        seconds = result.data.get("seconds")
        rows.append(
            f'<tr class="{css}"><td><a href="#{anchor}">{_escape(result.name)}</a></td>'
            f"<td>{_escape(result.title)}</td><td>{_escape(_run_label(result))}</td>"
            f'<td class="num">{_escape(verdicts)}</td><td class="num">{_escape(headline)}</td>'
            f'<td class="num">{_escape(f"{seconds:.0f}" if isinstance(seconds, (int, float)) else "-")}</td></tr>'
        )
    return (
        '<div class="scroll" id="index"><table><caption>Index: every result on this page</caption><thead><tr>'
        "<th>name</th><th>what</th><th>run</th><th>patterns held</th><th>★ headline held</th><th>time (s)</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def render_html(paths: Sequence[str | Path], *, title: str = "latentstitch results", source: str = "") -> str:
    """The page for the result files ``paths`` (reproductions first, by name; then bridge / compare outputs)."""
    from latentstitch._version import __version__

    results = [load_result(p) for p in paths]
    order = {"reproduction": 0, "demo": 1, "bridge": 2, "compare": 3}
    results.sort(key=lambda r: (order[r.kind], r.name, str(r.path)))
    anchors: list[str] = []
    for result in results:
        anchor, n = _slug(result.name), 2
        while anchor in anchors:
            anchor, n = f"{_slug(result.name)}-{n}", n + 1
        anchors.append(anchor)
    sections = [
        _section(result, anchor, anchors[i - 1] if i else None, anchors[i + 1] if i + 1 < len(anchors) else None)
        for i, (result, anchor) in enumerate(zip(results, anchors, strict=True))
    ]
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    kinds = {result.kind for result in results}
    guides = []
    if kinds & {"reproduction", "demo"}:
        guides.append(
            "Each reproduction shows the paper's patterns beside ours (✓ held / ✗ not held by the declared rule), its "
            "setting and how it differs from the paper, its tables and figures."
        )
    if kinds & {"bridge", "compare"}:
        guides.append(
            "Each bridge shows every route's cross-validated scores on the anchors and the choice; each comparison "
            "the similarity indices of two embedding files."
        )
    intro = (
        f'<p class="muted">{len(results)} result file(s){" from " + _escape(source) if source else ""}; generated '
        f"{stamp} by latentstitch {_escape(__version__)}. {' '.join(guides)}</p>"
    )
    if not results:
        intro += '<p class="callout">No result file found.</p>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_escape(title)}</title><style>{_STYLE}</style></head><body><main>"
        f"<h1>{_escape(title)}</h1>{intro}{_index(results, anchors) if results else ''}"
        + "\n".join(sections)
        + "</main></body></html>\n"
    )


def write_report(results_dir: str | Path, output: str | Path, *, title: str = "latentstitch results") -> Path:
    """Render every result file under ``results_dir`` into the HTML file ``output``; returns its path."""
    paths = find_results(results_dir)
    page = render_html(paths, title=title, source=str(results_dir))
    target = Path(output)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target
