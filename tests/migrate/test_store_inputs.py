"""An input store is never written: every file of every input folder hashed before and after reading it (plan),
applying from it, and opening it with a wrong kind (refused by its markers before any engine opens it); outputs
inside an input store folder, also through a symlink, are refused, and an output that is the store itself is
refused for that cause. Chroma 1.x metrics set by ``configuration=`` are read."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import numpy as np
import pytest

from latentstitch.cli import main
from latentstitch.migrate import StoreError, apply_migration, open_store
from latentstitch.migrate.stores import KINDS

from .test_stores import STORES, build_lancedb


def tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (names and contents)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def fresh_engines() -> None:
    """Forget the clients this process holds (Chroma caches one per folder: a new run opens the folder anew)."""
    import importlib.util

    if importlib.util.find_spec("chromadb") is not None:
        from chromadb.api.client import SharedSystemClient

        SharedSystemClient.clear_system_cache()


@pytest.fixture
def built(request, corpus, tmp_path):
    kind, name, build = request.param
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    path = build(inputs / name, corpus.ids, corpus.old)
    fresh_engines()
    return kind, path, inputs


def _params():
    return [pytest.param(p.values, marks=p.marks, id=p.values[0]) for p in STORES]


@pytest.mark.integration
@pytest.mark.parametrize("built", _params(), indirect=True)
def test_planning_applying_and_wrong_kinds_never_write_the_input_store(built, fitted, tmp_path, capsys):
    kind, path, inputs = built
    before = tree(inputs)
    out = tmp_path / "out"
    out.mkdir()
    assert (
        main(["migrate", "plan", str(path), "--budget", "0.2", "--strategy", "random", "-o", str(out / "p.csv")]) == 0
    )
    assert tree(inputs) == before, "plan wrote into the input store"
    _, migration = fitted
    migration = copy.copy(migration)
    migration.mode = "corpus"
    saved = migration.save(out / "migration.json")
    store = open_store(path)
    try:
        name = "new" + (".index" if kind == "faiss" else ".db" if kind == "milvus" else "")
        apply_migration(migration, saved, store, out / name, chunk_rows=250)
    finally:
        store.close()
    fresh_engines()
    assert tree(inputs) == before, "apply wrote into the input store"
    for other in KINDS:
        if other != kind and not (kind == "faiss" and other == "file"):
            with pytest.raises(StoreError, match=rf"INDEX: .* is not .*; it looks like .*\(kind '{kind}'\)"):
                open_store(path, kind=other, option="INDEX")
            fresh_engines()
    assert tree(inputs) == before, "opening with a wrong kind wrote into the input folder"
    if path.is_dir():
        link = tmp_path / "link"
        link.symlink_to(path, target_is_directory=True)
        for target in (path / "plan.csv", link / "plan.csv"):
            code = main(["migrate", "plan", str(path), "--budget", "0.2", "-o", str(target)])
            assert code == 2 and "is inside the input folder INDEX" in capsys.readouterr().err
        with pytest.raises(ValueError, match="output: .* is inside the input folder store"):
            apply_migration(migration, saved, open_store(path), link / "new", chunk_rows=250)
        with pytest.raises(ValueError, match="^output: .* is the same file as the input store"):
            apply_migration(migration, saved, open_store(path), link, chunk_rows=250)
        code = main(["migrate", "apply", str(saved), str(path), "-o", str(path)])
        assert code == 2 and "is the input INDEX" in capsys.readouterr().err
    fresh_engines()
    assert tree(inputs) == before


@pytest.mark.integration
def test_a_chroma_collection_configured_for_cosine_is_read_as_cosine(tmp_path):
    chromadb = pytest.importorskip("chromadb")
    client = chromadb.PersistentClient(
        path=str(tmp_path / "c"), settings=chromadb.config.Settings(anonymized_telemetry=False)
    )
    vectors = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
    collection = client.create_collection("docs", configuration={"hnsw": {"space": "cosine"}})
    collection.add(ids=[str(i) for i in range(20)], embeddings=vectors)
    fresh_engines()
    store = open_store(tmp_path / "c")
    assert store.metric == "cosine"
    store.close()


@pytest.mark.integration
def test_a_lancedb_table_of_raw_vectors_is_read_as_l2_lancedbs_default_and_says_so(tmp_path):
    lancedb = pytest.importorskip("lancedb")
    raw = 3 * np.random.default_rng(0).normal(size=(30, 4)).astype(np.float32)
    build_lancedb(tmp_path / "db", np.arange(30), raw)
    with pytest.warns(UserWarning, match="metric: .* l2 is assumed, LanceDB's default search metric"):
        store = open_store(tmp_path / "db")
    assert store.metric == "l2"
    # what the table's own search ranks by, unless told otherwise
    found = lancedb.connect(str(tmp_path / "db")).open_table("docs").search(raw[0] + 0.1).limit(5).to_arrow()
    assert found.column("id").to_pylist() == store.search(raw[:1] + 0.1, 5)[0].tolist()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert open_store(tmp_path / "db", metric="ip").metric == "ip"
