"""The data-safety suite of ``latentstitch migrate apply``: real runs of the CLI on every store the library reads and
writes (each engine embedded and real), raced and killed, every input file hashed before and after each run.

For each store: a run paused after a few chunks holds its output, and a second run to that output is refused in one
line (exit 2); the first, released, completes with the bridged vectors. With that output deleted (the issue's case:
a rerun after a race "resumed" chunks it never had and wrote all-zero vectors), a fresh run starts from nothing and
is killed (SIGKILL) mid-way; a resume without its re-embedded sample (--sample) is refused in one line; the same
command resumes the killed run's chunks (a store built from chunk files is killed once more as it is built, and
resumed again) and writes exactly what the uninterrupted run wrote. No run, killed or refused, changes a byte of the
input store.

The runs are `python -m latentstitch` in processes forked from one server that imported torch and the engines once
(``forked_cli``); each pauses at a named step (before the n-th manifest write, before a chunk file is read) so the
race and the kill happen at a known place, never after a sleep."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from rounding import assert_close_to_rounding

from latentstitch.migrate import work_folder
from latentstitch.migrate._retrieval import prepare
from latentstitch.migrate.stores import writes_in_place

from .forked_cli import ForkedCli
from .test_apply_safety import _build_npy, _build_parquet, _read_sorted
from .test_stores import build_chroma, build_faiss, build_lancedb, build_milvus, build_qdrant, needs

ROOT = Path(__file__).resolve().parents[2]
N, CHUNK, KILLED_AT = 240, 20, 4  # 12 chunks; runs are paused (raced, killed) with 4 chunks recorded
#: the pause: before the manifest records chunk KILLED_AT (the first write lists none)
PAUSE = {"event": "os.rename", "name": f"apply{os.sep}manifest.json", "count": KILLED_AT + 2}
#: a pause as the output is built from the chunk files (the first read of a chunk's file)
BUILDING = {"event": "open", "name": f"apply{os.sep}chunk-{KILLED_AT + 2:06d}.npy", "count": 1}
#: The engines a store's runs import (the server imports those of the tests collected).
ENGINES = {
    "old.parquet": ["pyarrow.parquet"],
    "old.index": ["faiss"],
    "old_ivf.index": ["faiss"],
    "old_lance": ["lancedb"],
    "old_chroma": ["chromadb"],
    "old_qdrant": ["qdrant_client"],
    "old.db": ["pymilvus", "milvus_lite"],
}


def build_ivf(path, ids, vectors):
    import faiss

    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(vectors.shape[1]), vectors.shape[1], 4, faiss.METRIC_INNER_PRODUCT)
    index.train(vectors)
    index.add_with_ids(vectors, ids)
    faiss.write_index(index, str(path))
    return path


#: Every store the library reads and writes: (source name, its builder, output name).
STORES = [
    pytest.param("old.npy", _build_npy, "new.npy", id="npy"),
    pytest.param("old.parquet", _build_parquet, "new.parquet", id="parquet", marks=needs("pyarrow")),
    pytest.param("old.index", build_faiss, "new.index", id="faiss-flat", marks=needs("faiss")),
    pytest.param("old_ivf.index", build_ivf, "new.index", id="faiss-ivf", marks=needs("faiss")),
    pytest.param("old_lance", build_lancedb, "new_lance", id="lancedb", marks=needs("lancedb")),
    pytest.param("old_chroma", build_chroma, "new_chroma", id="chroma", marks=needs("chromadb")),
    # the slowest store: 15 to 27 s a case on the loaded 2-core machine (its local mode writes points slowly)
    pytest.param(
        "old_qdrant", build_qdrant, "new_qdrant", id="qdrant", marks=[needs("qdrant_client"), pytest.mark.slow]
    ),
    pytest.param("old.db", build_milvus, "new.db", id="milvus", marks=[needs("pymilvus"), needs("milvus_lite")]),
]


@pytest.fixture(scope="module")
def cli(request, tmp_path_factory):
    """One server for the module's runs, with the engines of the stores collected; snapshots and temporary files of
    killed runs go to a folder of the test's."""
    temporary = tmp_path_factory.mktemp("tmpdir")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "TMPDIR": str(temporary)}
    sources = {
        item.callspec.params.get("source")
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    engines = dict.fromkeys(m for source in sorted(sources, key=str) for m in ENGINES.get(source, []))
    server = ForkedCli(env, [m for m in engines if importlib.util.find_spec(m.split(".")[0]) is not None])
    yield server
    server.close()


def files_of(path: Path) -> dict[str, str]:
    """Every file, folder and link under ``path`` (or ``path`` itself) by its relative name: the sha256 of a file's
    bytes, a link's target; a difference names the files that changed."""
    entries = [path, *sorted(path.rglob("*"))] if path.is_dir() else [path]
    found = {}
    for entry in entries:
        name = str(entry.relative_to(path)) if path.is_dir() else entry.name
        if entry.is_symlink():
            found[name] = "link to " + os.readlink(entry)
        elif entry.is_dir():
            found[name] = "folder"
        else:
            found[name] = hashlib.sha256(entry.read_bytes()).hexdigest()
    return found


def one_line_error(run, rc: int) -> str:
    out, err = run.output()
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (rc, out, err)
    return lines[0]


@pytest.mark.integration
@pytest.mark.parametrize(("source", "build", "out"), STORES)
def test_raced_killed_and_resumed_cli_applies_write_the_bridged_index_and_never_the_input(
    cli, saved, corpus, tmp_path, source, build, out
):
    plan, migration, path = saved
    rows_are_ids = source.endswith(".npy")  # a .npy store's ids are its row numbers
    ids = np.arange(N) if rows_are_ids else corpus.ids[:N]
    build(tmp_path / source, ids, corpus.old[:N])
    sampled = np.isin(corpus.ids[:N], plan.ids)
    sample_ids = ids[sampled]
    assert 10 < len(sample_ids) < N // 2
    np.savez(tmp_path / "sample.npz", embeddings=corpus.new_of(corpus.ids[:N][sampled]), id=sample_ids)
    output, work = tmp_path / out, work_folder(tmp_path / out)
    before = files_of(tmp_path / source)

    def apply(sample: str = "sample.npz", pause: dict | None = None):
        argv = ["migrate", "apply", str(path), source, "-o", out, "--chunk-rows", str(CHUNK), "--quiet"]
        return cli.start([*argv, "--sample", sample], tmp_path, pause)

    def input_unchanged(after: str) -> None:
        assert files_of(tmp_path / source) == before, f"the input store was written by {after}"

    # a race: a run paused with KILLED_AT chunks recorded holds the output; a second is refused at once
    first = apply(pause=PAUSE)
    cli.wait_paused(first)
    second = apply()
    line = one_line_error(second, cli.wait(second))
    assert "being written by another apply" in line and out in line
    input_unchanged("a refused run")
    assert len(json.loads((work / "manifest.json").read_text())["done"]) == KILLED_AT
    cli.release(first)
    assert cli.wait(first) == 0, first.output()
    input_unchanged("a run raced by another")
    assert not work.exists()
    whole_ids, whole = _read_sorted(output)
    np.testing.assert_array_equal(whole_ids, ids)  # ids ascending
    bridged = migration.transform_corpus(corpus.old[:N])
    bridged[sampled] = prepare(corpus.new_of(corpus.ids[:N][sampled]), "cosine").numpy()
    assert_close_to_rounding(whole, bridged, terms=migration.old_dimension)

    # the output deleted: a run starts afresh (nothing to resume) and is killed mid-way
    whole_file = files_of(output) if output.is_file() else None
    if output.is_dir():
        shutil.rmtree(output)
    else:
        output.unlink()
    killed = apply(pause=PAUSE)
    cli.wait_paused(killed)
    assert sorted(json.loads((work / "manifest.json").read_text())["done"], key=int) == [
        str(n) for n in range(KILLED_AT)
    ], "the fresh run trusted chunks it did not write"
    assert cli.kill(killed) < 0
    input_unchanged("a killed run")
    assert not output.exists()

    # a resume without the killed run's --sample (the case) is refused, naming it, and changes nothing
    manifest = (work / "manifest.json").read_bytes()
    refused = cli.start(["migrate", "apply", str(path), source, "-o", out, "--chunk-rows", str(CHUNK)], tmp_path)
    line = one_line_error(refused, cli.wait(refused))
    assert "partial apply" in line and "another re-embedded sample" in line, line
    input_unchanged("a refused resume")
    assert (work / "manifest.json").read_bytes() == manifest and not output.exists()

    # the same command resumes the killed run's chunks; a store built from chunk files is killed once more while it
    # is built (a database output then could not be resumed: "collection exists"), and resumed again
    chunks, recorded = -(-N // CHUNK), KILLED_AT
    if writes_in_place("file", output):  # a .npy output: every chunk written into it as it is bridged
        resumed = apply()
    else:
        resumed = apply(pause=BUILDING)
        cli.wait_paused(resumed)
        assert len(json.loads((work / "manifest.json").read_text())["done"]) == chunks
        assert cli.kill(resumed) < 0
        input_unchanged("a run killed as it built the output")
        assert not output.exists()
        resumed, recorded = apply(), chunks
    assert cli.wait(resumed) == 0, resumed.output()
    assert f"{recorded} chunks resumed" in resumed.output()[0], resumed.output()
    input_unchanged("a resumed run")
    got_ids, got = _read_sorted(output)
    np.testing.assert_array_equal(got_ids, whole_ids)
    np.testing.assert_array_equal(got, whole)  # the same chunks through the same kernel: the same bytes
    if whole_file is not None:  # a file store: the same file (a database folder holds its own ids and times)
        assert files_of(output) == whole_file
    assert not work.exists()


@pytest.mark.integration
@pytest.mark.parametrize(
    "pause",
    [
        pytest.param({"event": "open", "name": f"apply{os.sep}lock", "count": 1}, id="before-opening-the-lock"),
        pytest.param({"event": "fcntl.flock", "count": 1}, id="before-locking-the-opened-lock"),
    ],
)
def test_a_run_that_finds_the_output_finished_as_it_takes_the_lock_says_so_and_leaves_no_work_folder(
    cli, saved, corpus, tmp_path, pause
):
    """Two runs started together: the second stands between making the work folder and locking its lock file
    (before opening it, or with the file open) while the first completes and removes that folder (the second then
    failed on a lock file that was not there); it then reports the output the first wrote, in one line, and leaves
    nothing behind."""
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old[:N])
    before = files_of(tmp_path / "old.npy")
    argv = ["migrate", "apply", str(path), "old.npy", "-o", "new.npy", "--chunk-rows", str(CHUNK), "--quiet"]
    late = cli.start(argv, tmp_path, pause)
    cli.wait_paused(late)
    first = cli.start(argv, tmp_path)
    assert cli.wait(first) == 0, first.output()
    written = (tmp_path / "new.npy").read_bytes()
    cli.release(late)
    line = one_line_error(late, cli.wait(late))
    assert "'new.npy' exists; apply writes a new collection" in line, line
    assert (tmp_path / "new.npy").read_bytes() == written and files_of(tmp_path / "old.npy") == before
    assert sorted(p.name for p in tmp_path.iterdir() if "partial" in p.name) == []
    np.testing.assert_allclose(np.load(tmp_path / "new.npy"), migration.transform_corpus(corpus.old[:N]), atol=1e-5)
