"""One section's content per kind of result: a reproduction (the paper's patterns beside ours, the setting, the
tables, the figures), a bridge (the choice, the route and anchor-budget charts, the tables), a comparison, a
measurement folder (its markdown). Titles name what was compared: the models' files for bridges and comparisons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from latentstitch.report._charts import bridge_charts
from latentstitch.report._collect import MEASUREMENT, ResultFile
from latentstitch.report._html import bullets, escape, figure, image_uri
from latentstitch.report._markdown import markdown_html, title_and_body
from latentstitch.report._tables import html_table

#: The page's groups of sections, in order: (id, heading, kinds).
GROUPS = (
    ("reproductions", "Reproductions", ("reproduction", "demo")),
    ("bridges", "Bridges", ("bridge",)),
    ("comparisons", "Comparisons", ("compare", "layers")),
    ("measurements", "Other measurements", (MEASUREMENT,)),
)


def group_of(result: ResultFile) -> str:
    return next(group for group, _, kinds in GROUPS if result.kind in kinds)


def _files(result: ResultFile) -> list[str]:
    """The file names a bridge / compare output was computed from (source then target, or A then B)."""
    data = result.data
    if result.kind == "bridge" and data.get("source") and data.get("target"):
        return [Path(str(data["source"])).name, Path(str(data["target"])).name]
    return [str(line).split(":")[0].strip() for line in data.get("files") or [] if str(line).strip()][:2]


def _models(result: ResultFile) -> list[str]:
    """The models' names: given in the output (``source_model`` / ``target_model``), else the files' stems."""
    data = result.data
    given = [data.get("source_model"), data.get("target_model")]
    if all(isinstance(m, str) and m for m in given):
        return [str(m) for m in given]
    return [Path(name).stem for name in _files(result)]


def title(result: ResultFile) -> str:
    """The section's heading: for a bridge or comparison the models and files compared."""
    models, files = _models(result), _files(result)
    if result.kind in ("bridge", "compare") and len(models) == 2:
        arrow = " → " if result.kind == "bridge" else " vs "
        named = f" ({files[0]}{arrow}{files[1]})" if files and files != models else ""
        verb = "Bridge" if result.kind == "bridge" else "Similarity"
        return f"{verb}: {models[0]}{arrow}{models[1]}{named}"
    return result.title


def toc_label(result: ResultFile) -> str:
    models = _models(result)
    if result.kind in ("bridge", "compare") and len(models) == 2:
        return f"{models[0]} {'→' if result.kind == 'bridge' else 'vs'} {models[1]}"
    return result.name


def counts(result: ResultFile) -> tuple[int, int, int, int]:
    """(held, judged, headline held, headline judged)."""
    verdicts = result.patterns
    headline = [v for v in verdicts if v.get("headline")]
    return (
        sum(bool(v.get("holds")) for v in verdicts),
        len(verdicts),
        sum(bool(v.get("holds")) for v in headline),
        len(headline),
    )


def run_label(result: ResultFile) -> str:
    if result.kind in ("bridge", "compare", "layers", MEASUREMENT):
        return result.kind
    if result.smoke:
        return "quick run (smoke test)"
    return "quick run" if result.quick else "full run"


def badge(result: ResultFile, short: bool = False) -> str:
    held, judged, _, _ = counts(result)
    if result.smoke:
        return f'<span class="badge">{"smoke" if short else "smoke test: no verdicts"}</span>'
    if result.kind == "bridge":
        choice = result.data.get("choice") or {}
        if choice.get("route"):
            css = "" if choice.get("reliable", True) else " bad"
            chosen = escape(choice["route"]) if short else f"chosen: {escape(choice['route'])}"
            return f'<span class="badge{css}">{chosen}</span>'
    if not judged:
        return ""
    css = "ok" if held == judged else "bad"
    return f'<span class="badge {css}">{held} / {judged}{"" if short else " patterns hold"}</span>'


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
        ours, measure = verdict.get("ours"), verdict.get("measure")
        number = "n/a" if ours is None or not isinstance(ours, (int, float)) else f"{ours:.3g}"
        star = "★ " if verdict.get("headline") else ""
        rows.append(
            f'<tr class="{"held" if holds else "missed"}"><td>{escape(star + str(verdict.get("claim", "")))}</td>'
            f'<td>{escape(measure or "")}</td><td class="paper">{escape(verdict.get("paper") or "n/a")}</td>'
            f'<td class="num">{escape(number)}</td>'
            f'<td class="num">{escape(verdict.get("rule") or "")}</td><td class="verdict">{mark}</td></tr>'
        )
    details = [f"<b>{escape(v.get('claim', ''))}</b>: {escape(v['detail'])}" for v in verdicts if v.get("detail")]
    quick = " A quick run judges the headline patterns only; the full run judges every pattern." if result.quick else ""
    how = f"<details><summary>How each verdict came out</summary>{bullets(details)}</details>" if details else ""
    return (
        '<div class="scroll"><table class="patterns"><caption>The paper\'s patterns: the paper\'s finding beside '
        "ours, and the rule that decides</caption><thead><tr><th>pattern (★ headline)</th>"
        '<th>what we measure</th><th class="paper">paper</th><th class="num">ours</th>'
        '<th class="num">rule</th><th>verdict</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
        f'<p class="note">★ headline pattern: also judged by the quick run; CI fails when it does not hold there.'
        f"{quick}</p>{how}"
    )


def _plain(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_plain(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def _setting(result: ResultFile) -> str:
    setting = result.data.get("setting") or {}
    differences = result.data.get("differences") or []
    if not setting and not differences:
        return ""
    left = bullets([f"<b>{escape(k)}</b>: {escape(_plain(v))}" for k, v in setting.items()])
    right = bullets([escape(d) for d in differences])
    return (
        f'<div class="columns"><div><h3>Setting</h3>{left}</div>'
        f"<div><h3>How this differs from the paper</h3>{right}</div></div>"
    )


def _figures(figures: dict[str, Path], skip: set[str] = frozenset()) -> str:
    return "".join(
        figure(caption, image_uri(path), path.name) for caption, path in figures.items() if path.name not in skip
    )


def _tables(result: ResultFile) -> str:
    return "".join(html_table(t) for t in result.tables)


def _reproduction(result: ResultFile) -> str:
    parts = []
    if result.data.get("paper"):
        parts.append(f"<p><b>Paper</b>: {escape(result.data['paper'])}</p>")
    parts += [_patterns(result), _setting(result), bullets([escape(n) for n in result.notes])]
    if result.tables:
        parts.append("<h3>Results</h3>" + _tables(result))
    if result.figures:
        parts.append("<h3>Figures</h3>" + _figures(result.figures))
    return "".join(parts)


def _bridge(result: ResultFile) -> str:
    data = result.data
    choice = data.get("choice") or {}
    files = bullets([escape(line) for line in data.get("files") or []])
    parts = [f'<p class="muted">{escape(result.title)}</p>{files}']
    chosen = [n for n in result.notes if n.startswith("Chosen")]
    if chosen:
        css = "callout" if choice.get("reliable", True) is False else "choice"
        parts.append(f'<p class="{css}">{escape(chosen[0])}</p>')
    charts = bridge_charts(result.tables, choice.get("route"))
    if charts:
        parts.append('<div class="charts">' + "".join(figure(c, uri) for c, uri in charts) + "</div>")
    parts.append(_tables(result))
    parts.append(bullets([escape(n) for n in result.notes if not n.startswith("Chosen")]))
    if data.get("selection_rule"):
        rule = escape(data["selection_rule"])
        parts.append(f"<details><summary>How the route is chosen</summary><p>{rule}</p></details>")
    if data.get("bridge_file"):
        parts.append(f'<p class="note">The bridge: {escape(data["bridge_file"])}</p>')
    return "".join(parts)


def _compare(result: ResultFile) -> str:
    files = bullets([escape(line) for line in result.data.get("files") or []])
    return files + _tables(result) + bullets([escape(n) for n in result.notes])


def _layers(result: ResultFile) -> str:
    """Every layer pair of two models: the heatmaps first, then the matrices and the notes."""
    data = f'<p class="note">Inputs: {escape(result.data.get("data", ""))}</p>' if result.data.get("data") else ""
    return data + _figures(result.figures) + _tables(result) + bullets([escape(n) for n in result.notes])


def _measurement(result: ResultFile) -> str:
    used: set[str] = set()
    parts = []
    for index, path in enumerate(result.markdown):
        text = path.read_text(encoding="utf-8", errors="replace")
        body = title_and_body(text)[1] if index == 0 else text
        if index:
            parts.append(f"<h3>{escape(path.name)}</h3>")
        parts.append(markdown_html(body, path.parent, used))
    figures = _figures(result.figures, used)
    if figures:
        parts.append(("<h3>Other figures in the folder</h3>" if result.markdown else "") + figures)
    numbers = result.path.parent / "results.json" if result.markdown else None
    if numbers is not None and numbers.is_file():
        parts.append(f'<p class="note">Every number: {escape(numbers)} (not drawn here).</p>')
    return "".join(parts)


def body(result: ResultFile) -> str:
    """The section's content below its heading."""
    render = {"bridge": _bridge, "compare": _compare, "layers": _layers, MEASUREMENT: _measurement}
    return render.get(result.kind, _reproduction)(result)
