"""Every reproduction runs end to end in its --quick form and writes an honest report."""

import json

import pytest

from latentstitch.cli import main
from latentstitch.experiments.reproduce import REPRODUCTIONS, load


def test_list_shows_every_reproduction(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for name in REPRODUCTIONS:
        assert name in out


def test_unknown_reproduction_is_named():
    with pytest.raises(ValueError, match="NAME: unknown reproduction 'nope'"):
        load("nope")


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(REPRODUCTIONS))
def test_quick_reproduction_writes_its_report(name, tmp_path):
    assert main(["reproduce", name, "--quick", "--quiet", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["tables"] and results["expectations"] and results["differences"]
    markdown = (tmp_path / "results.md").read_text()
    assert "## How this differs from the paper" in markdown and "## Expected pattern" in markdown
    for path in results["figures"].values():
        assert (tmp_path / path.split("/")[-1]).stat().st_size > 5_000
