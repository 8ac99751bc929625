"""Capturing the outputs of named layers of torch models over a dataset (forward hooks).

Layers are named as ``dict(model.named_modules())`` names them ("layer2.0", "features.3", "bn3"); a layer's
activation is the output of its module's *first* call in a forward pass. Capturing stops the forward pass as soon
as every requested layer has been seen, so the rest of the network is not computed.

Data (``data`` arguments here and in the rest of ``latentstitch.stitching``): an array or tensor of inputs, a tuple
``(inputs, labels)`` of arrays or tensors, or any iterable of batches (a ``DataLoader``) whose items are input
tensors or ``(inputs, labels, ...)`` tuples. Models are assumed batch-first: activations are concatenated along
dimension 0.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn
from torch.nn import functional as F

from latentstitch._core.errors import model_input_errors
from latentstitch._core.params import check_positive_int
from latentstitch._core.persist import read_json, read_safetensors
from latentstitch._core.progress import progress_bar

STORE_FORMAT = "latentstitch.activations/1"
_INDEX_FILE = "index.json"
# Elements per chunk file when storing to disk: 16 Mi float32 values (64 MiB).
_CHUNK_ELEMENTS = 1 << 24


class _StopForward(Exception):
    """Raised by a capturing hook once every requested layer has been seen: the rest of the forward is skipped."""


# --- layer names -------------------------------------------------------------------------------------------------


def layer_names(model: nn.Module) -> list[str]:
    """Every named submodule of ``model`` (the names ``stitch`` and ``get_activations`` accept), in order."""
    return [name for name, _ in model.named_modules() if name]


def _name_list(names: Sequence[str], limit: int = 120) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def resolve_layer(model: nn.Module, name: object, argument: str) -> nn.Module:
    """The submodule called ``name``; an unknown name is an error listing the valid ones."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"{argument}: expected the layer of a torch nn.Module, got a {type(model).__name__}")
    modules = dict(model.named_modules())
    if not isinstance(name, str) or not name or name not in modules:
        raise ValueError(
            f"{argument}: {type(model).__name__} has no layer named {name!r}; valid names: "
            f"{_name_list(layer_names(model))}"
        )
    return modules[name]


def _as_layer_list(layers: str | Sequence[str], argument: str = "layers") -> list[str]:
    names = [layers] if isinstance(layers, str) else list(layers)
    if not names:
        raise ValueError(f"{argument}: expected at least one layer name")
    if len(set(names)) != len(names):
        raise ValueError(f"{argument}: names repeat: {names}")
    return names


# --- data ---------------------------------------------------------------------------------------------------------


def _as_tensor(x: Any, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    raise TypeError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")


def in_memory(data: Any) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """``(inputs, labels or None)`` if ``data`` is an array or an ``(inputs, labels)`` tuple; None for a loader."""
    if isinstance(data, (torch.Tensor, np.ndarray)):
        return _as_tensor(data, "data"), None
    if isinstance(data, tuple) and data and isinstance(data[0], (torch.Tensor, np.ndarray)):
        inputs = _as_tensor(data[0], "data[0]")
        labels = _as_tensor(data[1], "data[1]") if len(data) > 1 else None
        if labels is not None and len(labels) != len(inputs):
            raise ValueError(f"data: {len(inputs)} inputs but {len(labels)} labels")
        return inputs, labels
    return None


def iter_batches(data: Any, batch_size: int = 256) -> Iterator[tuple[torch.Tensor, torch.Tensor | None]]:
    """``(inputs, labels or None)`` batches of ``data`` in order (see the module docstring for what ``data`` is).

    Every batch of an iterable must have the layout of the first (the same number of dimensions and the same
    shape per sample): a list ``[inputs, labels]`` is read as two batches of inputs and refused with that
    explanation (pass the tuple ``(inputs, labels)``); an iterable that yields no batch is refused too."""
    batch_size = check_positive_int(batch_size, "batch_size")
    memory = in_memory(data)
    if memory is not None:
        inputs, labels = memory
        if len(inputs) == 0:
            raise ValueError("data: holds no samples")
        for start in range(0, len(inputs), batch_size):
            yield inputs[start : start + batch_size], None if labels is None else labels[start : start + batch_size]
        return
    if not isinstance(data, Iterable) or isinstance(data, (str, bytes, dict)):
        raise TypeError(
            f"data: expected an array, an (inputs, labels) tuple or an iterable of batches, got {type(data).__name__}"
        )
    first: tuple[int, ...] | None = None
    for index, batch in enumerate(data):
        if isinstance(batch, (tuple, list)) and batch:
            inputs = _as_tensor(batch[0], "data")
            labels = _as_tensor(batch[1], "data") if len(batch) > 1 else None
        else:
            inputs, labels = _as_tensor(batch, "data"), None
        layout = (inputs.ndim, *inputs.shape[1:])
        if first is None:
            first = layout
        elif layout != first:
            raise ValueError(
                f"data: batch {index} has shape {tuple(inputs.shape)} but batch 0 has {first[1:]} per sample; an "
                "iterable is read as batches of inputs (for inputs with labels pass the tuple (inputs, labels), "
                "or batches of (inputs, labels) pairs)"
            )
        yield inputs, labels
    if first is None:
        raise ValueError("data: holds no batch")


def _num_batches(data: Any, batch_size: int) -> int | None:
    memory = in_memory(data)
    if memory is not None:
        return -(-len(memory[0]) // batch_size)
    return len(data) if hasattr(data, "__len__") else None


def model_device(model: nn.Module) -> torch.device:
    parameter = next(model.parameters(), None)
    if parameter is None:
        parameter = next(model.buffers(), None)
    return parameter.device if parameter is not None else torch.device("cpu")


def to_model(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """``inputs`` on the model's device; floating-point inputs in the model's floating-point dtype (float64 data
    into a float32 network is converted, as the network would compute in float32 anyway). Integer inputs (token
    ids) are left as they are."""
    target = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    dtype = target if target is not None and inputs.is_floating_point() else inputs.dtype
    return inputs.to(device=model_device(model), dtype=dtype)


@contextmanager
def eval_mode(*models: nn.Module) -> Iterator[None]:
    """Put ``models`` in eval mode for the block, restoring every submodule's mode afterwards."""
    modes = [(module, module.training) for model in models for module in model.modules()]
    for model in models:
        model.eval()
    try:
        yield
    finally:
        for module, mode in modes:
            module.training = mode


# --- capture ------------------------------------------------------------------------------------------------------


def _downsampled(t: torch.Tensor, size: tuple[int, int] | None) -> torch.Tensor:
    if size is None or t.ndim != 4:
        return t
    target = (min(size[0], t.shape[2]), min(size[1], t.shape[3]))
    return t if target == tuple(t.shape[2:]) else F.adaptive_avg_pool2d(t, target)


def capture(model: nn.Module, inputs: torch.Tensor, layers: Sequence[str]) -> dict[str, torch.Tensor]:
    """Run ``model(inputs)`` until every layer in ``layers`` has produced its (first) output; return them.

    Runs in the current grad mode and module modes (callers choose ``no_grad`` / ``eval``). A layer that is never
    called, or whose output is not a tensor, is an error naming it.
    """
    modules = {name: resolve_layer(model, name, "layers") for name in layers}
    captured: dict[str, torch.Tensor] = {}

    def hook_for(name: str) -> Callable[..., None]:
        def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
            if name in captured:
                return
            if not isinstance(output, torch.Tensor):
                raise TypeError(
                    f"layers: {name!r} outputs a {type(output).__name__}, not a tensor; choose a layer whose output "
                    "is one tensor (e.g. a submodule of it)"
                )
            captured[name] = output
            if len(captured) == len(modules):
                raise _StopForward

        return hook

    handles = [module.register_forward_hook(hook_for(name)) for name, module in modules.items()]
    try:
        with model_input_errors(inputs, "data", type(model).__name__):
            model(inputs)
    except _StopForward:
        pass
    except (RuntimeError, ValueError, IndexError) as error:
        if str(error).startswith("data:"):
            raise
        detail = " ".join(str(error).split())[:300]
        raise ValueError(
            f"data: {type(model).__name__} failed on a batch of shape {tuple(inputs.shape)} ({detail}); data is an "
            "array of inputs (N, ...), an (inputs, labels) tuple or an iterable of such batches"
        ) from error
    finally:
        for handle in handles:
            handle.remove()
    missing = [name for name in modules if name not in captured]
    if missing:
        raise RuntimeError(f"layers: {missing} were not called in {type(model).__name__}'s forward pass")
    for name, output in captured.items():
        if inputs.ndim and (output.ndim == 0 or output.shape[0] != inputs.shape[0]):
            raise ValueError(
                f"data: {name!r} outputs shape {tuple(output.shape)} for a batch of shape {tuple(inputs.shape)}: "
                "models are assumed batch-first, so the first dimensions must agree (a list of single samples? "
                "stack them into one batch, e.g. torch.stack)"
            )
    return captured


def layer_shapes(model: nn.Module, example: Any) -> dict[str, tuple[int, ...]]:
    """Output shape of every named layer of ``model`` (first call) on the input batch ``example``, in call order.

    Layers whose output is not a tensor (tuples, None) are left out. Runs without gradient, in eval mode.
    """
    shapes: dict[str, tuple[int, ...]] = {}

    def hook_for(name: str) -> Callable[..., None]:
        def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
            if name not in shapes and isinstance(output, torch.Tensor):
                shapes[name] = tuple(output.shape)

        return hook

    handles = [module.register_forward_hook(hook_for(name)) for name, module in model.named_modules() if name]
    try:
        with torch.no_grad(), eval_mode(model):
            model(to_model(model, _as_tensor(example, "example")))
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def format_shapes(shapes: dict[str, tuple[int, ...]], limit: int = 120) -> str:
    items = [f"{name} {shape}" for name, shape in shapes.items()]
    return _name_list(items, limit)


def _size2(downsample: int | Sequence[int] | None) -> tuple[int, int] | None:
    if downsample is None:
        return None
    if not isinstance(downsample, Sequence) or isinstance(downsample, str):
        side = check_positive_int(downsample, "downsample")
        return side, side
    values = tuple(downsample)
    if len(values) != 2:
        raise ValueError(f"downsample: expected an int or (height, width), got {downsample!r}")
    return check_positive_int(values[0], "downsample"), check_positive_int(values[1], "downsample")


def iter_activations(
    models: Sequence[nn.Module],
    layers: Sequence[Sequence[str]],
    data: Any,
    *,
    batch_size: int = 256,
    downsample: int | Sequence[int] | None = None,
    progress: Any = False,
    description: str = "activations",
) -> Iterator[tuple[list[dict[str, torch.Tensor]], torch.Tensor | None]]:
    """For each batch of ``data``: the activations of ``layers[i]`` of ``models[i]`` (on the CPU, float32,
    detached, downsampled) and the batch's labels. All models see the same batch, so paired activations stay
    paired whatever the data order. Models run in eval mode, without gradient; modes are restored afterwards."""
    batch_size = check_positive_int(batch_size, "batch_size")
    size = _size2(downsample)
    total = _num_batches(data, batch_size)
    with torch.no_grad(), eval_mode(*models), progress_bar(progress) as bar:
        task = bar.add_task(description, total=total) if bar is not None else None
        for inputs, labels in iter_batches(data, batch_size):
            out = []
            for model, names in zip(models, layers, strict=True):
                acts = capture(model, to_model(model, inputs), names)
                out.append({name: _downsampled(acts[name], size).detach().float().cpu() for name in names})
            yield out, labels
            if bar is not None:
                bar.update(task, advance=1)


def get_activations(
    model: nn.Module,
    data: Any,
    layers: str | Sequence[str],
    *,
    batch_size: int = 256,
    downsample: int | Sequence[int] | None = None,
    store: str | os.PathLike | None = "memory",
    on_batch: Callable[[dict[str, torch.Tensor]], None] | None = None,
    chunk_size: int | None = None,
    progress: Any = False,
) -> torch.Tensor | dict[str, torch.Tensor] | ActivationStore | None:
    """Capture the outputs of named layers of ``model`` over a dataset, batch by batch.

    Parameters
    ----------
    model : nn.Module
        Run in eval mode (batch norm uses its running statistics) without gradient; its modes are restored
        afterwards. Inputs are moved to the device of its parameters; activations come back on the CPU as float32.
    data : array, (inputs, labels) tuple, or iterable of batches
        See ``latentstitch.stitching._activations``; labels are ignored.
    layers : str or sequence of str
        Names from ``model.named_modules()`` (an unknown name is an error listing the valid ones). The forward
        pass stops once every requested layer has been computed.
    batch_size : int
        Batch size for in-memory ``data`` (a loader's own batches are used as they come).
    downsample : int or (height, width), optional
        Average-pool (N, C, H, W) activations to at most this spatial size (``adaptive_avg_pool2d``) to save memory;
        other layouts are kept as they are.
    store : "memory", a directory, or None
        ``"memory"``: return the activations. A directory: write them there in chunks of ``chunk_size`` samples,
        one safetensors file per chunk holding every layer, and return an ``ActivationStore`` reading them back.
        None: keep nothing (use ``on_batch`` to reduce them on the fly, e.g. ``CrossMoments.update`` or a
        stitcher's ``partial_fit``) and return None.
    on_batch : callable ``{layer: tensor} -> None``, optional
        Called with every batch's activations.
    chunk_size : int, optional
        Samples per chunk file (default: about 64 MiB of float32 per chunk).
    progress : bool or rich Progress
        Show a progress bar over the batches.

    Returns
    -------
    tensor (for one layer name given as a string) or ``{name: tensor}``; an ``ActivationStore``; or None.
    """
    names = _as_layer_list(layers)
    for name in names:
        resolve_layer(model, name, "layers")
    if store is not None and not isinstance(store, (str, os.PathLike)):
        raise TypeError(f"store: expected 'memory', a folder path or None, got {type(store).__name__}")
    to_disk = store is not None and store != "memory"
    writer = _ChunkWriter(Path(store), names, chunk_size) if to_disk else None
    kept: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    for (acts,), _ in iter_activations(
        [model], [names], data, batch_size=batch_size, downsample=downsample, progress=progress
    ):
        if on_batch is not None:
            on_batch(acts)
        if writer is not None:
            writer.add(acts)
        elif store == "memory":
            for name in names:
                kept[name].append(acts[name])
    if writer is not None:
        return writer.close()
    if store is None:
        return None
    result = {name: torch.cat(parts) for name, parts in kept.items()}
    return result[names[0]] if isinstance(layers, str) else result


# --- activations on disk -------------------------------------------------------------------------------------------


class _ChunkWriter:
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
        save_file(chunk, os.fspath(self.directory / file))
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
        (self.directory / _INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
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
        missing = [file for file in self._files if not (self.directory / file).is_file()]
        if missing:
            raise ValueError(f"directory: {where} lacks the chunk files {', '.join(missing[:3])}")

    def __len__(self) -> int:
        return sum(self._counts)

    def chunks(self, layers: str | Sequence[str] | None = None) -> Iterator[dict[str, torch.Tensor]]:
        names = self.layers if layers is None else _as_layer_list(layers)
        unknown = [name for name in names if name not in self.layers]
        if unknown:
            raise ValueError(f"layers: {unknown} are not stored here; stored: {', '.join(self.layers)}")
        for file, count in zip(self._files, self._counts, strict=True):
            _, tensors = read_safetensors(self.directory / file, "directory")
            chunk = {}
            for name in names:
                value = tensors.get(name)
                expected = (count, *self.shapes[name])
                if value is None or tuple(value.shape) != expected:
                    got = "no tensor" if value is None else f"shape {tuple(value.shape)}"
                    raise ValueError(
                        f"directory: {str(self.directory / file)!r} holds {got} for layer {name!r}, expected {expected}"
                    )
                chunk[name] = value
            yield chunk

    def load(self, layer: str) -> torch.Tensor:
        return torch.cat([chunk[layer] for chunk in self.chunks([layer])])


# --- streaming direct matching -------------------------------------------------------------------------------------


def fit_direct(
    stitcher: Any,
    model_a: nn.Module,
    model_b: nn.Module,
    layer_a: str,
    layer_b: str,
    data: Any,
    *,
    batch_size: int = 256,
    downsample: int | Sequence[int] | None = None,
    chunk_elements: int = 1 << 23,
    progress: Any = False,
) -> Any:
    """Fit a direct-matching stitcher from ``model_a``'s ``layer_a`` to ``model_b``'s ``layer_b`` over ``data``.

    Both models see every batch once (in eval mode, without gradient); paired activations are gathered into chunks
    of about ``chunk_elements`` values and handed to ``stitcher.partial_fit``, so memory stays bounded whatever the
    dataset size. The estimator is reset first (a fresh fit); it is returned fitted. Any estimator of
    ``latentstitch.stitching`` with ``partial_fit`` works (``LeastSquares``, ``Procrustes``, ``ReducedRank``,
    ``SparseLasso``); the closed-form ones give exactly the one-shot fit on all activations.
    """
    if not hasattr(stitcher, "partial_fit"):
        raise TypeError(f"stitcher: expected an estimator with partial_fit, got {type(stitcher).__name__}")
    resolve_layer(model_a, layer_a, "layer_a")
    resolve_layer(model_b, layer_b, "layer_b")
    for name in [k for k in vars(stitcher) if k.endswith("_") and not k.startswith("_")]:
        delattr(stitcher, name)
    pending: list[tuple[torch.Tensor, torch.Tensor]] = []
    elements = 0
    for (acts_a, acts_b), _ in iter_activations(
        [model_a, model_b],
        [[layer_a], [layer_b]],
        data,
        batch_size=batch_size,
        downsample=downsample,
        progress=progress,
        description=f"direct matching {layer_a} -> {layer_b}",
    ):
        pending.append((acts_a[layer_a], acts_b[layer_b]))
        elements += acts_a[layer_a].numel() + acts_b[layer_b].numel()
        if elements >= chunk_elements:
            stitcher.partial_fit(torch.cat([a for a, _ in pending]), torch.cat([b for _, b in pending]))
            pending, elements = [], 0
    if pending:
        stitcher.partial_fit(torch.cat([a for a, _ in pending]), torch.cat([b for _, b in pending]))
    if not hasattr(stitcher, "coef_"):
        raise ValueError("data: holds no samples")
    return stitcher
