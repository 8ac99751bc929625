"""Restricted unpickling for the standard dataset formats that are Python pickles (CIFAR batches, Planetoid files).

The unpickler can only rebuild the few classes those files hold (numpy arrays, scipy sparse matrices, lists and
dicts) and never calls anything else, so a tampered file cannot run code.
"""

from __future__ import annotations

import collections
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def numpy_reconstructors() -> dict[tuple[str, str], Any]:
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray  # type: ignore[no-redef]
    allowed: dict[tuple[str, str], Any] = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype}
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):  # written by numpy 1.x / 2.x
        allowed[(module, "_reconstruct")] = multiarray._reconstruct
        allowed[(module, "scalar")] = multiarray.scalar
    allowed[("_codecs", "encode")] = _latin1_bytes  # how Python 3 writes bytes into protocol-2 pickles
    return allowed


def _latin1_bytes(text: str, encoding: str = "latin1") -> bytes:
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refusing _codecs.encode with encoding {encoding!r}")
    return text.encode("latin1")


class _SparseState:
    """Stand-in for a pickled scipy sparse matrix: collects its state, rebuilt afterwards with public scipy API."""

    fmt = ""

    def __setstate__(self, state: dict) -> None:
        self.state = state


def _sparse_stand_in(fmt: str) -> type:
    return type(f"_{fmt}_state", (_SparseState,), {"fmt": fmt})


def sparse_classes() -> dict[tuple[str, str], Any]:
    allowed = {}
    for fmt in ("csr", "csc", "coo"):
        stand_in = _sparse_stand_in(fmt)
        for module in (f"scipy.sparse.{fmt}", f"scipy.sparse._{fmt}"):  # module path before / after scipy 1.8
            for kind in ("matrix", "array"):
                allowed[(module, f"{fmt}_{kind}")] = stand_in
    return allowed


def container_classes() -> dict[tuple[str, str], Any]:
    return {
        ("collections", "defaultdict"): collections.defaultdict,
        ("__builtin__", "list"): list,  # Python 2 name, as in Planetoid's graph files
        ("builtins", "list"): list,
    }


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the (module, name) pairs it is given and refuses every other global.

    Python 2 pickles (CIFAR, Planetoid) are decoded with ``encoding="latin1"``, numpy's documented setting for
    them (a Python 2 ``str`` holding array bytes maps one-to-one onto latin-1 characters).
    """

    def __init__(self, file, allowed: Mapping[tuple[str, str], Any], *, source: str) -> None:
        super().__init__(file, encoding="latin1")
        self._allowed = allowed
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"{self._source}: refusing to load {module}.{name}; only numpy arrays, scipy sparse matrices and "
                "plain containers are allowed in this file format"
            ) from None


def restricted_load(path: Path, allowed: Mapping[tuple[str, str], Any]) -> Any:
    """Unpickle ``path`` with only the ``allowed`` classes; a missing, truncated or damaged file is a ValueError
    naming it."""
    if not path.is_file():
        raise ValueError(f"path: {str(path)!r} not found")
    try:
        with open(path, "rb") as f:
            return RestrictedUnpickler(f, allowed, source=str(path)).load()
    except pickle.UnpicklingError as error:
        if "refusing to load" in str(error):
            raise
        raise ValueError(f"path: {str(path)!r} is not a readable pickle ({error})") from None
    except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError) as error:
        raise ValueError(f"path: {str(path)!r} is damaged or truncated ({type(error).__name__}: {error})") from None


def entry(content: Any, key: str, path: Path) -> Any:
    """``content[key]`` of an unpickled file, a missing entry being an error naming the file."""
    if not isinstance(content, Mapping) or key not in content:
        raise ValueError(f"path: {str(path)!r} holds no {key!r} entry (not a file of this dataset's format?)")
    return content[key]


def as_dense(value: Any, path: Path) -> np.ndarray:
    """A numpy array from a loaded array or sparse stand-in."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, _SparseState):
        from scipy import sparse

        state = value.state
        shape = tuple(state.get("_shape", state.get("shape")))
        if value.fmt == "coo":
            matrix = sparse.coo_matrix((state["data"], (state["row"], state["col"])), shape=shape)
        else:
            build = sparse.csr_matrix if value.fmt == "csr" else sparse.csc_matrix
            matrix = build((state["data"], state["indices"], state["indptr"]), shape=shape)
        return matrix.toarray()
    raise ValueError(f"{path}: expected an array or a sparse matrix, got {type(value).__name__}")
