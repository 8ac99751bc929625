"""The HTML page: a table of contents in a fixed sidebar (reproductions, bridges, comparisons, other measurements),
an overview of every result with its verdicts, one section per result linked both ways, and at the end what the
folder holds that could not be shown, with the reason. Static, one file, no network: figures and charts are data
URIs, the style is inline, there is no script."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path

from latentstitch._core.atomic import refuse_inputs, write_text
from latentstitch._version import __version__
from latentstitch.report._collect import Collection, ResultFile, Unreadable, collect, load_result
from latentstitch.report._html import escape, slug
from latentstitch.report._sections import GROUPS, badge, body, counts, group_of, run_label, title, toc_label
from latentstitch.report._style import STYLE


def _section(result: ResultFile, anchor: str, previous: str | None, following: str | None) -> str:
    links = ['<a href="#index">↑ overview</a>']
    if previous:
        links.append(f'<a href="#{previous}">← previous</a>')
    if following:
        links.append(f'<a href="#{following}">next →</a>')
    meta = [run_label(result)]
    if result.seconds is not None:
        meta.append(f"{result.seconds:.0f} s")
    meta.append(f"from {result.path}")
    return "\n".join(
        [
            f'<section class="result" id="{anchor}">',
            f"<h2>{escape(title(result))}{badge(result)}</h2>",
            f'<nav class="pager">{"".join(links)}</nav>',
            f'<p class="muted">{escape(" · ".join(meta))}</p>',
            body(result),
            "</section>",
        ]
    )


#: What the overview's settings column says of a reproduction's result (``ResultFile.settings``).
SETTINGS_LABELS = {
    "current": "current",
    "changed": "predates the current settings",
    "not recorded": "not recorded",
}


def _overview(results: list[ResultFile], anchors: list[str]) -> str:
    judged_any = any(counts(r)[1] or r.smoke for r in results)  # the verdict columns only when there are verdicts
    stamped_any = any(r.settings is not None for r in results)
    rows = []
    for result, anchor in zip(results, anchors, strict=True):
        held, judged, head_held, head_judged = counts(result)
        if result.smoke:
            verdicts, headline = "smoke test", "-"
        else:
            verdicts = f"{held} / {judged}" if judged else "-"
            headline = f"{head_held} / {head_judged}" if head_judged else "-"
        css = "" if not judged else ("held" if held == judged else "missed")
        seconds = "-" if result.seconds is None else f"{result.seconds:.0f}"
        cells = [
            f'<td><a href="#{anchor}">{escape(toc_label(result))}</a></td>',
            f'<td class="what">{escape(title(result))}</td><td>{escape(run_label(result))}</td>',
        ]
        if judged_any:
            cells.append(f'<td class="num">{escape(verdicts)}</td><td class="num">{escape(headline)}</td>')
        cells.append(f'<td class="num">{escape(seconds)}</td>')
        if stamped_any:
            cells.append(f"<td>{escape(SETTINGS_LABELS.get(result.settings, '-'))}</td>")
        rows.append(f'<tr class="{css}">{"".join(cells)}</tr>')
    settings_head = "<th>settings</th>" if stamped_any else ""
    verdict_heads = '<th class="num">patterns held</th><th class="num">★ headline held</th>' if judged_any else ""
    return (
        '<div class="scroll" id="index"><table class="overview"><caption>Overview: every result on this page'
        f'</caption><thead><tr><th>name</th><th class="what">what</th><th>kind</th>{verdict_heads}'
        f'<th class="num">time (s)</th>{settings_head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
    )


def _toc(grouped: list[tuple[str, str, list[tuple[ResultFile, str]]]], unreadable: list[Unreadable]) -> str:
    parts = ['<nav class="toc" aria-label="contents"><details open><summary>Contents</summary>']
    parts.append('<ol><li><a href="#index">Overview</a></li></ol>')
    for group, heading, members in grouped:
        parts.append(f'<h4><a href="#{group}">{escape(heading)}</a></h4><ol>')
        for result, anchor in members:
            parts.append(
                f'<li><a href="#{anchor}" title="{escape(title(result))}"><span>{escape(toc_label(result))}</span>'
                f"{badge(result, short=True)}</a></li>"
            )
        parts.append("</ol>")
    if unreadable:
        parts.append(f'<h4><a href="#not-shown">Not shown ({len(unreadable)})</a></h4>')
    parts.append("</details></nav>")
    return "".join(parts)


def _not_shown(unreadable: list[Unreadable]) -> str:
    if not unreadable:
        return ""
    rows = "".join(f"<tr><td>{escape(u.path)}</td><td>{escape(u.reason)}</td></tr>" for u in unreadable)
    return (
        '<section id="not-shown"><h2 class="group">Not shown</h2><p class="muted">What the folder holds that this '
        "page could not show, and why.</p>"
        '<div class="scroll"><table class="unreadable"><thead><tr><th>file or folder</th><th>why</th></tr></thead>'
        f"<tbody>{rows}</tbody></table></div></section>"
    )


def _anchors(results: list[ResultFile]) -> list[str]:
    taken = {group for group, _, _ in GROUPS} | {"index", "not-shown", "contents"}
    anchors: list[str] = []
    for result in results:
        base = slug(toc_label(result))
        anchor, n = base, 2
        while anchor in taken:
            anchor, n = f"{base}-{n}", n + 1
        taken.add(anchor)
        anchors.append(anchor)
    return anchors


def render_html(
    paths: Sequence[str | Path],
    *,
    title: str = "latentstitch results",
    source: str = "",
    unreadable: Sequence[Unreadable] | None = None,
) -> str:
    """The page for the results ``paths`` (reproductions first, by name; then bridges, comparisons, other
    measurements). What could not be shown is listed at the end: ``unreadable``, or when it is None what
    :func:`collect` finds unreadable in the folder ``source``, plus any path that fails to load."""
    missing = list(unreadable) if unreadable is not None else []
    if unreadable is None and source and Path(source).is_dir():
        missing = collect(source).unreadable
    results = []
    for path in paths:
        try:
            results.append(load_result(path))
        except ValueError as error:
            missing.append(Unreadable(Path(path), str(error).removeprefix(f"{path}: ")))
    return render_collection(Collection(results, missing), title=title, source=source)


def render_collection(found: Collection, *, title: str = "latentstitch results", source: str = "") -> str:
    """The page for results already read (``collect``): no file is read again."""
    results, missing = list(found.results), list(found.unreadable)
    order = {group: i for i, (group, _, _) in enumerate(GROUPS)}
    results.sort(key=lambda r: (order[group_of(r)], r.kind, r.name, str(r.path)))
    anchors = _anchors(results)
    grouped = []
    for group, heading, _ in GROUPS:
        members = [(r, a) for r, a in zip(results, anchors, strict=True) if group_of(r) == group]
        if members:
            grouped.append((group, heading, members))
    sections = []
    for group, heading, members in grouped:
        sections.append(f'<h2 class="group" id="{group}">{escape(heading)}</h2>')
        for result, anchor in members:
            i = anchors.index(anchor)
            previous = anchors[i - 1] if i else None
            following = anchors[i + 1] if i + 1 < len(anchors) else None
            sections.append(_section(result, anchor, previous, following))
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    intro = (
        f'<p class="muted">{len(results)} result(s){" from " + escape(source) if source else ""}; generated '
        f"{stamp} by latentstitch {escape(__version__)}. Each reproduction shows the paper's patterns beside ours "
        "(✓ held / ✗ not held by the declared rule), its setting and how it differs from the paper, its tables "
        "(the paper's numbers shaded, beside ours) and figures; each bridge every route's cross-validated score and "
        "the choice; each comparison the similarity indices of two embedding files.</p>"
    )
    if not results:
        intro += '<p class="callout">No result found.</p>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"{_toc(grouped, missing)}<main><h1>{escape(title)}</h1>{intro}{_overview(results, anchors) if results else ''}"
        + "\n".join(sections)
        + _not_shown(missing)
        + "</main></body></html>\n"
    )


def write_report(results_dir: str | Path, output: str | Path, *, title: str = "latentstitch results") -> Path:
    """Render every result under ``results_dir`` into the HTML file ``output`` (written atomically); returns its
    path. ``output`` may not be one of the files it reads (``ValueError``)."""
    target = Path(output)
    if Path(results_dir).is_dir():
        found = collect(results_dir)
        refuse_inputs({"output": target}, found.files())
        page = render_collection(found, title=title, source=str(results_dir))
    else:
        refuse_inputs({"output": target}, {"results_dir": results_dir})
        page = render_html([results_dir], title=title, source=str(results_dir), unreadable=[])
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text(target, page, option="output")
    return target
