"""Progress off a terminal: plain lines (percentage, time left) at most one every ``PLAIN_INTERVAL`` seconds, none
from a disabled bar or on a terminal, where rich draws the bar itself."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from rich.console import Console

from latentstitch._core import progress as progress_module
from latentstitch._core.progress import PLAIN_INTERVAL, new_progress

LINE = re.compile(r"^work: (\d+)% \((\d+)/100\), 0:\d\d:\d\d elapsed, about 0:\d\d:\d\d left$")


class Clock:
    """A clock the test moves by hand (rich's ``get_time``), so the intervals are exact."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run_steps(console: Console, clock: Clock, seconds_per_step: float, **options) -> None:
    with new_progress(console=console, get_time=clock, **options) as bar:
        task = bar.add_task("work", total=100)
        for _ in range(100):
            clock.now += seconds_per_step
            bar.advance(task)


def test_a_redirected_bar_writes_a_plain_line_every_interval_with_the_time_left():
    stream, clock = io.StringIO(), Clock()
    run_steps(Console(file=stream, width=200), clock, PLAIN_INTERVAL / 4, transient=True)
    lines = [line for line in stream.getvalue().splitlines() if line]  # rich ends a redirected bar with "\n"
    assert len(lines) == 24  # 25 intervals over the 100 steps, the first line after one; none after the last step
    percentages = [int(LINE.match(line).group(1)) for line in lines]
    assert percentages == list(range(4, 100, 4))  # one line per interval, never two
    assert lines[11] == "work: 48% (48/100), 0:01:00 elapsed, about 0:01:05 left"  # 52 steps left, 1.25 s each


def test_a_short_run_a_disabled_bar_and_a_terminal_print_no_plain_line():
    stream, clock = io.StringIO(), Clock()
    run_steps(Console(file=stream), clock, PLAIN_INTERVAL / 200, transient=True)  # done within one interval
    assert stream.getvalue().strip() == ""
    run_steps(Console(file=stream), clock, PLAIN_INTERVAL, disable=True)  # --quiet
    assert stream.getvalue().strip() == ""
    terminal = Console(file=stream, force_terminal=True, width=100)
    run_steps(terminal, clock, PLAIN_INTERVAL, transient=True)  # rich draws the bar: no plain lines beside it
    assert "about" not in stream.getvalue() and "%" not in stream.getvalue()


def test_a_library_run_with_progress_reports_on_a_captured_stdout(monkeypatch, capsys):
    """A real long run (a permutation test's shuffles) through ``progress=True``: with stdout captured (not a
    terminal) and a zero interval, each shuffle writes a plain line; with ``progress=False`` nothing."""
    from latentstitch.similarity import permutation_test

    monkeypatch.setattr(progress_module, "PLAIN_INTERVAL", 0.0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 5))
    y = x @ rng.standard_normal((5, 4))
    options = {"permutations": 20, "method": "loop", "batch_size": 1, "seed": 0}
    permutation_test(x, y, "procrustes_distance", progress=True, **options)
    lines = [line for line in capsys.readouterr().out.splitlines() if "% (" in line]
    assert len(lines) == 19 and all(re.search(r"\d+% \(\d+/20\), 0:00:\d\d elapsed", line) for line in lines)
    permutation_test(x, y, "procrustes_distance", progress=False, **options)
    assert "%" not in capsys.readouterr().out


@pytest.mark.parametrize("quiet", [False, True])
def test_compare_with_permutations_reports_on_a_redirected_stderr_unless_quiet(tmp_path, monkeypatch, capsys, quiet):
    from latentstitch.cli import main

    monkeypatch.setattr(progress_module, "PLAIN_INTERVAL", 0.0)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((60, 6)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", a @ rng.standard_normal((6, 6)).astype(np.float32))
    arguments = ["compare", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--permutations", "30"]
    assert main([*arguments, "--measures", "procrustes_distance", *(["--quiet"] if quiet else [])]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if re.search(r"\d+% \(\d+/\d+\)", line)]
    assert (lines == []) if quiet else len(lines) >= 2
