"""Saving and loading stitchers: one safetensors file (``latentstitch._core.persist``, shared by every estimator)."""

from __future__ import annotations

import os

from latentstitch._core.persist import FORMAT, save
from latentstitch._core.persist import load as _load
from latentstitch.stitching._base import _AffineMap

__all__ = ["FORMAT", "load", "save"]


def load(path: str | os.PathLike, expected: type = _AffineMap) -> _AffineMap:
    """Read a stitcher written by ``save``. ``expected``: the class (or a base class) the file must hold."""
    return _load(path, expected=expected)
