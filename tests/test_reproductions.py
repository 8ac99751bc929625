"""The `reproduce` command: where it writes, what it refuses to overwrite, and --all / --check.

The reproductions themselves run in CI's separate quick step (`latentstitch reproduce --all --quick --check` in
.ci/run, after the test suite): each quick run is a small but real experiment of a minute or two, which would take
this suite over its time budget. Here they are replaced by toy reproductions with the same interface.
"""

import inspect
import json
import sys
import types

import pytest

from latentstitch.cli import main
from latentstitch.experiments import registry
from latentstitch.experiments._report import Pattern, Report, at_least, judge
from latentstitch.experiments._run import Reproduction, chosen
from latentstitch.experiments.registry import REPRODUCTIONS, help_line, load


def _toy(name: str, *, holds: bool = True, fails: bool = False, calls: list | None = None) -> types.ModuleType:
    """A reproduction module: one headline pattern that holds or not, or a run that raises."""
    module = types.ModuleType(f"toy_reproduction_{name}")
    module.HELP, module.PAPER = f"toy {name}", "Toy et al."

    def run(*, quick, out_dir, progress):
        if calls is not None:
            calls.append((name, quick, str(out_dir)))
        if fails:
            raise RuntimeError("the toy broke")
        declared = [Pattern("a", "A beats B", "0.9 vs 0.1", "A - B", at_least(0.5), headline=True)]
        return Report(
            name=name,
            title=f"Toy {name}",
            paper="Toy et al.",
            setting={},
            patterns=judge(declared, {"a": 0.8 if holds else 0.1}, quick=quick),
            quick=quick,
        )

    module.run = run
    return module


@pytest.fixture
def toys(monkeypatch, tmp_path):
    """Replace the registry with toy reproductions, in a fresh working folder."""
    monkeypatch.chdir(tmp_path)
    calls: list = []
    modules = {
        "good": _toy("good", calls=calls),
        "bad": _toy("bad", holds=False, calls=calls),
        "broken": _toy("broken", fails=True, calls=calls),
    }
    monkeypatch.setattr(registry, "REPRODUCTIONS", {name: m.__name__ for name, m in modules.items()})
    for module in modules.values():
        monkeypatch.setitem(sys.modules, module.__name__, module)
    return calls


def test_list_shows_every_reproduction(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for name in REPRODUCTIONS:
        assert name in out


def test_unknown_reproduction_is_named():
    with pytest.raises(ValueError, match="name: unknown reproduction 'nope'"):
        load("nope")


def test_every_reproduction_is_a_package_with_help_paper_and_run():
    for name in REPRODUCTIONS:
        module = load(name)
        assert module.HELP and module.PAPER and callable(module.run), name
        assert module.__file__.endswith("__init__.py"), f"{name}: a folder per reproduction"
        assert help_line(name) == module.HELP, f"{name}: --list reads HELP from the source as a literal"


def _keywords(run) -> dict[str, object]:
    """``run``'s parameters as {name: default}; a parameter that is not keyword-only is named as such."""
    parameters = inspect.signature(run).parameters.values()
    return {p.name if p.kind is p.KEYWORD_ONLY else f"{p.name} ({p.kind.description})": p.default for p in parameters}


def test_every_reproduction_runs_with_the_protocols_keywords():
    """``reproduce`` calls ``run(quick=, out_dir=, progress=)`` plus ``resume=`` for RESUMABLE and ``device=`` for
    ON_DEVICE; ``config=None`` is the reproduction's QUICK or FULL. A run whose signature drifts fails here."""
    common = {name: p.default for name, p in inspect.signature(Reproduction.run).parameters.items() if name != "self"}
    assert common == {
        "quick": inspect.Parameter.empty,
        "out_dir": inspect.Parameter.empty,
        "progress": inspect.Parameter.empty,
        "config": None,
    }
    for name in REPRODUCTIONS:
        module = load(name)
        expected = dict(common)
        if name in registry.RESUMABLE:
            expected["resume"] = False
        if name in registry.ON_DEVICE:
            expected["device"] = "cpu"
        assert _keywords(module.run) == expected, name
        assert isinstance(module.HELP, str) and isinstance(module.PAPER, str), name


def test_chosen_is_the_given_config_else_quick_or_full():
    quick, full, given = object(), object(), object()
    assert chosen(True, None, quick, full) is quick
    assert chosen(False, None, quick, full) is full
    assert chosen(True, given, quick, full) is given and chosen(False, given, quick, full) is given


def test_a_run_writes_to_latentstitch_results_by_default(toys, tmp_path):
    assert main(["reproduce", "good", "--quick", "--quiet"]) == 0
    saved = json.loads((tmp_path / "latentstitch-results" / "good" / "results.json").read_text())
    assert saved["kind"] == "reproduction" and saved["quick"] is True
    assert saved["patterns"][0]["holds"] is True and saved["patterns"][0]["headline"] is True
    assert not (tmp_path / "results").exists()


def test_a_quick_run_never_replaces_a_full_run_by_accident(toys, tmp_path, capsys):
    committed = tmp_path / "results" / "good"
    committed.mkdir(parents=True)
    (committed / "results.json").write_text(json.dumps({"kind": "reproduction", "quick": False, "title": "full"}))
    assert main(["reproduce", "good", "--quick", "--out", str(committed)]) == 2
    assert "holds the results of a full run" in capsys.readouterr().err
    assert toys == []  # refused before any work
    assert json.loads((committed / "results.json").read_text())["title"] == "full"
    assert main(["reproduce", "good", "--quick", "--quiet", "--out", str(committed), "--overwrite"]) == 0
    assert json.loads((committed / "results.json").read_text())["quick"] is True
    # a full run may replace a full run: that is how the committed results are made
    assert main(["reproduce", "good", "--quiet", "--out", str(committed)]) == 0


def test_all_runs_every_reproduction_and_check_fails_on_a_headline_miss(toys, tmp_path, capsys):
    assert main(["reproduce", "--all", "--quick", "--quiet", "--out", str(tmp_path / "q")]) == 0
    assert sorted(name for name, _, _ in toys) == ["bad", "broken", "good"]
    out = capsys.readouterr().out
    assert "HEADLINE PATTERN NOT HELD" in out and "FAILED: RuntimeError: the toy broke" in out
    assert (tmp_path / "q" / "good" / "results.json").is_file() and (tmp_path / "q" / "bad" / "results.json").is_file()
    assert main(["reproduce", "--all", "--quick", "--check", "--quiet", "--out", str(tmp_path / "q2")]) == 1
    assert main(["reproduce", "good", "--quick", "--check", "--quiet"]) == 0
    assert main(["reproduce", "bad", "--quick", "--check", "--quiet"]) == 1


def test_name_and_all_together_are_refused(toys, capsys):
    assert main(["reproduce", "good", "--all"]) == 2
    assert "NAME and --all" in capsys.readouterr().err
