"""The command line: every command has help, and the demo shows the stitching pattern end to end."""

import json
import subprocess
import sys

import pytest

from latentstitch.cli import COMMANDS, build_parser, main


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    assert "usage: latentstitch " + name in capsys.readouterr().out


def test_console_script_is_installed():
    done = subprocess.run([sys.executable, "-m", "latentstitch", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("latentstitch ")


def test_demo_rejects_equal_seeds(tmp_path):
    args = build_parser().parse_args(["demo", "--seeds", "3", "3", "--out", str(tmp_path), "--quiet"])
    with pytest.raises(ValueError, match="seeds: stitching needs two different seeds"):
        args._module.main(args)


@pytest.mark.slow
def test_demo_shows_relative_stitching_works_and_absolute_does_not(tmp_path, capsys):
    assert main(["demo", "--epochs", "3", "--out", str(tmp_path), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "stitched" in printed and str(tmp_path / "latent_spaces.png") in printed
    results = json.loads((tmp_path / "results.json").read_text())
    table = results["numbers"]["accuracy"]
    # The paper's pattern: absolute stitching falls to chance, relative stitching keeps most of the accuracy.
    assert table["absolute"]["non_stitched_mean"] > 0.85
    assert table["absolute"]["stitched_mean"] < 0.3
    assert table["relative"]["stitched_mean"] > 0.8 * table["relative"]["non_stitched_mean"]
    assert (tmp_path / "latent_spaces.png").stat().st_size > 10_000
    markdown = (tmp_path / "results.md").read_text()
    assert "| latent space | non-stitched | stitched |" in markdown and "latent_spaces.png" in markdown


def test_a_demo_too_short_or_untrained_to_mean_something_is_a_smoke_run_with_no_verdict():
    from latentstitch.experiments.demo import MIN_EPOCHS_FOR_VERDICT, TRAINED_ACCURACY, smoke_reasons

    assert smoke_reasons(MIN_EPOCHS_FOR_VERDICT, 0.94) == []
    assert smoke_reasons(1, 0.94) and smoke_reasons(0, 0.94)  # the claim is about trained models
    assert smoke_reasons(8, 0.1) and smoke_reasons(8, TRAINED_ACCURACY - 0.01)  # models that did not learn
    assert smoke_reasons(8, float("nan"))


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "latentstitch", *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["demo", "--epochs", "0"], "--epochs"),
        (["demo", "--threads", "x"], "--threads"),
        (["reproduce", "no-such-reproduction"], "NAME"),
        (["reproduce", "ae-stitching", "--workers", "-1"], "--workers"),
        (["no-such-command"], "invalid choice"),
    ],
)
def test_user_errors_are_one_line_with_exit_code_2(args, names):
    done = _run_cli(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and names in lines[0] and "Traceback" not in done.stderr


def test_unwritable_output_folder_fails_before_any_work(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    done = _run_cli("demo", "--out", str(blocker / "sub"), "--quiet")
    assert done.returncode == 2 and "--out" in done.stderr and "Traceback" not in done.stderr


def test_debug_shows_the_traceback():
    done = _run_cli("--debug", "reproduce", "no-such-reproduction")
    assert done.returncode != 0 and "Traceback" in done.stderr
