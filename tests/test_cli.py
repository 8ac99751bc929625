"""The command line: every command has help, and the demo shows the stitching pattern end to end."""

import argparse
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
        (["layers", "e5-small", "minilm-l6"], "A: e5-small runs in a C engine"),
        (["layers", "minilm-l6", "efficientnet-lite0"], "A, B:"),
        (["layers", "minilm-l6", "minilm-l6", "--measures", "rbf_cka"], "--measures"),
        (["layers", "minilm-l6", "minilm-l6", "--data", "no-such.txt"], "--data"),
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


# --- the command line answers at once: no torch, scikit-learn, scipy or matplotlib before a command's work starts --
HEAVY = ("torch", "sklearn", "scipy", "matplotlib", "pandas", "pyarrow", "rich")


def _imported_modules(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``python -X importtime -m latentstitch ARGS`` (the console script's own path) and list what it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "latentstitch", *args], capture_output=True, text=True
    )
    names = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return done, names


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        *[[name, "--help"] for name in sorted(COMMANDS)],
        ["bridge", "fit", "--help"],
        ["bridge", "apply", "--help"],
        ["demo", "--epochs", "0"],  # a bad option value
        ["demo", "--seeds", "1", "1"],
        ["compare", "no-such-a.npy", "no-such-b.npy"],  # a missing input file
        ["bridge", "apply", "no-such-bridge.safetensors", "new.npy", "-o", "out.npy"],
        ["reproduce", "no-such-reproduction"],
        ["report", "no-such-folder"],
        ["layers", "use-m3", "minilm-l6"],
        ["layers", "minilm-l6", "minilm-l6", "--data", "no-such.txt"],
    ],
    ids=" ".join,
)
def test_help_and_user_errors_import_none_of_the_heavy_libraries(args, tmp_path):
    done, names = _imported_modules(*args)
    assert done.returncode in (0, 2), done.stderr[-2000:]
    assert "latentstitch.cli" in names  # the listing works
    heavy = sorted(name for name in names if name.split(".")[0] in HEAVY)
    assert not heavy, f"`latentstitch {' '.join(args)}` imported {heavy[:8]}"
    library = sorted(n for n in names if n.startswith("latentstitch.") and n.split(".")[1] not in ("cli", "_version"))
    assert library in ([], ["latentstitch.experiments", "latentstitch.experiments.registry"]), library


def test_the_list_of_reproductions_imports_none_of_them():
    done, names = _imported_modules("reproduce", "--list")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "word-embeddings" in done.stdout
    assert not sorted(name for name in names if name.split(".")[0] in ("torch", "sklearn", "scipy", "matplotlib"))
    from latentstitch.experiments.registry import REPRODUCTIONS

    packages = tuple(REPRODUCTIONS.values())
    imported = sorted(n for n in names if n.startswith(packages))
    assert not imported, imported


def test_the_seed_limit_of_the_options_is_the_library_s():
    from latentstitch._core.params import MAX_SEED
    from latentstitch.cli import options

    assert options.MAX_SEED == MAX_SEED


def test_demo_writes_to_latentstitch_results_not_the_committed_results_folder():
    from pathlib import Path

    from latentstitch.experiments.demo import run_demo

    args = build_parser().parse_args(["demo"])
    assert args.out == Path("latentstitch-results") / "demo"
    assert run_demo.__kwdefaults__["out_dir"] == args.out


# --- library warnings during a command: one line each, in the command's own wording --------------------------------
def test_a_library_warning_is_one_line_naming_the_command(monkeypatch, capsys):
    import types
    import warnings

    module = types.ModuleType("toy_command")
    module.HELP = "toy"

    def add_arguments(parser):
        parser.add_argument("--twice", action="store_true")

    def run(args):
        for _ in range(2 if args.twice else 1):
            warnings.warn("the anchors span\n  a rank-3 subspace", RuntimeWarning, stacklevel=1)  # same place: once
        warnings.warn("another warning", UserWarning, stacklevel=1)
        return 0

    module.add_arguments, module.main = add_arguments, run
    monkeypatch.setitem(sys.modules, "toy_command", module)
    monkeypatch.setitem(COMMANDS, "toy", "toy_command")
    previous = warnings.showwarning
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        assert main(["toy", "--twice"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "latentstitch toy: warning: the anchors span a rank-3 subspace",
        "latentstitch toy: warning: another warning",
    ]
    assert warnings.showwarning is previous  # restored after the command


def test_a_missing_optional_extra_is_one_line_naming_the_pip_command(tmp_path, monkeypatch, capsys):
    (tmp_path / "a.csv").write_text("dim_0\n1\n2\n")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if pyarrow were not installed
    monkeypatch.setitem(sys.modules, "pyarrow.csv", None)
    assert main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "a.csv"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'latentstitch[files]'" in err[0] and err[0].startswith("latentstitch compare")


def test_the_library_s_argument_names_become_the_options_typed():
    from latentstitch.cli.options import UsageError, option_errors, translate

    table = {"key": "--key", "id_column": "--id-column", "x": "A", "y": "B"}
    assert translate("x, y: 3 samples; say which with key=", table) == "A, B: 3 samples; say which with --key"
    assert (
        translate("id_column: no column (given by id_column=)", table)
        == "--id-column: no column (given by --id-column)"
    )
    # only the arguments the library names are rewritten: words, file names and other options stay as they are
    untouched = "path: 'key=1/id_column.npz' holds no key for x (use --key or monkey=); Bridge(key='a')"
    assert translate(untouched, table) == untouched
    for raised, expected in [("id_column: bad", "--sample-id-column: bad"), ("x: bad", "A: bad")]:
        with pytest.raises(UsageError, match=f"^{expected}$"), option_errors(table):
            with option_errors({"id_column": "--sample-id-column"}):  # an inner table (one call's) comes first
                raise ValueError(raised)
    with pytest.raises(ValueError, match="^other: bad$") as left:
        with option_errors(table):
            raise ValueError("other: bad")
    assert not isinstance(left.value, UsageError)  # nothing to translate: the library's error as it was


def _choices(command: list[str], option: str) -> tuple:
    parser = build_parser()
    for name in command:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return tuple(next(a for a in parser._actions if option in a.option_strings).choices)


def test_the_cli_s_vocabularies_are_the_library_s():
    """The command line keeps copies of the library's names (so that --help and option errors import nothing heavy):
    each option offers exactly what the library accepts."""
    from latentstitch import bridge, migrate
    from latentstitch.cli.layers import HOOKABLE, MEASURES, NOT_HOOKABLE
    from latentstitch.encoders import ENCODERS
    from latentstitch.similarity import LAYER_MEASURES, layer_similarity

    for action in ("plan", "fit", "certify", "refit", "apply"):
        assert _choices(["migrate", action], "--kind") == tuple(migrate.KINDS)
        assert _choices(["migrate", action], "--metric") == tuple(migrate.METRICS)
    assert _choices(["migrate", "apply"], "--output-kind") == tuple(migrate.KINDS)
    assert _choices(["migrate", "plan"], "--strategy") == tuple(migrate.STRATEGIES)
    assert _choices(["bridge", "fit"], "--consumer") == tuple(bridge.CONSUMERS)
    assert _choices(["layers"], "--pooling") == tuple(sys.modules[layer_similarity.__module__].POOLINGS)
    assert MEASURES == tuple(LAYER_MEASURES)
    assert set(HOOKABLE) | set(NOT_HOOKABLE) <= set(ENCODERS)  # packaged encoders, by the registry's names


def test_a_reproduction_s_checkpoint_error_names_the_option(tmp_path, monkeypatch, capsys):
    """The checkpoint speaks Python (``resume``, tests/test_frankenstein_resume.py); the command line says --resume."""
    from latentstitch.experiments import reproduce

    def refuse(*args, **kwargs):
        raise ValueError("resume: the checkpoint in 'x' was made with other settings; start over without resume=")

    monkeypatch.setattr(reproduce, "run_reproductions", refuse)
    assert main(["reproduce", "frankenstein", "--resume", "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("latentstitch reproduce: error: --resume: the checkpoint in 'x'") and err.count("\n") == 0
    assert "start over without --resume (--debug" in err and "resume=" not in err
