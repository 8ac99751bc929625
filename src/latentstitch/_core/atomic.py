"""The one way a file is written: into a temporary file beside the destination, flushed and fsynced, then renamed
over it in one step (``os.replace``, atomic on POSIX and Windows within a folder). On any error, Ctrl-C or a kill,
the destination keeps its previous content (or still does not exist); two writers at once each produce a whole file
and the last rename wins. A temporary file left by a killed process is named ``.NAME.partial-HOST-PID-XXXX.SUFFIX``:
hidden, beside its destination, plainly partial, and saying which process wrote it (``HOST``: a short hash of the
machine's name), so that the next writer of the same destination that asks for it (``PendingFile(...,
clear_stale=True)``, as the embedding writer does) removes it once that process no longer runs, with a one-line
warning; a partial file whose writer cannot be checked (another machine, or an older name without a process) is
reported and kept.

``atomic_path`` is for a file written in one go; ``PendingFile`` for one written over time (a streaming writer: open
it, write ``.path`` chunk by chunk, then ``commit()`` or ``discard()``). ``tests/test_write_protocol.py`` checks that no
module of the package writes a file any other way.

``same_file`` / ``refuse_inputs`` keep outputs off the inputs of the same command: two paths are the same file when
they share device and inode (the same path, a symlink or a hard link); ``refuse_inside_inputs`` keeps them out of
input folders. ``inside_folder`` keeps the names a folder
format's manifest lists (``state.json``, an index) inside that folder."""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import os
import re
import secrets
import socket
import stat
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

PARTIAL_MARK = ".partial-"


@functools.cache
def _host() -> str:
    """Six hex digits naming this machine in a partial file's name (a process id means something only on its own)."""
    return hashlib.blake2s(socket.gethostname().encode("utf-8", "replace"), digest_size=3).hexdigest()


def partial_path(destination: Path) -> Path:
    """A fresh temporary path in ``destination``'s folder that keeps its suffix (writers that choose a format by
    suffix, such as numpy or matplotlib, still see it) and names the machine and process writing it."""
    tag = f"{_host()}-{os.getpid()}-{secrets.token_hex(4)}"
    return destination.with_name(f".{destination.stem}{PARTIAL_MARK}{tag}{destination.suffix}")


def _running(pid: int) -> bool:
    """Whether process ``pid`` of this machine exists (POSIX; elsewhere it is taken as running: never removed)."""
    if os.name != "posix" or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)  # signal 0: the existence check, nothing is sent
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it runs, as another user
        return True
    return True


def process_tag() -> str:
    """``HOST-PID``: this machine and process, for the names of temporary things another process may clean up once
    this one is gone (``gone``)."""
    return f"{_host()}-{os.getpid()}"


def gone(tag: str) -> bool:
    """Whether the process a ``process_tag()`` names has ended: it ran on this machine and no longer runs (a tag of
    another machine, or one that does not parse, is never taken as gone)."""
    host, _, pid = tag.partition("-")
    return host == _host() and pid.isdigit() and not _running(int(pid))


def _size(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        return "size unknown"
    return f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size} bytes"


def clear_stale_partials(destination: Path, option: str = "path") -> list[Path]:
    """Remove the partial files of ``destination`` (``.NAME.partial-HOST-PID-XXXX.SUFFIX`` beside it) left by a
    process of this machine that no longer runs, each with a one-line warning; returns the removed paths. A partial
    file of a running process (a writer at work now) is never touched; one whose process cannot be checked (written
    on another machine, or named without a process by an older version) is reported, not removed."""
    name = re.escape(destination.stem) + re.escape(PARTIAL_MARK)
    pattern = re.compile(rf"\.{name}(?:([0-9a-f]{{6}})-([0-9]+)-)?[0-9a-f]{{8}}{re.escape(destination.suffix)}")
    removed = []
    for path in sorted(destination.parent.glob(f".{glob.escape(destination.stem)}{PARTIAL_MARK}*")):
        match = pattern.fullmatch(path.name)
        if match is None or path.is_symlink() or not path.is_file():
            continue
        host, pid = match.group(1), match.group(2)
        if host == _host() and pid is not None and not _running(int(pid)):
            size = _size(path)
            try:
                path.unlink()
            except FileNotFoundError:  # another writer removed it first
                continue
            except OSError as error:
                warnings.warn(
                    f"{option}: cannot remove {str(path)!r} ({size}), the partial output of an earlier run (process "
                    f"{pid}) that stopped before it finished {destination.name}: {error.strerror}",
                    stacklevel=3,
                )
                continue
            removed.append(path)
            warnings.warn(
                f"{option}: removed {str(path)!r} ({size}), the partial output of an earlier run (process {pid}) "
                f"that stopped before it finished {destination.name}",
                stacklevel=3,
            )
        elif host != _host():
            where = "on another machine " if host is not None else ""
            warnings.warn(
                f"{option}: {str(path)!r} ({_size(path)}) is the partial output of an earlier run {where}that may "
                f"have stopped before it finished {destination.name}; remove it if no run is writing that file now",
                stacklevel=3,
            )
    return removed


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform or filesystem lets a folder be opened or synced
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


class PendingFile:
    """A file being written: ``path`` is a fresh temporary file beside ``destination`` (not created yet);
    ``commit()`` fsyncs it and renames it onto ``destination`` in one step, ``discard()`` removes it and leaves
    ``destination`` as it was. A destination that is a symlink is written through (the file it points to is
    replaced, the link stays); the replaced file's permission bits are kept. ``option`` names the argument in errors
    (a missing folder, nothing written). ``clear_stale``: first remove the partial files of the same destination
    that earlier, stopped processes left (``clear_stale_partials``): for writers of large files, where a kill leaves
    much behind (it lists the folder, so not for many small files in one folder)."""

    def __init__(self, destination: str | os.PathLike, *, option: str = "path", clear_stale: bool = False):
        self.destination = Path(os.fspath(destination))
        self.option = option
        self.target = Path(os.path.realpath(self.destination)) if self.destination.is_symlink() else self.destination
        folder = self.target.parent
        if not folder.is_dir():
            raise FileNotFoundError(f"{option}: folder {str(folder)!r} does not exist (for {str(self.destination)!r})")
        if clear_stale:
            clear_stale_partials(self.target, option)
        self.path = partial_path(self.target)
        self.done = False

    def commit(self) -> Path:
        try:
            if not self.path.exists():
                raise FileNotFoundError(f"{self.option}: nothing was written to {str(self.destination)!r}")
            with contextlib.suppress(OSError):  # keep the replaced file's permissions (not the default umask's)
                os.chmod(self.path, stat.S_IMODE(os.stat(self.target).st_mode))
            _fsync_file(self.path)
            os.replace(self.path, self.target)
        except BaseException:
            self.discard()
            raise
        self.done = True
        _fsync_folder(self.target.parent)
        return self.destination

    def discard(self) -> None:
        self.done = True
        with contextlib.suppress(OSError):
            self.path.unlink()


@contextlib.contextmanager
def atomic_path(destination: str | os.PathLike, *, option: str = "path") -> Iterator[Path]:
    """Yield a temporary path to write in full; when the block ends without error it is fsynced and renamed onto
    ``destination``. On error the temporary file is removed and ``destination`` is untouched. ``option`` names the
    argument in errors (a missing folder)."""
    pending = PendingFile(destination, option=option)
    try:
        yield pending.path
    except BaseException:
        pending.discard()
        raise
    pending.commit()


def write_bytes(destination: str | os.PathLike, data: bytes, *, option: str = "path") -> Path:
    """Write ``data`` to ``destination`` atomically."""
    with atomic_path(destination, option=option) as temporary:
        temporary.write_bytes(data)
    return Path(os.fspath(destination))


def write_text(destination: str | os.PathLike, text: str, *, option: str = "path") -> Path:
    """Write ``text`` (UTF-8) to ``destination`` atomically."""
    return write_bytes(destination, text.encode("utf-8"), option=option)


def append_text(destination: str | os.PathLike, text: str, *, option: str = "path") -> Path:
    """Write ``destination``'s previous content (if any) followed by ``text``, atomically: a log written line by line
    never holds half a line. Meant for small files (the whole file is rewritten)."""
    target = Path(os.fspath(destination))
    previous = target.read_bytes() if target.is_file() else b""
    return write_bytes(target, previous + text.encode("utf-8"), option=option)


def same_file(first: str | os.PathLike, second: str | os.PathLike) -> bool:
    """Whether two paths name one file (same device and inode: the same path, a symlink or a hard link). A path
    that does not exist is the same as another only when both resolve to one path."""
    try:
        one, two = os.stat(first), os.stat(second)
    except OSError:
        return Path(os.path.abspath(first)).resolve() == Path(os.path.abspath(second)).resolve()
    return (one.st_dev, one.st_ino) == (two.st_dev, two.st_ino)


def refuse_inputs(
    outputs: Mapping[str, str | os.PathLike | None], inputs: Mapping[str, str | os.PathLike | None]
) -> None:
    """Raise ``ValueError`` naming the option when an output would overwrite an input of the same command or
    another output. Keys are the options as the user typed them (``-o``, ``--json``, ``SOURCE``)."""
    given_inputs = [(name, path) for name, path in inputs.items() if path is not None]
    given_outputs = [(name, path) for name, path in outputs.items() if path is not None]
    for index, (name, path) in enumerate(given_outputs):
        for input_name, input_path in given_inputs:
            if same_file(path, input_path):
                alias = os.path.abspath(path) != os.path.abspath(input_path)  # a link, or another spelling
                what = f"the same file as the input {input_name} ({os.fspath(input_path)!r})" if alias else ""
                raise ValueError(
                    f"{name}: {os.fspath(path)!r} is {what or f'the input {input_name}'}; choose another output path"
                )
        for other_name, other_path in given_outputs[index + 1 :]:
            if same_file(path, other_path):
                raise ValueError(
                    f"{other_name}: {os.fspath(other_path)!r} is also {name}; give each output its own path"
                )


def refuse_inside_inputs(
    outputs: Mapping[str, str | os.PathLike | None], inputs: Mapping[str, str | os.PathLike | None]
) -> None:
    """Raise ``ValueError`` naming the option when an output lies inside an input folder (a store or a
    save_to_disk folder is read, never written into), also when either path goes through a symlink."""
    for name, path in outputs.items():
        if path is None:
            continue
        where = Path(os.path.abspath(path)).resolve()
        for input_name, input_path in inputs.items():
            if input_path is not None and Path(input_path).is_dir():
                if Path(os.path.abspath(input_path)).resolve() in where.parents:
                    raise ValueError(
                        f"{name}: {os.fspath(path)!r} is inside the input folder {input_name}; write it elsewhere"
                    )


def inside_folder(folder: str | os.PathLike, name: object, *, manifest: str | os.PathLike) -> Path:
    """The path of ``name``, an entry a folder format's ``manifest`` lists (a data file, a split, a chunk), inside
    ``folder``. Raises ``ValueError`` naming the manifest and the entry when the name is not a plain relative path
    or leads out of the folder (``..``, an absolute path, a symlink pointing elsewhere): a manifest never makes the
    reader open a file outside its folder."""
    base = Path(os.fspath(folder))
    text = os.fspath(name) if isinstance(name, (str, os.PathLike)) else None
    if not text or "\x00" in text:
        raise ValueError(f"{os.fspath(manifest)!r}: the entry {name!r} is not a file name inside {str(base)!r}")
    candidate = base / text
    root = base.resolve()
    resolved = candidate.resolve()
    if Path(text).is_absolute() or root not in resolved.parents:
        raise ValueError(
            f"{os.fspath(manifest)!r}: the entry {text!r} leads outside the folder {str(base)!r}; a folder's manifest "
            "may only name files inside it"
        )
    return candidate


def commit_staged(staged: str | os.PathLike, destination: str | os.PathLike) -> Path:
    """Move a staged output (a file or a folder written in full beside its destination, e.g. a resumable ``apply``'s
    partial folder) onto ``destination`` in one rename, after fsyncing every file it holds; the folder is fsynced
    after the rename. A folder destination must not exist yet (an existing one is never replaced)."""
    staged, target = Path(os.fspath(staged)), Path(os.fspath(destination))
    files = [staged] if staged.is_file() else [p for p in staged.rglob("*") if p.is_file()]
    for path in files:
        _fsync_file(path)
    if staged.is_dir() and target.exists():
        raise FileExistsError(f"{target}: exists already; a staged folder never replaces one")
    os.replace(staged, target)
    _fsync_folder(target.parent)
    return target
