"""One process at a time in a work folder: an exclusive advisory lock on a file inside it (``fcntl.flock`` on POSIX,
``msvcrt.locking`` on Windows). The operating system releases the lock when its process ends in any way (exit, an
error, Ctrl-C, ``kill -9``), so a lock left by a dead process is never in the way: the next run finds the lock file
unlocked and takes it. A second process that finds the lock held is refused at once (``FolderBusy``), never made
to wait without a word.

The lock file holds the holder's process id and start time, for the refusal's message."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path


class FolderBusy(OSError):
    """Another live process holds the lock; the message names what it is doing."""


def _try_lock(descriptor: int) -> bool:
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        try:
            msvcrt.locking(descriptor, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _holder(path: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid, started = path.read_text(encoding="utf-8").split()[:2]
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(started)))
        return f"process {int(pid)}, started {when}"
    return "another process"


@contextlib.contextmanager
def hold_lock(path: str | os.PathLike, busy: str, wait: float = 0.0) -> Iterator[None]:
    """Hold the exclusive lock on the file ``path`` (created when missing; its folder made again when its last holder
    removed it) for the block. Raises ``FolderBusy`` with ``busy`` and the holder (``"... (process 123, started
    ...)"``) when a live process holds it, at once or, with ``wait`` (seconds), once it has held it that long (short
    writers that take turns: the cascade's write-back)."""
    path = Path(os.fspath(path))
    deadline = time.monotonic() + wait
    for _ in range(10):
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # its last holder removed the folder as this process came to it
            path.parent.mkdir(exist_ok=True)
            continue
        while not _try_lock(descriptor):
            if time.monotonic() >= deadline:
                os.close(descriptor)
                raise FolderBusy(f"{busy} ({_holder(path)})")
            time.sleep(0.005)
        try:
            same = os.path.samestat(os.fstat(descriptor), os.stat(path))
        except OSError:  # the holder removed the file as we locked it
            same = False
        if same:
            break
        os.close(descriptor)  # locked a file its last holder had removed: lock the one at the path now
    else:
        raise FolderBusy(f"{busy} (its lock file keeps being replaced)")
    try:
        # the holder, for a busy message: one fixed-width record over whatever the last holder wrote (no truncate: a
        # truncation is a metadata write the cascade's write-back paid on every search)
        os.pwrite(descriptor, f"{os.getpid():>12} {time.time():>14.0f}\n".encode(), 0)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock
