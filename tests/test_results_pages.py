"""The committed results/ say what produced them: one folder-name convention (the command's words joined by hyphens,
as ``latentstitch reproduce NAME`` names them), and every page names the command and the commit under its title;
the writers put the same line on every page they write from now on."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from latentstitch._core import provenance
from latentstitch._core.provenance import current_commit, provenance_line, with_provenance
from latentstitch.experiments._report import Report, ResultTable

RESULTS = Path(__file__).resolve().parents[1] / "results"
PAGES = sorted(p for p in RESULTS.rglob("*.md"))
LINE = re.compile(r"^Produced by `[^`]+`.* at commit `([0-9a-f]{7,40}|unknown)`\.$")


def test_results_folders_follow_one_naming_convention():
    folders = [p.relative_to(RESULTS) for p in RESULTS.rglob("*") if p.is_dir()]
    assert folders, "no results folders found"
    odd = [str(f) for f in folders if not all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", part) for part in f.parts)]
    assert not odd, f"results folders not in lower-case words joined by hyphens: {odd}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(RESULTS)))
def test_every_results_page_names_its_command_and_commit(page):
    lines = page.read_text().splitlines()
    assert lines[0].startswith("# "), f"{page}: expected a '# title' first line"
    assert lines[1] == "" and LINE.match(lines[2]), (
        f"{page}: expected 'Produced by `COMMAND` at commit `HASH`.' below the title, got {lines[2]!r}"
    )


def _report(quick: bool = False) -> Report:
    return Report(
        name="toy-run",
        title="Toy",
        paper="Someone et al. 2023",
        setting={"seeds": [0, 1]},
        tables=[ResultTable("scores", ["method", "ours"], [["a", 0.9]])],
        quick=quick,
    )


def _head() -> str:
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=provenance.SOURCE, capture_output=True, text=True
    )
    return found.stdout.strip() if found.returncode == 0 and (provenance.SOURCE / ".git").exists() else "unknown"


@pytest.mark.parametrize("quick", [False, True])
def test_a_reproduction_page_names_the_command_and_the_current_commit(tmp_path, quick):
    _report(quick).write(tmp_path)
    lines = (tmp_path / "results.md").read_text().splitlines()
    flag = " --quick" if quick else ""
    assert lines[:3] == [
        "# Toy",
        "",
        f"Produced by `latentstitch reproduce toy-run{flag} --out {tmp_path}` at commit `{_head()}`.",
    ]
    assert "Produced by" not in (tmp_path / "results.json").read_text()  # the numbers file is unchanged


def test_a_given_command_is_named_as_given(tmp_path):
    _report().write(tmp_path, "latentstitch demo --epochs 2 --out x")
    assert (
        (tmp_path / "results.md")
        .read_text()
        .splitlines()[2]
        .startswith("Produced by `latentstitch demo --epochs 2 --out x`")
    )


def test_without_git_the_commit_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "SOURCE", tmp_path)  # an installed wheel: no .git beside the package
    assert current_commit() == "unknown"
    assert provenance_line("cmd") == "Produced by `cmd` at commit `unknown`."


def test_the_line_goes_under_the_title_and_keeps_the_rest():
    page = "# Title\n\nbody line\n\n| a |\n"
    assert (
        with_provenance(page, "cmd", "abc1234")
        == "# Title\n\nProduced by `cmd` at commit `abc1234`.\n\nbody line\n\n| a |\n"
    )


def test_the_demo_page_names_the_demo_command_with_its_options(tmp_path, monkeypatch):
    import latentstitch.experiments.demo as demo
    from latentstitch.cli import main

    monkeypatch.setattr(demo, "run_demo", lambda **_: _report())  # the page's header, not the training, is tested
    out = tmp_path / "demo"
    assert main(["demo", "--epochs", "2", "--anchors", "50", "--out", str(out), "--quiet"]) == 0
    expected = f"latentstitch demo --seeds 0 1 --epochs 2 --anchors 50 --latent-dim 64 --out {out}"
    assert (out / "results.md").read_text().splitlines()[2] == f"Produced by `{expected}` at commit `{_head()}`."
