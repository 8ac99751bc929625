"""Readers of array files: ``.npy`` (memory-mapped), ``.npz`` and ``.safetensors`` (one array by key, sliced lazily),
``.pt`` (``torch.load(weights_only=True)``: tensors and plain containers only, never arbitrary pickled objects)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from latentstitch.embeddings._base import EmbeddingFile

KEY_HINTS = ("embeddings", "embedding", "vectors", "features", "x")


class _ArrayFile(EmbeddingFile):
    """A file holding named arrays: one is the vectors (``key``), another optionally the ids (``id_key``)."""

    def _pick_key(self, keys: list[str], key: str | None, argument: str) -> str:
        if key is not None:
            if key not in keys:
                raise self.error(
                    f"has no array {key!r} (given by {argument}=); its arrays are: {', '.join(keys) or 'none'}"
                )
            return key
        candidates = [k for k in keys if k not in {"ids", "id"}]  # ids are never the vectors
        if len(candidates) == 1:
            return candidates[0]
        for hint in KEY_HINTS:
            if hint in candidates:
                return hint
        raise self.error(
            f"holds {len(keys)} arrays ({', '.join(keys) or 'none'}); say which holds the vectors with {argument}="
        )


class NpyFile(EmbeddingFile):
    format = ".npy"

    def __init__(self, path: Path, option: str, *, key: str | None = None, id_key: str | None = None):
        super().__init__(path, option)
        if key is not None or id_key is not None:
            raise self.error("is a .npy file, which holds one array and no ids; key= / id_column= do not apply")
        with open(path, "rb") as handle:
            if handle.read(6) != b"\x93NUMPY":
                raise self.error("is not a readable .npy file (it does not start with the .npy header)")
        self._check_size(path)
        try:
            self.array = np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError as error:  # object arrays need pickle: refused
            raise self.error(f"cannot be read without pickle ({error}); save the vectors as a float array") from None
        except (OSError, EOFError) as error:
            raise self.error(f"is not a readable .npy file ({error})") from None
        self._check_vectors(self.array, "an array")
        self._set_shape(*self.array.shape, self.array.dtype)

    def _check_size(self, path: Path) -> None:
        """The data the header promises is in the file: a truncated file (an interrupted copy or write) or a header
        claiming an impossible shape is said as such, before the memory map fails with a vaguer message."""
        fmt = np.lib.format
        try:
            with open(path, "rb") as handle:
                version = fmt.read_magic(handle)
                reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                shape, _, dtype = reader(handle, max_header_size=100_000)
                offset = handle.tell()
        except (ValueError, OSError, EOFError, SyntaxError) as error:
            raise self.error(f"is not a readable .npy file (damaged header: {' '.join(str(error).split())})") from None
        if dtype.hasobject:
            raise self.error("cannot be read without pickle: it holds Python objects; save the vectors as floats")
        available = path.stat().st_size - offset
        row = dtype.itemsize * int(np.prod(shape[1:], dtype=object))
        expected = row * (shape[0] if shape else 1)
        if available >= expected:
            return
        rows = available // row if row else 0
        if not shape or expected > 1000 * max(available, 1) or rows == 0:
            raise self.error(
                f"claims shape {shape} of {dtype} ({expected:,} bytes of data), impossible for a file holding "
                f"{available:,} bytes after its header: the header is damaged"
            )
        raise self.error(
            f"is truncated: its header says shape {shape} but the file holds only {rows} of the {shape[0]} rows "
            f"({available:,} of {expected:,} bytes); copy or write it again"
        )

    def _read_rows(self, start: int, stop: int) -> np.ndarray:
        return np.array(self.array[start:stop])  # a copy of just these rows of the memory map


class NpzFile(_ArrayFile):
    format = ".npz"

    def __init__(self, path: Path, option: str, *, key: str | None = None, id_key: str | None = None):
        super().__init__(path, option)
        with open(path, "rb") as handle:
            if handle.read(2) != b"PK":
                raise self.error("is not a readable .npz file (not a zip archive)")
        try:
            archive = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as error:
            raise self.error(f"is not a readable .npz file ({' '.join(str(error).split())})") from None
        with archive:
            keys = list(archive.files)
            name = self._pick_key(keys, key, "key")
            ids_name = None if id_key is None else self._pick_key(keys, id_key, "id_column")
            try:
                self.array = archive[name]
                ids = None if ids_name is None else archive[ids_name]
            except ValueError as error:
                raise self.error(f"array {name!r} cannot be read without pickle ({error})") from None
        self._check_vectors(self.array, f"array {name!r}")
        self._set_shape(*self.array.shape, self.array.dtype)
        if ids is not None:
            self._set_ids(ids, f"ids array {id_key!r}")

    def _read_rows(self, start: int, stop: int) -> np.ndarray:
        return self.array[start:stop]


class SafetensorsFile(_ArrayFile):
    format = ".safetensors"

    def __init__(self, path: Path, option: str, *, key: str | None = None, id_key: str | None = None):
        super().__init__(path, option)
        from safetensors import safe_open

        try:
            self.handle = safe_open(str(path), framework="pt")
            keys = list(self.handle.keys())
        except Exception as error:  # safetensors raises its own error types for damaged files
            raise self.error(f"is not a readable safetensors file ({' '.join(str(error).split())})") from None
        self.key = self._pick_key(keys, key, "key")
        self.slice = self.handle.get_slice(self.key)
        shape, dtype = tuple(self.slice.get_shape()), self.slice.get_dtype()
        probe = np.empty((0,) * len(shape), dtype=_numpy_dtype(dtype))
        self._check_vectors(_Shaped(probe.dtype, shape), f"tensor {self.key!r}")
        self._set_shape(*shape, probe.dtype)
        if id_key is not None:
            ids = self.handle.get_tensor(self._pick_key(keys, id_key, "id_column"))
            self._set_ids(_tensor_numpy(ids), f"ids tensor {id_key!r}")

    def _read_rows(self, start: int, stop: int) -> np.ndarray:
        return _tensor_numpy(self.slice[start:stop])


class TorchFile(_ArrayFile):
    format = ".pt"

    def __init__(self, path: Path, option: str, *, key: str | None = None, id_key: str | None = None):
        super().__init__(path, option)
        import pickle

        import torch

        try:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as error:
            first = " ".join(str(error).split())[:300]
            raise self.error(
                f"holds objects that torch.load(weights_only=True) refuses (only tensors and plain containers are "
                f"read, never arbitrary pickled code): {first}"
            ) from None
        except (RuntimeError, OSError, EOFError, ValueError) as error:
            raise self.error(f"is not a readable torch file ({' '.join(str(error).split())[:300]})") from None
        if isinstance(loaded, torch.Tensor):
            if key is not None or id_key is not None:
                raise self.error("holds a single tensor; key= / id_column= do not apply")
            vectors, name = loaded, "a tensor"
        elif isinstance(loaded, dict):
            keys = [str(k) for k in loaded]
            chosen = self._pick_key(keys, key, "key")
            vectors, name = loaded[chosen], f"entry {chosen!r}"
            if id_key is not None:
                self._pending_ids = (loaded[self._pick_key(keys, id_key, "id_column")], f"ids entry {id_key!r}")
        else:
            raise self.error(f"holds a {type(loaded).__name__}; expected a tensor or a dict of tensors")
        if not isinstance(vectors, torch.Tensor):
            raise self.error(f"{name} is a {type(vectors).__name__}, not a tensor")
        self.array = _tensor_numpy(vectors)
        self._check_vectors(self.array, name)
        self._set_shape(*self.array.shape, self.array.dtype)
        pending = getattr(self, "_pending_ids", None)
        if pending is not None:
            ids = _tensor_numpy(pending[0]) if isinstance(pending[0], torch.Tensor) else pending[0]
            self._set_ids(ids, pending[1])

    def _read_rows(self, start: int, stop: int) -> np.ndarray:
        return self.array[start:stop]


class _Shaped:
    """Dtype and shape of a tensor not yet read (for the shared checks)."""

    def __init__(self, dtype: np.dtype, shape: tuple[int, ...]):
        self.dtype, self.shape = dtype, shape


def _tensor_numpy(tensor: Any) -> np.ndarray:
    import torch

    tensor = tensor.detach().cpu()
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()


def _numpy_dtype(name: str) -> Any:
    table = {
        "F64": np.float64,
        "F32": np.float32,
        "F16": np.float16,
        "BF16": np.float32,
        "I64": np.int64,
        "I32": np.int32,
        "I16": np.int16,
        "I8": np.int8,
        "U8": np.uint8,
        "BOOL": np.bool_,
    }
    return table.get(name, np.float32)
