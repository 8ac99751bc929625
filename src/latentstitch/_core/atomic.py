"""The one way a file is written: into a temporary file beside the destination, flushed and fsynced, then renamed
over it in one step (``os.replace``, atomic on POSIX and Windows within a folder). On any error, Ctrl-C or a kill,
the destination keeps its previous content (or still does not exist); two writers at once each produce a whole file
and the last rename wins. A temporary file left by a killed process is named ``.NAME.partial-XXXX.SUFFIX``: hidden,
beside its destination, and plainly partial.

``same_file`` / ``refuse_inputs`` keep outputs off the inputs of the same command: two paths are the same file when
they share device and inode (the same path, a symlink or a hard link)."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path

PARTIAL_MARK = ".partial-"


def partial_path(destination: Path) -> Path:
    """A fresh temporary path in ``destination``'s folder that keeps its suffix (writers that choose a format by
    suffix, such as numpy or matplotlib, still see it)."""
    return destination.with_name(f".{destination.stem}{PARTIAL_MARK}{secrets.token_hex(4)}{destination.suffix}")


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


@contextlib.contextmanager
def atomic_path(destination: str | os.PathLike, *, option: str = "path") -> Iterator[Path]:
    """Yield a temporary path to write in full; when the block ends without error it is fsynced and renamed onto
    ``destination``. On error the temporary file is removed and ``destination`` is untouched. ``option`` names the
    argument in errors (a missing folder)."""
    target = Path(os.fspath(destination))
    folder = target.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"{option}: folder {str(folder)!r} does not exist (for {str(target)!r})")
    temporary = partial_path(target)
    try:
        yield temporary
        if not temporary.exists():
            raise FileNotFoundError(f"{option}: nothing was written to {str(target)!r}")
        _fsync_file(temporary)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    _fsync_folder(folder)


def write_bytes(destination: str | os.PathLike, data: bytes, *, option: str = "path") -> Path:
    """Write ``data`` to ``destination`` atomically."""
    with atomic_path(destination, option=option) as temporary:
        temporary.write_bytes(data)
    return Path(os.fspath(destination))


def write_text(destination: str | os.PathLike, text: str, *, option: str = "path") -> Path:
    """Write ``text`` (UTF-8) to ``destination`` atomically."""
    return write_bytes(destination, text.encode("utf-8"), option=option)


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
                raise ValueError(f"{name}: {os.fspath(path)!r} is the input {input_name}; choose another output path")
        for other_name, other_path in given_outputs[index + 1 :]:
            if same_file(path, other_path):
                raise ValueError(
                    f"{other_name}: {os.fspath(other_path)!r} is also {name}; give each output its own path"
                )
