"""The encoder interface: pretrained models as functions from inputs to (N, d) float32 embeddings.

Every encoder batches its inputs, can show a progress bar (rich), and can cache its outputs on disk as
safetensors, keyed by the encoder's name, the version of the package its weights came from, the options that
change its output, and a hash of the inputs: a repeated experiment reads the file instead of re-encoding.
"""

from __future__ import annotations

import abc
import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import torch

from latentstitch._core.arrays import as_float_tensor, to_numpy
from latentstitch._core.atomic import atomic_path
from latentstitch._core.params import check_positive_int
from latentstitch._core.persist import read_safetensors

CACHE_ENV = "LATENTSTITCH_CACHE"
_CACHE_FORMAT = 1

CacheOption = bool | str | os.PathLike | None
EncoderInputs = Sequence[str] | np.ndarray | torch.Tensor


def default_cache_dir() -> Path:
    """``$LATENTSTITCH_CACHE`` if set, else ``~/.cache/latentstitch``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "latentstitch"


def resolve_cache_dir(cache: CacheOption) -> Path | None:
    """``None``/``False``: no cache; ``True``: :func:`default_cache_dir`; a path: that directory."""
    if cache is None or cache is False:
        return None
    if cache is True:
        return default_cache_dir()
    if isinstance(cache, (str, os.PathLike)):
        return Path(cache).expanduser()
    raise TypeError(f"cache: expected None, a bool or a directory path, got {type(cache).__name__}")


def _hash_inputs(inputs: list[str] | np.ndarray, digest: Any) -> None:
    if isinstance(inputs, np.ndarray):
        digest.update(f"array:{inputs.dtype.str}:{inputs.shape}".encode())
        digest.update(np.ascontiguousarray(inputs).tobytes())
    else:
        digest.update(f"texts:{len(inputs)}".encode())
        for text in inputs:
            encoded = text.encode("utf-8")
            digest.update(len(encoded).to_bytes(8, "little"))
            digest.update(encoded)


class Encoder(abc.ABC):
    """A frozen pretrained model mapping inputs to fixed-size vectors.

    Attributes
    ----------
    name : str
        Registry name of the model (``"minilm-l6"``, ``"efficientnet-lite0"``, ...).
    dim : int
        Width of the output vectors.
    version : str
        Version of the package that ships the weights (part of every cache key).
    modality : str
        ``"text"`` (inputs: a list of strings), ``"image"`` ((N, C, H, W) float array in [0, 1]) or ``"word"``
        (a list of words).
    supports_layers : bool
        Whether ``encode(..., layers=True)`` can return per-layer hidden states.
    """

    name: str
    dim: int
    version: str
    modality: str = "text"
    supports_layers: bool = False
    default_batch_size: int = 32
    _sort_by_length: bool = False  # texts: batch similar lengths together (less padding), order restored after

    def options(self) -> dict[str, Any]:
        """Settings that change the output (pooling, normalisation, truncation...): part of the cache key."""
        return {}

    @abc.abstractmethod
    def _encode_batch(self, batch: list[str] | np.ndarray, layers: bool) -> np.ndarray | list[np.ndarray]:
        """Encode one batch: (B, dim) float32, or a list of (B, d_l) float32 arrays when ``layers``."""

    def _check_inputs(self, inputs: EncoderInputs) -> list[str] | np.ndarray:
        if self.modality == "image":
            images = to_numpy(as_float_tensor(inputs, "inputs", ndim=4, min_rows=1), "inputs")
            if images.shape[1] not in (1, 3):
                raise ValueError(f"inputs: expected (N, C, H, W) images with C = 1 or 3, got shape {images.shape}")
            if images.min() < 0.0 or images.max() > 1.0:
                raise ValueError(
                    f"inputs: expected pixel values in [0, 1], got [{images.min():.3g}, {images.max():.3g}]"
                )
            return np.ascontiguousarray(images, dtype=np.float32)
        if isinstance(inputs, str):
            raise TypeError(f"inputs: expected a list of strings, got a single string; pass [{inputs[:20]!r}...]")
        texts = list(inputs)
        if not texts:
            raise ValueError("inputs: expected at least one string, got an empty sequence")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"inputs: expected strings, got {type(text).__name__} at position {i}")
        return texts

    def cache_key(self, inputs: list[str] | np.ndarray, layers: bool) -> str:
        """Hex digest identifying (encoder, weights version, options, layers, inputs)."""
        digest = hashlib.sha256()
        header = {
            "format": _CACHE_FORMAT,
            "encoder": self.name,
            "version": self.version,
            "options": self.options(),
            "layers": layers,
        }
        digest.update(json.dumps(header, sort_keys=True, default=str).encode())
        _hash_inputs(inputs, digest)
        return digest.hexdigest()

    def cache_path(self, inputs: EncoderInputs, *, cache: CacheOption = True, layers: bool = False) -> Path | None:
        """Where :meth:`encode` keeps (or would keep) the outputs for these inputs; None when caching is off."""
        folder = resolve_cache_dir(cache)
        if folder is None:
            return None
        key = self.cache_key(self._check_inputs(inputs), layers)
        return folder / self.name / f"{key[:32]}.safetensors"

    @overload
    def encode(
        self,
        inputs: EncoderInputs,
        *,
        batch_size: int | None = ...,
        progress: bool = ...,
        cache: CacheOption = ...,
        layers: Literal[False] = ...,
    ) -> np.ndarray: ...

    @overload
    def encode(
        self,
        inputs: EncoderInputs,
        *,
        batch_size: int | None = ...,
        progress: bool = ...,
        cache: CacheOption = ...,
        layers: Literal[True],
    ) -> list[np.ndarray]: ...

    def encode(
        self,
        inputs: EncoderInputs,
        *,
        batch_size: int | None = None,
        progress: bool = True,
        cache: CacheOption = None,
        layers: bool = False,
    ) -> np.ndarray | list[np.ndarray]:
        """Encode ``inputs`` in batches; returns an (N, dim) float32 array (row i encodes input i).

        Parameters
        ----------
        inputs
            A list of strings (text and word encoders) or an (N, C, H, W) float array / tensor in [0, 1]
            (image encoders).
        batch_size
            Inputs per forward pass (default: the encoder's ``default_batch_size``).
        progress
            Show a rich progress bar while encoding.
        cache
            ``None``/``False`` (default): no cache. ``True``: the directory ``$LATENTSTITCH_CACHE`` or
            ``~/.cache/latentstitch``. A path: that directory. Outputs are stored as safetensors, keyed by the
            encoder's name, weights version, options and the inputs; a second call with the same key reads the
            file and runs no model.
        layers
            Return per-layer hidden states instead: a list of (N, d_l) float32 arrays, pooled over tokens /
            positions the way the final output is (encoders with ``supports_layers`` only).
        """
        if layers and not self.supports_layers:
            raise ValueError(f"layers: the {self.name} encoder exposes no per-layer hidden states")
        checked = self._check_inputs(inputs)
        size = check_positive_int(batch_size if batch_size is not None else self.default_batch_size, "batch_size")
        folder = resolve_cache_dir(cache)
        path = None
        if folder is not None:
            path = folder / self.name / f"{self.cache_key(checked, layers)[:32]}.safetensors"
            if path.exists():
                cached = _read_cache(path, layers, len(checked))
                if cached is not None:
                    return cached
            _check_cache_folder(path.parent)  # before the (long) encoding, not after
        result = self._run(checked, size, progress, layers)
        if path is not None:
            _write_cache(path, result, {"encoder": self.name, "version": self.version, "count": str(len(checked))})
        return result

    def _run(
        self, inputs: list[str] | np.ndarray, batch_size: int, progress: bool, layers: bool
    ) -> np.ndarray | list[np.ndarray]:
        n = len(inputs)
        if self._sort_by_length and isinstance(inputs, list):
            order = np.argsort([-len(text) for text in inputs], kind="stable")
        else:
            order = np.arange(n)
        chunks: list[np.ndarray | list[np.ndarray]] = []
        with _progress_bar(progress, f"{self.name}: encoding {n} inputs", n) as advance:
            for start in range(0, n, batch_size):
                rows = order[start : start + batch_size]
                batch = [inputs[i] for i in rows] if isinstance(inputs, list) else inputs[rows]
                with torch.inference_mode():
                    chunks.append(self._encode_batch(batch, layers))
                advance(len(rows))
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n)
        if layers:
            per_layer = zip(*chunks, strict=True)  # type: ignore[call-overload]
            return [np.concatenate(parts).astype(np.float32, copy=False)[inverse] for parts in per_layer]
        return np.concatenate(chunks).astype(np.float32, copy=False)[inverse]  # type: ignore[arg-type]

    def __call__(self, inputs: EncoderInputs, **kwargs: Any) -> np.ndarray | list[np.ndarray]:
        return self.encode(inputs, **kwargs)

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}({options})"


class _progress_bar:
    """Context manager yielding ``advance(k)``; a rich bar when enabled, a no-op otherwise."""

    def __init__(self, enabled: bool, description: str, total: int) -> None:
        self.enabled, self.description, self.total = enabled, description, total
        self._progress: Any = None

    def __enter__(self):
        if not self.enabled:
            return lambda k: None
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

        from latentstitch._core.progress import new_progress

        self._progress = new_progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True
        )
        self._progress.__enter__()
        task = self._progress.add_task(self.description, total=self.total)
        return lambda k: self._progress.advance(task, k)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


def _write_cache(path: Path, result: np.ndarray | list[np.ndarray], metadata: dict[str, str]) -> None:
    from safetensors.numpy import save_file

    tensors = (
        {f"layer_{i:03d}": np.ascontiguousarray(a) for i, a in enumerate(result)}
        if isinstance(result, list)
        else {"embeddings": np.ascontiguousarray(result)}
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path, option="cache") as temporary:  # a concurrent reader never sees half a file
        save_file(tensors, str(temporary), metadata=metadata)


def _check_cache_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"cache: cannot create the cache folder {str(folder)!r} ({error.strerror or error})") from None


def _read_cache(path: Path, layers: bool, count: int) -> np.ndarray | list[np.ndarray] | None:
    """The cached outputs, or None (with a warning naming the file) when the file is damaged or does not hold
    ``count`` rows: a cache is derived data, so the inputs are encoded again and the file is rewritten."""
    try:
        _, tensors = read_safetensors(path, "cache")
        arrays = [tensors[key] for key in sorted(tensors)] if layers else [tensors["embeddings"]]
        if not arrays or any(a.ndim != 2 or a.shape[0] != count or a.dtype != torch.float32 for a in arrays):
            raise ValueError(f"cache: {str(path)!r} does not hold {count} rows of float32 embeddings")
    except (ValueError, KeyError) as error:
        reason = error if isinstance(error, ValueError) else f"cache: {str(path)!r} holds no embeddings"
        warnings.warn(f"{reason}; encoding again and rewriting the file", RuntimeWarning, stacklevel=3)
        return None
    out = [a.numpy() for a in arrays]
    return out if layers else out[0]
