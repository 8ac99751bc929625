"""Activations on disk: ``get_activations(..., store=folder)`` writes safetensors chunks and an index, and an
``ActivationStore`` reads them back one chunk at a time."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from latentstitch._core.atomic import atomic_path, inside_folder, write_text
from latentstitch._core.params import check_positive_int
from latentstitch._core.persist import read_json, read_safetensors
from latentstitch.stitching._hooks import as_layer_list

STORE_FORMAT = "latentstitch.activations/1"
_INDEX_FILE = "index.json"
# Elements per chunk file when storing to disk: 16 Mi float32 values (64 MiB).
_CHUNK_ELEMENTS = 1 << 24


class ChunkWriter:
    def __init__(self, directory: Path, names: list[str], chunk_size: int | None):
        self.directory = directory
        self.names = names
        self.chunk_size = None if chunk_size is None else check_positive_int(chunk_size, "chunk_size")
        if directory.exists() and not directory.is_dir():
            raise ValueError(f"store: {str(directory)!r} is a file, not a folder")
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            reason = error.strerror or error
            raise ValueError(f"store: cannot create the folder {str(directory)!r} ({reason})") from None
        if (directory / _INDEX_FILE).exists():
            raise FileExistsError(f"store: {directory} already holds stored activations; choose an empty folder")
        self.pending: dict[str, list[torch.Tensor]] = {name: [] for name in names}
        self.pending_rows = 0
        self.files: list[str] = []
        self.counts: list[int] = []
        self.shapes: dict[str, list[int]] = {}

    def add(self, acts: dict[str, torch.Tensor]) -> None:
        for name in self.names:
            self.pending[name].append(acts[name])
            self.shapes.setdefault(name, list(acts[name].shape[1:]))
        self.pending_rows += len(acts[self.names[0]])
        if self.chunk_size is None:
            per_sample = sum(int(np.prod(self.shapes[name])) for name in self.names)
            self.chunk_size = max(1, _CHUNK_ELEMENTS // max(per_sample, 1))
        while self.pending_rows >= self.chunk_size:
            self._flush(self.chunk_size)

    def _flush(self, rows: int) -> None:
        merged = {name: torch.cat(self.pending[name]) for name in self.names}
        chunk = {name: t[:rows].contiguous() for name, t in merged.items()}
        rest = {name: t[rows:] for name, t in merged.items()}
        file = f"chunk-{len(self.files):05d}.safetensors"
        with atomic_path(self.directory / file, option="store") as temporary:
            save_file(chunk, os.fspath(temporary))
        self.files.append(file)
        self.counts.append(rows)
        self.pending = {name: [rest[name]] if len(rest[name]) else [] for name in self.names}
        self.pending_rows -= rows

    def close(self) -> ActivationStore:
        if self.pending_rows:
            self._flush(self.pending_rows)
        index = {
            "format": STORE_FORMAT,
            "layers": self.names,
            "shapes": self.shapes,
            "files": self.files,
            "counts": self.counts,
        }
        write_text(self.directory / _INDEX_FILE, json.dumps(index, indent=2) + "\n", option="store")
        return ActivationStore(self.directory)


class ActivationStore:
    """Activations written to disk by ``get_activations(..., store=directory)``: safetensors chunks + index.json.

    ``chunks()`` yields ``{layer: tensor}`` one chunk at a time (constant memory, e.g. for ``partial_fit``);
    ``load(layer)`` concatenates one layer. ``layers``, ``shapes`` (per sample) and ``len(store)`` (samples)
    describe the content.
    """

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        where = repr(str(self.directory))
        if not self.directory.is_dir():
            raise ValueError(f"directory: {where} is not a folder of stored activations")
        index = read_json(self.directory / _INDEX_FILE, "directory")
        if not isinstance(index, dict) or index.get("format") != STORE_FORMAT:
            found = index.get("format") if isinstance(index, dict) else type(index).__name__
            raise ValueError(f"directory: {where} has an index of format {found!r}; expected {STORE_FORMAT!r}")
        try:
            self.layers: list[str] = [str(name) for name in index["layers"]]
            self.shapes = {str(name): tuple(int(s) for s in shape) for name, shape in index["shapes"].items()}
            self._files: list[str] = [str(file) for file in index["files"]]
            self._counts: list[int] = [int(count) for count in index["counts"]]
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            detail = f"{type(error).__name__}: {error}"
            raise ValueError(f"directory: {where} has a damaged {_INDEX_FILE} ({detail})") from None
        if len(self._files) != len(self._counts) or set(self.layers) != set(self.shapes):
            raise ValueError(f"directory: {where} has a damaged {_INDEX_FILE} (files, counts and shapes disagree)")
        manifest = self.directory / _INDEX_FILE
        self._paths = [inside_folder(self.directory, file, manifest=manifest) for file in self._files]
        missing = [file for file, path in zip(self._files, self._paths, strict=True) if not path.is_file()]
        if missing:
            raise ValueError(f"directory: {where} lacks the chunk files {', '.join(missing[:3])}")

    def __len__(self) -> int:
        return sum(self._counts)

    def chunks(self, layers: str | Sequence[str] | None = None) -> Iterator[dict[str, torch.Tensor]]:
        names = self.layers if layers is None else as_layer_list(layers)
        unknown = [name for name in names if name not in self.layers]
        if unknown:
            raise ValueError(f"layers: {unknown} are not stored here; stored: {', '.join(self.layers)}")
        for path, count in zip(self._paths, self._counts, strict=True):
            _, tensors = read_safetensors(path, "directory")
            chunk = {}
            for name in names:
                value = tensors.get(name)
                expected = (count, *self.shapes[name])
                if value is None or tuple(value.shape) != expected:
                    got = "no tensor" if value is None else f"shape {tuple(value.shape)}"
                    raise ValueError(f"directory: {str(path)!r} holds {got} for layer {name!r}, expected {expected}")
                chunk[name] = value
            yield chunk

    def load(self, layer: str) -> torch.Tensor:
        return torch.cat([chunk[layer] for chunk in self.chunks([layer])])
