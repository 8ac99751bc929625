"""``python -m benchmarks``: every benchmark's own options parse, and a wrong option is named."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import main


def test_help_lists_every_benchmarks_options(capsys):
    # bridge_fit and gpu both declare --device (cpu and cuda by default): --help once crashed on the clash
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for usage in ("benchmarks bridge_fit [--device", "benchmarks gpu [--device", "benchmarks migration [--seeds"):
        assert usage in out


def test_an_option_no_benchmark_named_declares_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["bridge_fit", "--rows", "5"])  # --rows belongs to migration and layer_similarity, not bridge_fit
    assert stop.value.code == 2
    assert "--rows" in capsys.readouterr().err
