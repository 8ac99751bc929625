"""`latentstitch report` over a results tree of every shape: each folder is shown or listed as not shown with the
reason, the table of contents names every section, a bridge's section is titled with its models' files and has its
charts, and tables are HTML tables with numbers right-aligned and the paper's column beside ours."""

from __future__ import annotations

import json
import re

import numpy as np

from latentstitch.cli import main
from latentstitch.report import MEASUREMENT, collect, render_collection, render_html, write_report


def _png(path):
    from latentstitch._core.figures import pyplot, save_figure

    figure, ax = pyplot().subplots(figsize=(4, 2))
    ax.plot([0, 1, 0])
    return save_figure(figure, path)


def _tree(root):
    """Every kind of folder a results tree holds, and some it cannot show."""
    (root / "repro").mkdir(parents=True)
    table = {"title": "scores", "columns": ["method", "paper accuracy", "accuracy", "note"]}
    table["rows"] = [["A", 0.95, [0.9, 0.01], "x"], ["B", None, 0.5, "y"]]
    repro = {"kind": "reproduction", "name": "repro", "title": "Repro", "tables": [table], "figures": {"c": "c.png"}}
    (root / "repro" / "results.json").write_text(json.dumps(repro))
    _png(root / "repro" / "c.png")
    (root / "measure").mkdir()  # like results/relative-methods: markdown, a figure, numbers of its own shape
    (root / "measure" / "results.md").write_text(
        "# Methods <b>against</b> cosine\n\nSome `code` and **bold** text.\n\n## A table\n\n"
        "| method | top-1 | vs cosine |\n|---|---|---|\n| cosine \\| plain | 0.4039 ± 0.01 | +0.0000 |\n"
        "| <script>alert(1)</script> | 0.8678 | -0.0025 |\n\n- one\n- two\n"
    )
    (root / "measure" / "results.json").write_text(json.dumps({"grid": {"a": 1}, "seconds": {"a": 2.0, "b": 3.0}}))
    _png(root / "measure" / "study.png")
    (root / "budgets").mkdir()  # like results/alignment-budgets: a table.md and numbers
    (root / "budgets" / "table.md").write_text("# Budgets\n\n| pairs | mrr |\n|---|---|\n| 10 | 0.5 |\n")
    (root / "budgets" / "results.json").write_text(json.dumps({"words": [1, 2], "seconds": 7}))
    (root / "pictures").mkdir()
    _png(root / "pictures" / "only.png")
    (root / "broken").mkdir()
    (root / "broken" / "results.json").write_text("{not json")
    (root / "odd").mkdir()
    (root / "odd" / "out.json").write_text(json.dumps({"kind": "mystery", "tables": []}))
    (root / "bad").mkdir()
    (root / "bad" / "results.json").write_text(json.dumps({"kind": "reproduction", "title": "t", "tables": [3]}))
    (root / "stray").mkdir()
    (root / "stray" / "config.json").write_text(json.dumps({"a": 1}))
    (root / "stray" / "notes.txt").write_text("hello")
    (root / "empty").mkdir()
    (root / "run" / "checkpoint").mkdir(parents=True)
    (root / "run" / "checkpoint" / "settings.json").write_text("{}")
    (root / "run" / "checkpoint" / "stage.json").write_text("{}")
    return root


def test_every_folder_is_shown_or_listed_with_the_reason(tmp_path):
    root = _tree(tmp_path / "results")
    found = collect(root)
    shown = {r.path.relative_to(root).as_posix(): r.kind for r in found.results}
    assert shown == {
        "repro/results.json": "reproduction",
        "measure/results.md": MEASUREMENT,
        "budgets/table.md": MEASUREMENT,
        "pictures": MEASUREMENT,
    }
    listed = {u.path.relative_to(root).as_posix(): u.reason for u in found.unreadable}
    assert "not valid JSON" in listed["broken/results.json"]
    assert "unknown kind 'mystery'" in listed["odd/out.json"]
    assert "tables[0]" in listed["bad/results.json"]
    assert "not a result" in listed["stray/config.json"] and "notes.txt" in listed["stray"]
    assert listed["empty"] == "an empty folder" and "--resume" in listed["run/checkpoint"]
    assert not any(path.startswith("run/checkpoint/") for path in listed)  # one line for the checkpoint
    folders = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir()} - {"run", "run/checkpoint"}
    accounted = {path.split("/")[0] for path in [*shown, *listed]}
    assert folders <= accounted, folders - accounted
    page = render_html([r.path for r in found.results], source=str(root))
    assert page.count("<tr><td>") >= len(found.unreadable) and "broken/results.json" in page
    measure = collect(root).results[1]
    assert measure.title == "Methods <b>against</b> cosine" and measure.seconds == 5.0


def _sections_and_toc(page):
    sections = re.findall(r'<section class="result" id="([^"]+)"', page)
    toc = page[page.index('<nav class="toc"') : page.index("</nav>", page.index('<nav class="toc"'))]
    return sections, re.findall(r'href="#([^"]+)"', toc)


def test_the_table_of_contents_lists_every_section_by_group(tmp_path):
    root = _tree(tmp_path / "results")
    bridge = {"kind": "bridge", "title": "B", "tables": [], "source": "minilm.npy", "target": "e5.npy"}
    (root / "bridge.json").write_text(json.dumps(bridge))
    compare = {"kind": "compare", "title": "C", "tables": [], "files": ["a.npy: 3 x 4", "b.npy: 3 x 5"]}
    (root / "compare.json").write_text(json.dumps(compare))
    out = write_report(root, tmp_path / "report.html")
    page = out.read_text()
    sections, toc = _sections_and_toc(page)
    assert len(sections) == 6 and len(set(sections)) == 6
    assert all(anchor in toc for anchor in sections)
    groups = ["reproductions", "bridges", "comparisons", "measurements", "not-shown"]
    assert [g for g in toc if g in groups] == groups
    assert all(f'id="{g}"' in page for g in groups)


def test_a_bridge_section_is_titled_with_the_models_files_and_charts_its_routes(tmp_path, capsys):
    rng = np.random.default_rng(0)
    latent = rng.normal(size=(120, 6))
    np.save(tmp_path / "minilm-l6.npy", np.tanh(latent @ rng.normal(size=(6, 12))).astype(np.float32))
    np.save(tmp_path / "e5-small.npy", (latent @ rng.normal(size=(6, 16)) + 0.3 * rng.normal(size=(120, 16))))
    fit = ["bridge", "fit", str(tmp_path / "minilm-l6.npy"), str(tmp_path / "e5-small.npy")]
    routes = ["--routes", "ridge", "relative_centered", "--budget", "20", "50", "--quiet"]
    assert main([*fit, "-o", str(tmp_path / "b.safetensors"), *routes]) == 0
    compare = ["compare", str(tmp_path / "minilm-l6.npy"), str(tmp_path / "e5-small.npy"), "--quiet"]
    assert main([*compare, "--measures", "linear_cka", "--json", str(tmp_path / "c.json")]) == 0
    capsys.readouterr()
    found = collect(tmp_path)
    assert [r.kind for r in found.results] == ["bridge", "compare"] and found.unreadable == []  # inputs accounted
    page = render_html([r.path for r in found.results])
    headings = re.findall(r"<h2>(.*?)<span|<h2>(.*?)</h2>", page)
    titles = [a or b for a, b in headings]
    assert "Bridge: minilm-l6 → e5-small (minilm-l6.npy → e5-small.npy)" in titles
    assert "Similarity: minilm-l6 vs e5-small (minilm-l6.npy vs e5-small.npy)" in titles
    bridge = page[page.index('id="minilm-l6-e5-small"') : page.index('id="comparisons"')]
    assert bridge.count("data:image/png;base64,") == 2  # route scores, anchor budget
    assert "Route scores" in bridge and "Anchor budget" in bridge and 'class="choice"' in bridge


def test_tables_are_html_tables_with_numbers_right_and_the_paper_beside_ours(tmp_path):
    root = _tree(tmp_path / "results")
    page = render_html([r.path for r in collect(root).results])
    assert "<table" in page and "<img" in page
    repro = page[page.index('id="repro"') : page.index("</section>", page.index('id="repro"'))]
    head = re.findall(r"<th[^>]*>([^<]*)</th>", repro)
    assert head == ["method", "accuracy", "paper accuracy", "note"]  # the paper's column moved beside ours
    assert '<td class="num">0.900 ± 0.010</td><td class="num paper">0.950</td>' in repro
    assert '<td class="num paper">n/a</td>' in repro
    measure = page[page.index('id="measure"') : page.index("</section>", page.index('id="measure"'))]
    assert "<table>" in measure and "| method |" not in measure  # the markdown table is a table
    assert '<td>cosine | plain</td><td class="num">0.4039 ± 0.01</td><td class="num">+0.0000</td>' in measure
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in measure and "<script" not in page
    assert "Methods &lt;b&gt;against&lt;/b&gt; cosine" in page and "<code>code</code>" in measure
    assert measure.count("data:image/png;base64,") == 1 and "<li>one</li>" in measure


def test_overview_says_which_reproductions_predate_their_settings(tmp_path):
    """A committed full run stamped with its settings' digest reads "current" while the code's settings match, and
    "predates the current settings" once they change (or "not recorded" for an unstamped run)."""
    from latentstitch.experiments import registry

    base = {"kind": "reproduction", "title": "t", "tables": [], "quick": False}
    digests = {"cross-lingual": registry.settings_digest("cross-lingual", False), "word-embeddings": "0" * 16}
    for name, digest in digests.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps({**base, "name": name, "settings_digest": digest}))
    (tmp_path / "frankenstein").mkdir()
    (tmp_path / "frankenstein" / "results.json").write_text(json.dumps({**base, "name": "frankenstein"}))
    states = {r.name: r.settings for r in collect(tmp_path).results}
    assert states == {"cross-lingual": "current", "word-embeddings": "changed", "frankenstein": "not recorded"}
    overview = render_collection(collect(tmp_path)).split('id="index"')[1].split("</table>")[0]
    assert "<th>settings</th>" in overview
    assert overview.count("predates the current settings") == 1 and overview.count("not recorded") == 1
