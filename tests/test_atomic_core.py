"""The write protocol (``latentstitch._core.atomic``): a writer that fails half-way leaves its destination as it
was, for every format and every writer of the library; same-file detection by device and inode; names read from a
folder's manifest stay inside the folder."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from latentstitch._core import atomic
from latentstitch._core.atomic import (
    PARTIAL_MARK,
    PendingFile,
    append_text,
    atomic_path,
    inside_folder,
    refuse_inputs,
    same_file,
    write_text,
)
from latentstitch.embeddings import WRITABLE, EmbeddingWriter, open_embeddings, write_embeddings

pytest.importorskip("pyarrow", reason="needs pip install 'latentstitch[files]'")


def _partials(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if PARTIAL_MARK in p.name]


class Stop(Exception):
    pass


@pytest.mark.parametrize("error", [Stop, KeyboardInterrupt])
def test_a_block_that_fails_leaves_the_destination_as_it_was(tmp_path, error):
    target = tmp_path / "out.json"
    write_text(target, "old")
    with pytest.raises(error), atomic_path(target) as temporary:
        temporary.write_text("half")
        raise error()
    assert target.read_text() == "old" and not _partials(tmp_path)
    with atomic_path(target) as temporary:
        assert temporary.parent == tmp_path and temporary.name.startswith(".out" + PARTIAL_MARK)
        temporary.write_text("new")
    assert target.read_text() == "new" and not _partials(tmp_path)


def test_errors_name_the_option(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"--output: folder .*missing.* does not exist"):
        write_text(tmp_path / "missing" / "x.json", "{}", option="--output")
    with (
        pytest.raises(FileNotFoundError, match="--output: nothing was written"),
        atomic_path(tmp_path / "x.json", option="--output"),
    ):
        pass
    assert not (tmp_path / "x.json").exists()


def test_a_pending_file_is_committed_or_discarded_whole(tmp_path):
    target = tmp_path / "a.bin"
    target.write_bytes(b"old")
    pending = PendingFile(target)
    pending.path.write_bytes(b"half")
    pending.discard()
    assert target.read_bytes() == b"old" and not _partials(tmp_path)
    pending = PendingFile(target)
    pending.path.write_bytes(b"new")
    assert pending.commit() == target and target.read_bytes() == b"new"


def test_append_text_keeps_what_was_there(tmp_path):
    log = tmp_path / "log.jsonl"
    append_text(log, "1\n")
    append_text(log, "2\n")
    assert log.read_text() == "1\n2\n"


def test_same_file_compares_device_and_inode(tmp_path):
    original = tmp_path / "a.npy"
    original.write_bytes(b"x")
    twin = tmp_path / "twin.npy"
    twin.write_bytes(b"x")  # equal content, another file
    (tmp_path / "link.npy").symlink_to(original)
    os.link(original, tmp_path / "hard.npy")
    assert same_file(original, tmp_path / "link.npy") and same_file(original, tmp_path / "hard.npy")
    (tmp_path / "sub").mkdir()
    assert same_file(original, tmp_path / "sub" / ".." / "a.npy")
    assert not same_file(original, twin)
    assert not same_file(tmp_path / "new.npy", original) and same_file(tmp_path / "new.npy", tmp_path / "new.npy")
    same = r"^--json: .*hard.npy.* is the same file as the input A \(.*a.npy'\); choose another output path$"
    with pytest.raises(ValueError, match=same):
        refuse_inputs({"--json": tmp_path / "hard.npy"}, {"A": original})
    with pytest.raises(ValueError, match=r"^--json: .* is also -o; give each output its own path$"):
        refuse_inputs({"-o": tmp_path / "b.json", "--json": tmp_path / "b.json"}, {"A": original})
    refuse_inputs({"-o": tmp_path / "b.json", "--json": None}, {"A": original, "B": None})


def test_names_from_a_manifest_stay_inside_the_folder(tmp_path):
    folder = tmp_path / "data"
    (folder / "train").mkdir(parents=True)
    (tmp_path / "outside.arrow").write_bytes(b"secret")
    manifest = folder / "state.json"
    assert inside_folder(folder, "train/x.arrow", manifest=manifest) == folder / "train" / "x.arrow"
    assert inside_folder(folder, "train/../y.arrow", manifest=manifest) == folder / "train" / ".." / "y.arrow"
    for name in ("../outside.arrow", str(tmp_path / "outside.arrow"), "train/../../outside.arrow", ".", ""):
        with pytest.raises(ValueError, match="state.json"):
            inside_folder(folder, name, manifest=manifest)
    for name in (None, 3, ["a"]):
        with pytest.raises(ValueError, match="is not a file name"):
            inside_folder(folder, name, manifest=manifest)
    (folder / "link.arrow").symlink_to(tmp_path / "outside.arrow")
    with pytest.raises(ValueError, match=r"the entry 'link.arrow' leads outside the folder"):
        inside_folder(folder, "link.arrow", manifest=manifest)


@given(
    suffix=st.sampled_from(WRITABLE),
    rows=st.integers(2, 40),
    fail_after=st.integers(0, 3),
    earlier=st.booleans(),
    interrupt=st.booleans(),
)
def test_an_embedding_writer_that_fails_half_way_leaves_the_destination_as_it_was(
    suffix, rows, fail_after, earlier, interrupt
):
    vectors = np.random.default_rng(rows).standard_normal((rows, 3)).astype(np.float32)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        target = folder / f"out{suffix}"
        before = write_embeddings(target, vectors[:1] + 7).read_bytes() if earlier else None
        error = KeyboardInterrupt if interrupt else Stop
        with pytest.raises(error), EmbeddingWriter(target, rows, 3) as writer:
            for start in range(0, min(fail_after, rows)):
                writer.write(vectors[start : start + 1])
            raise error()
        assert (target.read_bytes() if target.exists() else None) == before
        assert not _partials(folder)
        with EmbeddingWriter(target, rows, 3) as writer:  # the same writer, let finish: the whole file
            for start in range(0, rows, 7):
                writer.write(vectors[start : start + 7])
        np.testing.assert_allclose(open_embeddings(target).read(), vectors, rtol=1e-6)
        assert not _partials(folder)


def test_a_writer_that_stops_early_writes_nothing(tmp_path):
    target = tmp_path / "out.npy"
    with pytest.raises(ValueError, match=r"--output: wrote 2 of 5 rows"):
        with EmbeddingWriter(target, 5, 3, option="--output") as writer:
            writer.write(np.zeros((2, 3)))
    assert not target.exists() and not _partials(tmp_path)


def _writers(folder: Path) -> dict:
    """Every kind of file the library writes, as ``name -> (path, write(version))``."""
    from latentstitch._core.figures import pyplot, save_figure
    from latentstitch._core.tables import write_json
    from latentstitch.report import write_report
    from latentstitch.similarity import heatmap
    from latentstitch.stitching import LeastSquares, save_stitching_layer
    from latentstitch.training import save_checkpoint

    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 4))

    def figure(version: int):
        plt = pyplot()
        drawn = plt.figure()
        drawn.gca().plot([0, version])
        return save_figure(drawn, folder / "plot.png")

    def report(version: int):
        (folder / "results" / "run").mkdir(parents=True, exist_ok=True)
        write_json({"kind": "compare", "title": f"v{version}", "tables": []}, folder / "results" / "run" / "r.json")
        return write_report(folder / "results", folder / "report.html")

    return {
        "estimator": (folder / "s.safetensors", lambda v: LeastSquares().fit(x, x * v).save(folder / "s.safetensors")),
        "json": (folder / "t.json", lambda v: write_json({"v": v}, folder / "t.json")),
        "figure": (folder / "plot.png", figure),
        "heatmap": (folder / "h.png", lambda v: heatmap(np.eye(2) * v, folder / "h.png")),
        "report": (folder / "report.html", report),
        "layer": (
            folder / "layer.safetensors",
            lambda v: save_stitching_layer(torch.nn.Linear(2, 2 + v), folder / "layer.safetensors"),
        ),
        "checkpoint": (
            folder / "ckpt" / "model.safetensors",
            lambda v: save_checkpoint(folder / "ckpt", torch.nn.Linear(2, 2 + v), metadata={"v": v}),
        ),
        **{
            f"embeddings{suffix}": (
                folder / f"e{suffix}",
                lambda v, s=suffix: write_embeddings(folder / f"e{s}", x * v),
            )
            for suffix in WRITABLE
        },
    }


def _embeddings(path: Path, x: np.ndarray) -> tuple:
    return path, lambda version: write_embeddings(path, x * version)


def test_every_writer_of_the_library_leaves_the_old_file_when_the_last_step_fails(tmp_path, monkeypatch):
    """The rename is the last step of every write: make it fail and no file is half replaced."""
    writers = _writers(tmp_path)
    for path, write in writers.values():
        write(1)
        assert path.exists()
    before = {name: path.read_bytes() for name, (path, _) in writers.items()}

    def fail(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", fail)
    for name, (path, write) in writers.items():
        with pytest.raises(OSError, match="disk full"):
            write(2)
        assert path.read_bytes() == before[name], name
    leftovers = [p for p in tmp_path.rglob("*") if PARTIAL_MARK in p.name]
    assert not leftovers


def test_a_symlinked_destination_is_written_through_and_permissions_are_kept(tmp_path):
    (tmp_path / "runs").mkdir()
    real = tmp_path / "runs" / "v3.json"
    write_text(real, "old")
    real.chmod(0o640)
    (tmp_path / "current.json").symlink_to(real)
    write_text(tmp_path / "current.json", "new")
    assert (tmp_path / "current.json").is_symlink() and real.read_text() == "new"
    assert real.stat().st_mode & 0o777 == 0o640
    assert not _partials(tmp_path) and not _partials(tmp_path / "runs")


def test_a_stale_partial_of_the_same_output_is_removed_and_a_live_or_unknown_one_kept(tmp_path):
    """The embedding writer first removes the partial files of its destination whose writer (a process of this
    machine, named in the file name) no longer runs, each with a one-line warning; it keeps a running writer's
    file silently, reports one it cannot check (another machine, an older name without a process), and leaves
    other outputs' partial files alone."""
    import subprocess
    import sys
    import warnings

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # its process id is free now: a writer that was killed
    host = atomic._host()
    output = tmp_path / "bridged.npy"
    planted = {
        "stale": tmp_path / f".bridged{PARTIAL_MARK}{host}-{ended.pid}-0123abcd.npy",
        "live": tmp_path / f".bridged{PARTIAL_MARK}{host}-{os.getppid()}-4567abcd.npy",  # pytest's parent runs
        "elsewhere": tmp_path / f".bridged{PARTIAL_MARK}abcdef-{ended.pid}-89abcdef.npy",
        "older": tmp_path / f".bridged{PARTIAL_MARK}00ff00ff.npy",
        "other output": tmp_path / f".other{PARTIAL_MARK}{host}-{ended.pid}-0123abcd.npy",
    }
    if host == "abcdef":
        pytest.skip("this machine's name hashes to the planted foreign host")
    for path in planted.values():
        path.write_bytes(b"\0" * 3000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_embeddings(output, np.ones((4, 3), dtype=np.float32))
    assert np.array_equal(np.load(output), np.ones((4, 3), dtype=np.float32))
    assert {name for name, path in planted.items() if not path.exists()} == {"stale"}
    messages = [str(w.message) for w in caught]
    assert len(messages) == 3, messages
    assert (
        f"path: removed {str(planted['stale'])!r} (3000 bytes), the partial output of an earlier run (process "
        f"{ended.pid}) that stopped before it finished bridged.npy"
    ) in messages
    assert any(
        f"{planted['elsewhere'].name}' (3000 bytes) is the partial output of an earlier run on another "
        "machine that may have stopped" in m
        for m in messages
    )
    assert any(
        f"{planted['older'].name}' (3000 bytes) is the partial output of an earlier run that may" in m for m in messages
    )
    # a new partial file names this machine and process, so the next writer can check it
    assert atomic.partial_path(output).name.startswith(f".bridged{PARTIAL_MARK}{host}-{os.getpid()}-")
