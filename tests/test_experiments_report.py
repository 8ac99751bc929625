"""The report every experiment writes: tables, honest expectation lines, JSON with every number."""

import json

import numpy as np
import pytest

from latentstitch.experiments._report import (
    Expectation,
    Pattern,
    Report,
    ResultTable,
    Rule,
    above,
    at_least,
    at_most,
    below,
    format_value,
    judge,
    mean_std,
)


def test_mean_std_and_formatting():
    assert mean_std([1.0, 3.0]) == (2.0, 1.0)
    assert format_value((0.5, 0.25), digits=2) == "0.50 ± 0.25"
    assert format_value(None) == "n/a"
    assert format_value(0.12345) == "0.123"
    with pytest.raises(ValueError, match="values: need at least one run"):
        mean_std([])


def test_report_writes_markdown_and_json(tmp_path):
    report = Report(
        name="toy",
        title="Toy",
        paper="Someone et al. 2023",
        setting={"seeds": [0, 1]},
        differences=["fewer epochs"],
        tables=[ResultTable("scores", ["method", "ours", "paper"], [["a", (0.9, 0.01), 0.95], ["b", 0.5, None]])],
        expectations=[Expectation("a beats b", True, "0.90 > 0.50"), Expectation("b near a", False)],
        numbers={"matrix": np.eye(2)},
    )
    report.write(tmp_path)
    markdown = (tmp_path / "results.md").read_text()
    assert "| a | 0.900 ± 0.010 | 0.950 |" in markdown and "| b | 0.500 | n/a |" in markdown
    assert "- a beats b: holds (0.90 > 0.50)" in markdown and "- b near a: DOES NOT HOLD" in markdown
    assert "- fewer epochs" in markdown
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["numbers"]["matrix"] == [[1.0, 0.0], [0.0, 1.0]]
    assert saved["tables"][0]["rows"][0][1] == [0.9, 0.01]


def test_rules_decide_and_missing_values_do_not_hold():
    assert at_least(20, "x").holds(20.0) and not at_least(20).holds(19.99)
    assert at_most(5).holds(5.0) and not at_most(5).holds(5.01)
    assert above(0).holds(0.001) and not above(0).holds(0.0)
    assert below(0.7).holds(0.69) and not below(0.7).holds(0.7)
    assert at_least(20, "x").text() == ">= 20x"
    assert at_least(1).holds(None) is None and at_least(1).holds(float("nan")) is None
    with pytest.raises(ValueError, match="op: expected one of"):
        Rule("=>", 1.0)
    with pytest.raises(ValueError, match="threshold: expected a finite number"):
        Rule(">=", float("inf"))
    verdict = Pattern("k", "claim", "paper", "measure", at_least(1.0)).judge(float("nan"))
    assert verdict.holds is False and verdict.ours is None and "not computable" in verdict.detail


def test_judge_keeps_the_headline_patterns_in_quick_runs_and_checks_its_inputs():
    declared = [
        Pattern("a", "headline", "p", "m", at_least(0.5), headline=True),
        Pattern("b", "full only", "p", "m", at_least(0.5)),
    ]
    full = judge(declared, {"a": (0.9, "why"), "b": 0.1}, quick=False)
    assert [(v.key, v.holds) for v in full] == [("a", True), ("b", False)] and full[0].detail == "why"
    assert [v.key for v in judge(declared, {"a": 0.9}, quick=True)] == ["a"]
    with pytest.raises(KeyError, match="no value for pattern 'b'"):
        judge(declared, {"a": 0.9}, quick=False)
    with pytest.raises(ValueError, match="keys must be unique"):
        judge([declared[0], declared[0]], {"a": 1.0}, quick=False)


def test_report_shows_each_verdict_once_from_its_declaration(tmp_path):
    declared = [Pattern("a", "A beats B", "0.9 vs 0.1", "A - B", at_least(0.2, " points"), headline=True)]
    report = Report(
        name="toy",
        title="Toy",
        paper="Someone",
        setting={},
        patterns=judge(declared, {"a": (0.1, "A 0.5, B 0.4")}, quick=True),
        figures={"a plot": str(tmp_path / "sub" / "plot.png")},
        quick=True,
    )
    assert [v.claim for v in report.headline_failures] == ["A beats B"]
    report.write(tmp_path)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["kind"] == "reproduction" and saved["quick"] is True
    assert saved["figures"] == {"a plot": "plot.png"}  # next to results.json, wherever the run was made
    assert saved["patterns"][0] | {"detail": ""} == {
        "key": "a",
        "claim": "A beats B",
        "paper": "0.9 vs 0.1",
        "measure": "A - B",
        "rule": ">= 0.2 points",
        "ours": 0.1,
        "holds": False,
        "detail": "",
        "headline": True,
    }
    markdown = (tmp_path / "results.md").read_text()
    assert "| ★ A beats B | 0.9 vs 0.1 | A - B: 0.1 | >= 0.2 points | DOES NOT HOLD |" in markdown
    assert "quick run: 0 of 1 headline patterns hold" in markdown


def test_a_smoke_test_judges_nothing():
    with pytest.raises(ValueError, match="a smoke test judges no pattern"):
        Report("toy", "Toy", "p", {}, patterns=[Pattern("a", "c", "p", "m", at_least(0)).judge(1.0)], smoke=True)
    assert "smoke test only" in Report("toy", "Toy", "p", {}, smoke=True, quick=True).status()


def test_a_bar_inside_a_markdown_cell_does_not_split_it():
    markdown = ResultTable("t", ["|a - b|", "x"], [["|0.1|", 1.0]]).markdown()
    assert "| \\|a - b\\| | x |" in markdown and "| \\|0.1\\| | 1.000 |" in markdown
