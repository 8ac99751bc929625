"""`latentstitch migrate plan|fit|certify|refit|apply` end to end on a FAISS index, and its user errors: one line naming
the option or file, exit code 2, nothing written over the old index."""

from __future__ import annotations

import json

import numpy as np
import pytest

faiss = pytest.importorskip("faiss", reason="faiss-cpu is not installed (pip install 'latentstitch[faiss]')")

from latentstitch.cli import main  # noqa: E402
from latentstitch.migrate import load_plan, open_store  # noqa: E402
from latentstitch.migrate.stores import fingerprint  # noqa: E402


@pytest.fixture(scope="module")
def workspace(corpus, tmp_path_factory):
    """An old FAISS index of the corpus, a plan, and the plan's documents embedded by the new model."""
    folder = tmp_path_factory.mktemp("migrate-cli")
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(corpus.old.shape[1]))
    index.add_with_ids(corpus.old, corpus.ids)
    faiss.write_index(index, str(folder / "old.index"))
    assert (
        main(
            [
                "migrate",
                "plan",
                str(folder / "old.index"),
                "--budget",
                "0.25",
                "--strategy",
                "random",
                "-o",
                str(folder / "plan.csv"),
            ]
        )
        == 0
    )
    fit_ids, holdout_ids = load_plan(folder / "plan.csv")
    ids = np.concatenate([fit_ids, holdout_ids]).astype(np.int64)
    np.savez(folder / "sample.npz", embeddings=corpus.new_of(ids), id=ids)
    return folder


def test_fit_certify_apply_end_to_end(workspace, capsys):
    w = workspace
    assert (
        main(
            [
                "migrate",
                "fit",
                str(w / "old.index"),
                str(w / "sample.npz"),
                "--plan",
                str(w / "plan.csv"),
                "--folds",
                "3",
                "-o",
                str(w / "migration.json"),
                "--quiet",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "held-out MRR@10" in out
    assert "labelled queries (--queries-relevant) give the curve" in out  # the library's queries_relevant=
    assert (
        main(
            [
                "migrate",
                "certify",
                str(w / "migration.json"),
                str(w / "old.index"),
                str(w / "sample.npz"),
                "--plan",
                str(w / "plan.csv"),
                "--threshold",
                "0.5",
                "-o",
                str(w / "certificate.json"),
                "--quiet",
            ]
        )
        == 0
    )
    certificate = json.loads((w / "certificate.json").read_text())
    assert certificate["kind"] == "migration" and certificate["figures"]
    assert all((w / name).exists() for name in certificate["figures"].values())
    assert main(["report", str(w), "-o", str(w / "report.html")]) == 0
    page = (w / "report.html").read_text()
    assert "Index migrations" in page and "Migration certificate: old.index" in page
    migration = json.loads((w / "migration.json").read_text())
    # once certified, refit on every re-embedded item: a new migration file that says so and is applied
    refit = ["migrate", "refit", str(w / "migration.json"), str(w / "old.index"), str(w / "sample.npz")]
    assert main([*refit, "-o", str(w / "final.json"), "--quiet"]) == 0
    out = capsys.readouterr().out
    sample_size = len(np.load(w / "sample.npz")["id"])
    final = json.loads((w / "final.json").read_text())
    assert final["refitted"] == {
        "n_sample": sample_size,
        "n_queries": 0,
        "certified_n_sample": migration["n_sample"],
    }
    assert migration["n_sample"] < sample_size and final["n_sample"] == sample_size
    assert final["mode"] == migration["mode"] and final["routes"] == migration["routes"]
    assert final["index"] == migration["index"] and final["holdout_ids"] == []
    assert f"on all {sample_size} re-embedded items" in out and f"fitted on {migration['n_sample']}, before" in out
    certify = ["migrate", "certify", str(w / "final.json"), str(w / "old.index"), str(w / "sample.npz")]
    err = _error(capsys, [*certify, "--plan", str(w / "plan.csv"), "-o", str(w / "c2.json")])
    assert "MIGRATION: it was refitted after certification on all" in err
    before = fingerprint(w / "old.index")
    code = main(
        [
            "migrate",
            "apply",
            str(w / "final.json"),
            str(w / "old.index"),
            "-o",
            str(w / "new.index"),
            "--sample",
            str(w / "sample.npz"),
            "--quiet",
        ]
    )
    if migration["mode"] == "query":
        assert code == 2 and "query-side" in capsys.readouterr().err
    else:
        assert code == 0 and open_store(w / "new.index").dimension == 12
    assert fingerprint(w / "old.index") == before


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_user_errors_are_one_line(workspace, corpus, tmp_path, capsys):
    w = workspace
    # a sample that names documents deleted from the index
    np.savez(tmp_path / "deleted.npz", embeddings=corpus.new[:20], id=np.arange(20) + 10**6)
    err = _error(
        capsys, ["migrate", "fit", str(w / "old.index"), str(tmp_path / "deleted.npz"), "-o", str(tmp_path / "m.json")]
    )
    assert "SAMPLE: 20 of 20 ids are not in the index" in err
    # duplicated ids in an index file
    np.savez(tmp_path / "dup.npz", embeddings=corpus.old[:20], id=np.zeros(20, dtype=np.int64))
    err = _error(
        capsys,
        [
            "migrate",
            "plan",
            str(tmp_path / "dup.npz"),
            "--id-column",
            "id",
            "--budget",
            "5",
            "-o",
            str(tmp_path / "p.csv"),
        ],
    )
    assert "INDEX:" in err and "duplicated ids" in err
    # a truncated index file
    (tmp_path / "cut.index").write_bytes((w / "old.index").read_bytes()[:500])
    err = _error(
        capsys, ["migrate", "plan", str(tmp_path / "cut.index"), "--budget", "5", "-o", str(tmp_path / "p.csv")]
    )
    assert "INDEX:" in err and "truncated" in err
    # a budget larger than the index
    err = _error(capsys, ["migrate", "plan", str(w / "old.index"), "--budget", "100000", "-o", str(tmp_path / "p.csv")])
    assert "--budget:" in err
    # the output may not be the index
    err = _error(capsys, ["migrate", "plan", str(w / "old.index"), "--budget", "5", "-o", str(w / "old.index")])
    assert "--output" in err and "INDEX" in err
    # refit: on another index than the one fitted, or with a sample of documents not in the index
    other = tmp_path / "other.index"
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(corpus.old.shape[1]))
    index.add_with_ids(corpus.old[:-1], corpus.ids[:-1])
    faiss.write_index(index, str(other))
    if not (w / "migration.json").exists():  # the end-to-end test writes it; alone, this test fits it
        fit = ["migrate", "fit", str(w / "old.index"), str(w / "sample.npz"), "--plan", str(w / "plan.csv")]
        assert main([*fit, "--folds", "3", "-o", str(w / "migration.json"), "--quiet"]) == 0
    refit = ["migrate", "refit", str(w / "migration.json")]
    err = _error(capsys, [*refit, str(other), str(w / "sample.npz"), "-o", str(tmp_path / "f.json")])
    assert "INDEX:" in err and "is not the index this migration was fitted on" in err
    err = _error(capsys, [*refit, str(w / "old.index"), str(tmp_path / "deleted.npz"), "-o", str(tmp_path / "f.json")])
    assert "SAMPLE: 20 of 20 ids are not in the index" in err
    err = _error(capsys, [*refit, str(w / "old.index"), str(w / "sample.npz"), "-o", str(w / "migration.json")])
    assert "--output" in err and "MIGRATION" in err
    # a local cluster and an existing one at once
    cluster = ["-o", str(tmp_path / "n.index"), "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"]
    err = _error(capsys, ["migrate", "apply", str(w / "plan.csv"), str(w / "old.index"), *cluster])
    assert "error: --workers and --scheduler: give one (a local cluster of N workers, or an existing one)" in err
