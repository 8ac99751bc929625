"""`latentstitch migrate search|status` on a FAISS index: the library's answer, NEW filled once, the cut-over said
once it holds every id, and user errors in one line naming the option, exit code 2."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

faiss = pytest.importorskip("faiss", reason="faiss-cpu is not installed (pip install 'latentstitch[faiss]')")

from latentstitch.cli import main  # noqa: E402
from latentstitch.migrate import open_store  # noqa: E402
from latentstitch.migrate.stores import fingerprint  # noqa: E402


@pytest.fixture
def workspace(corpus, fitted, tmp_path):
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(corpus.old.shape[1]))
    index.add_with_ids(corpus.old, corpus.ids)
    faiss.write_index(index, str(tmp_path / "old.index"))
    store = open_store(tmp_path / "old.index")
    copy.copy(fitted[1]).record_index(store).save(tmp_path / "migration.json")
    np.savez(tmp_path / "docs_new.npz", embeddings=corpus.new, id=corpus.ids)
    np.savez(tmp_path / "queries.npz", embeddings=corpus.queries_new[:20], id=corpus.ids[:20])
    np.save(tmp_path / "queries.npy", corpus.queries_new[:20])
    return tmp_path


def _search(w, *extra):
    return main(
        ["migrate", "search", str(w / "migration.json"), str(w / "old.index"), str(w / "new.index"),
         str(w / "queries.npy"), "--new-vectors", str(w / "docs_new.npz"), *extra]
    )  # fmt: skip


def test_search_answers_as_the_library_fills_new_once_and_says_when_to_cut_over(workspace, corpus, fitted, capsys):
    w = workspace
    before = fingerprint(w / "old.index")
    assert _search(w, "-k", "5", "--depth", "40", "-o", str(w / "results.json")) == 0
    results = json.loads((w / "results.json").read_text())
    assert results["written"] == results["candidates"] > 0
    expected = fitted[1].search(
        corpus.queries_new[:20], 5, store=open_store(w / "old.index"), new_store=w / "other.index", depth=40,
        new_vectors=corpus.new_of,
    )  # fmt: skip
    np.testing.assert_array_equal(np.asarray(results["ids"]), expected.ids)
    out = capsys.readouterr().out
    assert f"re-embedded: {results['candidates']} of 600 ids" in out and "complete" not in out
    assert _search(w, "-k", "5", "--depth", "40") == 0
    assert "0 embedded (0 written by this search)" in capsys.readouterr().out
    assert main(["migrate", "status", str(w / "migration.json"), str(w / "old.index"), str(w / "new.index")]) == 0
    out = capsys.readouterr().out
    assert f"{results['candidates']} of 600 ids" in out and "50.0% of the candidates looked up" in out
    assert _search(w, "-k", "5", "--depth", "40", "--old-store-only", "-o", str(w / "alone.json")) == 0
    alone = json.loads((w / "alone.json").read_text())
    assert alone["from_collection"] == 0 and alone["candidates"] <= results["candidates"]
    assert _search(w, "-k", "5", "--depth", "40", "--collection-search", "off", "-o", str(w / "off.json")) == 0
    assert json.loads((w / "off.json").read_text())["ids"] == alone["ids"]
    assert _search(w, "-k", "5", "--depth", "40", "--collection-search", "exact", "-o", str(w / "exact.json")) == 0
    assert _search(w, "-k", "5", "--depth", "40", "--collection-search", "lists", "-o", str(w / "lists.json")) == 0
    exact = json.loads((w / "exact.json").read_text())
    assert exact["written"] == 0  # nothing new: the two read the same NEW
    assert json.loads((w / "lists.json").read_text())["ids"] == exact["ids"]  # a NEW this small: every list read
    capsys.readouterr()
    assert _search(w, "--depth", "600") == 0  # every id recalled: NEW is whole
    assert "the new collection is complete: point your application at it" in capsys.readouterr().out
    assert fingerprint(w / "old.index") == before


def test_status_measures_the_cascade_by_depth_without_writing_new(workspace, capsys):
    w = workspace
    code = main(
        ["migrate", "status", str(w / "migration.json"), str(w / "old.index"), str(w / "new.index"),
         "--queries-new", str(w / "queries.npz"), "--queries-relevant", "id", "--depths", "10", "600",
         "--new-vectors", str(w / "docs_new.npz"), "-o", str(w / "status.json")]
    )  # fmt: skip
    assert code == 0
    payload = json.loads((w / "status.json").read_text())
    assert payload["status"]["present"] == 0  # measured, not written
    assert [row["depth"] for row in payload["depths"]] == [10, 600]
    assert payload["depths"][1]["candidates"] == 600 and payload["depths"][0]["candidates"] < 600
    assert payload["depths"][1]["recall@10"] >= payload["depths"][0]["recall@10"] - 1e-9


def test_user_errors_are_one_line_naming_the_option(workspace, corpus, capsys):
    w = workspace
    other = faiss.IndexIDMap2(faiss.IndexFlatIP(corpus.old.shape[1]))
    other.add_with_ids(corpus.old[::-1].copy(), corpus.ids)
    faiss.write_index(other, str(w / "other.index"))
    cases = [
        (["migrate", "search", str(w / "migration.json"), str(w / "other.index"), str(w / "new.index"),
          str(w / "queries.npy")], "INDEX: .* is not the index this migration was fitted on"),
        (["migrate", "search", str(w / "migration.json"), str(w / "old.index"), str(w / "new.index"),
          str(w / "queries.npy")], "--new-vectors or --documents: .* candidates have no new vector"),
        (["migrate", "search", str(w / "migration.json"), str(w / "old.index"), str(w / "old.index"),
          str(w / "queries.npy")], "NEW"),
        (["migrate", "search", str(w / "migration.json"), str(w / "old.index"), str(w / "new.index"),
          str(w / "queries.npy"), "-k", "20", "--depth", "10"], "--depth: expected at least k"),
        (["migrate", "search", str(w / "migration.json"), str(w / "old.index"), str(w / "new.index"),
          str(w / "queries.npy"), "--documents", str(w / "queries.npy")], "--documents: give --encoder"),
    ]  # fmt: skip
    import re

    for argv, pattern in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and re.search(pattern, err), err
    assert not (w / "new.index").exists()


def test_the_cli_lists_the_collection_kinds_the_library_has():
    from latentstitch.cli._migrate_search import COLLECTION_KINDS as listed
    from latentstitch.migrate import COLLECTION_KINDS

    assert listed == COLLECTION_KINDS
