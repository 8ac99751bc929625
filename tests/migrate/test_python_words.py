"""The library's errors name its Python arguments (``output``, ``path``, ``collection=``), never the command line's
options; ``latentstitch migrate`` translates them (``cli/options.translate`` with ``_migrate_steps.OPTIONS``) and
prints the option it was given, in one line with exit code 2."""

from __future__ import annotations

import errno

import numpy as np
import pytest

from latentstitch.cli import main
from latentstitch.migrate import apply_migration, load_plan, open_store, plan_sample, save_plan

from .test_stores import build_lancedb


def cli_error(capsys, argv: list[str]) -> str:
    """The message of the one line ``latentstitch migrate ...`` printed for its user error (exit code 2)."""
    code = main(["migrate", *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    prefix, suffix = "latentstitch migrate: error: ", " (--debug shows the traceback)"
    assert err.startswith(prefix) and err.endswith(suffix), err
    return err[len(prefix) : -len(suffix)]


def test_a_plan_written_with_another_suffix_names_path_in_python_and_output_in_the_cli(corpus, tmp_path, capsys):
    plan = plan_sample(corpus.ids[:100], corpus.old[:100], 10, strategy="random")
    with pytest.raises(ValueError, match=r"^path: a plan is written as \.csv or \.parquet"):
        save_plan(plan, tmp_path / "plan.txt")
    np.save(tmp_path / "old.npy", corpus.old[:100])
    argv = ["plan", str(tmp_path / "old.npy"), "--budget", "10", "--strategy", "random", "-o", str(tmp_path / "p.txt")]
    assert cli_error(capsys, argv).startswith("--output: a plan is written as .csv or .parquet")


def test_a_damaged_plan_names_path_in_python_and_plan_in_the_cli(corpus, tmp_path, capsys):
    (tmp_path / "plan.csv").write_text("name,kind\n1,fit\n")
    with pytest.raises(ValueError, match=r"^path: .*plan\.csv' is not a plan written by save_plan"):
        load_plan(tmp_path / "plan.csv")
    np.save(tmp_path / "old.npy", corpus.old[:100])
    np.savez(tmp_path / "sample.npz", embeddings=corpus.new[:20], id=np.arange(20))
    argv = ["fit", str(tmp_path / "old.npy"), str(tmp_path / "sample.npz"), "--plan", str(tmp_path / "plan.csv")]
    err = cli_error(capsys, [*argv, "-o", str(tmp_path / "m.json")])
    assert err.startswith("--plan: ") and "is not a plan written by save_plan" in err


def test_an_existing_output_names_output_in_python_and_the_option_in_the_cli(saved, corpus, tmp_path, capsys):
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    (tmp_path / "new.npy").write_bytes(b"kept")
    with pytest.raises(FileExistsError, match=r"^output: .*new\.npy' exists; apply writes a new collection"):
        apply_migration(migration, path, open_store(tmp_path / "old.npy"), tmp_path / "new.npy")
    err = cli_error(capsys, ["apply", str(path), str(tmp_path / "old.npy"), "-o", str(tmp_path / "new.npy")])
    assert err.startswith("--output: ") and "exists; apply writes a new collection" in err
    assert (tmp_path / "new.npy").read_bytes() == b"kept"


def test_an_output_that_is_an_input_names_the_python_arguments(saved, corpus, tmp_path):
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    store = open_store(tmp_path / "old.npy")
    with pytest.raises(ValueError, match=r"^output: .*old\.npy' is the input store; choose another output path"):
        apply_migration(migration, path, store, tmp_path / "old.npy")
    with pytest.raises(ValueError, match=r"^output: .*migration\.json' is the input migration_path"):
        apply_migration(migration, path, store, path, kind="file")


def test_an_unknown_output_kind_names_kind(saved, corpus, tmp_path):
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    with pytest.raises(ValueError, match=r"^kind: unknown store kind 'nope'; expected one of file, faiss"):
        apply_migration(migration, path, open_store(tmp_path / "old.npy"), tmp_path / "new.npy", kind="nope")


def test_the_learning_curves_hint_names_queries_relevant_in_python(fitted):
    _, migration = fitted
    words = migration.learning_words()
    assert "labelled queries (queries_relevant=)" in words and "--" not in words


def test_a_lancedb_folder_names_collection_and_id_column_in_python_and_their_options_in_the_cli(
    corpus, tmp_path, capsys
):
    lancedb = pytest.importorskip("lancedb")
    build_lancedb(tmp_path / "db", corpus.ids[:50], corpus.old[:50])
    lancedb.connect(str(tmp_path / "db")).create_table("more", data=[{"id": 1, "vector": corpus.old[0].tolist()}])
    with pytest.raises(ValueError, match=r"holds 2 tables/collections \(docs, more\); name one with collection=$"):
        open_store(tmp_path / "db")
    with pytest.raises(ValueError, match=r"has no id column 'key' \(id_column=\)$"):
        open_store(tmp_path / "db", collection="docs", id_column="key")
    plan = ["plan", str(tmp_path / "db"), "--budget", "5", "--strategy", "random", "-o", str(tmp_path / "p.csv")]
    assert cli_error(capsys, plan).endswith("name one with --collection")
    err = cli_error(capsys, [*plan, "--collection", "docs", "--id-column", "key"])
    assert err.startswith("INDEX: ") and err.endswith("has no id column 'key' (--id-column)")


def test_the_cli_translates_an_oserror_naming_an_argument_and_leaves_the_systems_own():
    from latentstitch.cli.options import UsageError, option_errors

    with pytest.raises(UsageError, match=r"^--output: the disk is full after 2 of 6 chunks$"):
        with option_errors({"output": "--output"}):
            raise OSError(errno.ENOSPC, "output: the disk is full after 2 of 6 chunks")
    with pytest.raises(PermissionError, match="Permission denied"):
        with option_errors({"output": "--output"}):
            raise PermissionError(errno.EACCES, "Permission denied", "output")
