"""apply loses nothing: every index type and id kind is written, a resume trusts only chunks whose bytes it can
verify and only when given what the interrupted run was given, and one run at a time writes an output (a second is
refused at once; a killed run's lock is taken over). Real runs: the CLI in subprocesses, stopped and killed."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from latentstitch.migrate import apply_migration, open_store, work_folder
from latentstitch.migrate.stores import fingerprint

from .test_apply import Interrupting, expected
from .test_stores import STORES, needs

ROOT = Path(__file__).resolve().parents[2]


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def test_apply_from_an_ivf_index_writes_an_ivf_index_of_the_bridged_vectors(saved, corpus, tmp_path):
    faiss = pytest.importorskip("faiss")
    plan, migration, path = saved
    quantizer = faiss.IndexFlatIP(corpus.old.shape[1])
    index = faiss.IndexIVFFlat(quantizer, corpus.old.shape[1], 4, faiss.METRIC_INNER_PRODUCT)
    index.train(corpus.old)
    index.add_with_ids(corpus.old, corpus.ids)
    faiss.write_index(index, str(tmp_path / "old.index"))
    sample = {"sample_ids": plan.ids, "sample_new": corpus.new_of(plan.ids)}
    apply_migration(
        migration, path, open_store(tmp_path / "old.index"), tmp_path / "new.index", chunk_rows=100, **sample
    )
    new = open_store(tmp_path / "new.index")
    assert new.header["type"] == "ivf" and new.count == len(corpus.ids) and new.metric == "cosine"
    ids, vectors = new.read()
    rows = np.searchsorted(corpus.ids, ids)
    np.testing.assert_array_equal(corpus.ids[rows], ids)
    assert len(np.unique(ids)) == len(corpus.ids)
    np.testing.assert_allclose(vectors, expected(migration, corpus, plan)[rows], atol=1e-6)


def _string_ids(n: int) -> list[str]:
    # the ids a real table holds: any alphabet, commas, slashes, quotes, long ones
    kinds = ["doc-{}", "Übersetzung/{}", "a,b;{}", "文書{}", "q\"{}'", "x" * 300 + "{}"]
    return [kinds[i % len(kinds)].format(i) for i in range(n)]


def test_apply_from_a_parquet_table_with_string_ids_keeps_every_id_also_when_resumed(saved, corpus, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    plan, migration, path = saved
    ids = _string_ids(len(corpus.ids))
    table = pa.table({"id": ids, "embeddings": pa.FixedSizeListArray.from_arrays(pa.array(corpus.old.reshape(-1)), 16)})
    pq.write_table(table, tmp_path / "old.parquet")
    rows = np.searchsorted(corpus.ids, plan.ids)
    sample = {"sample_ids": [ids[r] for r in rows], "sample_new": corpus.new_of(plan.ids)}
    source = tmp_path / "old.parquet"
    with pytest.raises(KeyboardInterrupt):
        apply_migration(
            migration, path, Interrupting(open_store(source, id_column="id"), 3), tmp_path / "new.parquet",
            chunk_rows=100, **sample,
        )  # fmt: skip
    resumed = apply_migration(
        migration, path, open_store(source, id_column="id"), tmp_path / "new.parquet", chunk_rows=100, **sample
    )
    assert resumed.resumed_chunks == 3
    back_ids, back = open_store(tmp_path / "new.parquet", id_column="id").read()
    assert back_ids.tolist() == ids
    np.testing.assert_allclose(back, expected(migration, corpus, plan), atol=1e-6)


@pytest.mark.parametrize("name", ["new.npy", "new.parquet"])
def test_a_resume_bridges_again_the_chunks_whose_bytes_changed(saved, corpus, tmp_path, name):
    """The issue's case: the work folder's output was lost (a concurrent run took it), its manifest kept: the
    resume must not trust those chunks (it wrote all-zero vectors)."""
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    store = open_store(tmp_path / "old.npy")
    whole = apply_migration(migration, path, store, tmp_path / f"whole-{name}", chunk_rows=100, kind="file")
    with pytest.raises(KeyboardInterrupt):
        apply_migration(migration, path, Interrupting(store, 4), tmp_path / name, chunk_rows=100, kind="file")
    work = work_folder(tmp_path / name)
    if name.endswith(".npy"):
        (work / "out.npy").unlink()  # the in-place output is gone: a resume would open a fresh, zero one
        kept = 0
    else:
        chunk = np.load(work / "chunk-000001.npy")
        np.save(work / "chunk-000001.npy", np.zeros_like(chunk))  # one chunk's bytes overwritten
        (work / "ids-000002.npy").unlink()  # one chunk's ids lost
        kept = 2
    resumed = apply_migration(migration, path, store, tmp_path / name, chunk_rows=100, kind="file")
    assert resumed.resumed_chunks == kept
    one, two = open_store(whole.output).read(), open_store(resumed.output).read()
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    assert np.all(np.linalg.norm(two[1], axis=1) > 0.5)


def test_a_resume_given_another_sample_or_kind_is_refused(saved, corpus, tmp_path):
    plan, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    store = open_store(tmp_path / "old.npy")
    sample = {"sample_ids": np.searchsorted(corpus.ids, plan.ids), "sample_new": corpus.new_of(plan.ids)}
    with pytest.raises(KeyboardInterrupt):
        apply_migration(migration, path, Interrupting(store, 2), tmp_path / "new.npy", chunk_rows=100, **sample)
    with pytest.raises(ValueError, match=r"partial apply .* made with another re-embedded sample"):
        apply_migration(migration, path, store, tmp_path / "new.npy", chunk_rows=100)
    other = {**sample, "sample_new": sample["sample_new"][::-1].copy()}
    with pytest.raises(ValueError, match=r"made with another re-embedded sample"):
        apply_migration(migration, path, store, tmp_path / "new.npy", chunk_rows=100, **other)
    with pytest.raises(ValueError, match=r"made with another chunk size \(chunk_rows\)"):
        apply_migration(migration, path, store, tmp_path / "new.npy", chunk_rows=50, **sample)
    result = apply_migration(migration, path, store, tmp_path / "new.npy", chunk_rows=100, **sample)
    assert result.resumed_chunks == 2


def test_an_apply_to_an_output_another_holds_is_refused_naming_it(saved, corpus, tmp_path):
    from latentstitch._core.locks import FolderBusy, hold_lock

    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    work = work_folder(tmp_path / "new.npy")
    work.mkdir()
    with hold_lock(work / "lock", "held"):
        holder = rf"\(process {os.getpid()}, started \d{{4}}-\d\d-\d\d "  # the holder read back from the lock
        with pytest.raises(FolderBusy, match=rf"output: '.*new.npy' is being written by another apply .*{holder}"):
            apply_migration(migration, path, open_store(tmp_path / "old.npy"), tmp_path / "new.npy", chunk_rows=100)
    assert not (tmp_path / "new.npy").exists()


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "latentstitch", "migrate", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}


@pytest.mark.integration
def test_racing_and_killed_cli_applies_refuse_the_second_and_resume_the_killed(saved, corpus, tmp_path):
    """A real run is stopped mid-way (SIGSTOP: it holds the output), a second run to the same output is refused in
    one line; the first is then killed (SIGKILL: its lock dies with it) and a third run resumes its chunks and
    writes the same bytes as an uninterrupted run. The old index is never written."""
    _, migration, path = saved
    old = corpus.old
    np.save(tmp_path / "old.npy", old)
    before = fingerprint(tmp_path / "old.npy")
    apply_migration(migration, path, open_store(tmp_path / "old.npy"), tmp_path / "whole.npy", chunk_rows=4)
    args = _cli("apply", str(path), str(tmp_path / "old.npy"), "-o", str(tmp_path / "new.npy"), "--chunk-rows", "4")
    first = subprocess.Popen([*args, "--quiet"], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    manifest = work_folder(tmp_path / "new.npy") / "manifest.json"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and first.poll() is None:
            try:
                if len(json.loads(manifest.read_text())["done"]) >= 3:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.02)
        assert first.poll() is None, first.communicate()
        first.send_signal(signal.SIGSTOP)
        second = subprocess.run([*args, "--quiet"], env=_env(), capture_output=True, text=True, timeout=240)
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in second.stderr
        assert str(tmp_path / "new.npy") in lines[0] and "being written by another apply" in lines[0]
    finally:
        first.kill()
        first.wait()
    done = len(json.loads(manifest.read_text())["done"])
    assert not (tmp_path / "new.npy").exists() and done >= 3
    third = subprocess.run([*args, "--quiet"], env=_env(), capture_output=True, text=True, timeout=240)
    assert third.returncode == 0, third.stderr
    assert f"{done} chunks resumed" in third.stdout
    assert (tmp_path / "new.npy").read_bytes() == (tmp_path / "whole.npy").read_bytes()
    assert fingerprint(tmp_path / "old.npy") == before
    assert not work_folder(tmp_path / "new.npy").exists()


def _build_npy(path, ids, vectors):
    np.save(path, vectors)  # its ids are its row numbers
    return path


def _build_parquet(path, ids, vectors):
    import pyarrow as pa
    import pyarrow.parquet as pq

    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
    pq.write_table(pa.table({"embeddings": column} if ids is None else {"id": ids, "embeddings": column}), path)
    return path


#: Every output kind apply writes: (kind, source name, its builder, output name), each from a store of its kind.
OUTPUTS = [
    pytest.param("file", "old.npy", _build_npy, "new.npy", id="npy"),
    pytest.param("file", "old.parquet", _build_parquet, "new.parquet", id="parquet", marks=needs("pyarrow")),
    *[
        pytest.param(kind, source, build, out, id=kind, marks=param.marks)
        for param, out in zip(STORES, ["new.index", "new_lance", "new_chroma", "new_qdrant", "new.db"], strict=True)
        for kind, source, build in [param.values]
    ],
]


def _read_sorted(path):
    store = open_store(path)
    try:
        ids, vectors = store.read()
    finally:
        store.close()
    ids = ids.astype(np.int64)  # Chroma's ids are text
    order = np.argsort(ids)
    return ids[order], vectors[order]


@pytest.mark.integration
@pytest.mark.parametrize(("kind", "source", "build", "out"), OUTPUTS)
def test_an_interrupted_apply_resumes_into_every_output_kind_and_never_writes_its_input(
    saved, corpus, tmp_path, kind, source, build, out
):
    """Each store kind into its own kind: a run stopped after 2 of 6 chunks is resumed (a database output used to
    be created before the first chunk: the resume then failed on the collection the interrupted run had created)
    and writes what an uninterrupted run writes; the input store's files are never changed."""
    _, migration, path = saved
    ids = np.arange(len(corpus.old)) if source.endswith(".npy") else corpus.ids
    build(tmp_path / source, ids, corpus.old)
    before = fingerprint(tmp_path / source)
    with pytest.raises(KeyboardInterrupt):
        apply_migration(
            migration, path, Interrupting(open_store(tmp_path / source), 2), tmp_path / out, chunk_rows=100, kind=kind
        )
    assert fingerprint(tmp_path / source) == before and not (tmp_path / out).exists()
    resumed = apply_migration(migration, path, open_store(tmp_path / source), tmp_path / out, chunk_rows=100, kind=kind)
    assert resumed.resumed_chunks == 2 and resumed.chunks == 6
    assert fingerprint(tmp_path / source) == before
    got_ids, got = _read_sorted(tmp_path / out)
    np.testing.assert_array_equal(got_ids, ids)
    np.testing.assert_allclose(got, migration.transform_corpus(corpus.old), atol=1e-5)
    assert not work_folder(tmp_path / out).exists()


@pytest.mark.parametrize(("kind", "source", "build", "out"), OUTPUTS)
def test_an_apply_to_an_output_another_run_holds_is_refused_on_every_output_kind(
    saved, corpus, tmp_path, kind, source, build, out
):
    """Two applies to one output, each kind: the second is refused at once, writes nothing, and leaves the first
    run's work folder and the input store as they were."""
    from latentstitch._core.locks import FolderBusy, hold_lock

    _, migration, path = saved
    build(tmp_path / source, np.arange(len(corpus.old)) if source.endswith(".npy") else corpus.ids, corpus.old)
    before = fingerprint(tmp_path / source)
    work = work_folder(tmp_path / out)
    work.mkdir()
    (work / "manifest.json").write_text("{}")  # the first run's
    with hold_lock(work / "lock", "held"):
        store = open_store(tmp_path / source)
        try:
            with pytest.raises(FolderBusy, match=r"being written by another apply"):
                apply_migration(migration, path, store, tmp_path / out, chunk_rows=100, kind=kind)
        finally:
            store.close()
    assert not (tmp_path / out).exists() and (work / "manifest.json").read_text() == "{}"
    assert sorted(p.name for p in work.iterdir()) == ["lock", "manifest.json"]
    assert fingerprint(tmp_path / source) == before
