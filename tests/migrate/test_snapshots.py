"""A killed run's private snapshot copy of a store (Chroma, Qdrant local, Milvus Lite are opened from one) is removed
by the next run; a live process's copy, another machine's or an older version's never is."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from latentstitch._core.atomic import process_tag
from latentstitch.migrate.stores import open_store
from latentstitch.migrate.stores._protocol import SNAPSHOT_PREFIX, clear_stale_snapshots

KILLED = """
import os, signal, sys
from latentstitch.migrate.stores import open_store
store = open_store(sys.argv[1])
copy = store.snapshot()
print(copy.parent, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_runs_snapshot_is_removed_by_the_next_one_and_nothing_else_is(tmp_path, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    index = tmp_path / "index.npy"
    np.save(index, np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32))
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run([sys.executable, "-c", KILLED, str(index)], env=env, capture_output=True, text=True)
    assert run.returncode == -9, run.stderr
    left = Path(run.stdout.strip())
    assert left.parent == temp and any(left.iterdir())  # what a SIGKILL leaves behind: the copy

    host, pid = process_tag().split("-")
    others = [
        temp / f"{SNAPSHOT_PREFIX}{host}-{pid}-live",  # this process: running
        temp / f"{SNAPSHOT_PREFIX}{'0' * 6 if host != '0' * 6 else '1' * 6}-{pid}-x",  # another machine
        temp / f"{SNAPSHOT_PREFIX}abcd1234",  # an older version's name: no process in it
    ]
    for folder in others:
        folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    store = open_store(index)
    copy = store.snapshot()
    assert not left.exists()
    assert all(folder.exists() for folder in others)
    assert copy.exists() and copy.parent.name.startswith(f"{SNAPSHOT_PREFIX}{process_tag()}-")
    store.close()
    assert not copy.parent.exists()
    assert clear_stale_snapshots(temp) == []  # nothing else is anyone's to remove
