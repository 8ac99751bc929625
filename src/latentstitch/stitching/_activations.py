"""Capturing the outputs of named layers of torch models over a dataset, batch by batch (``get_activations``).

Layer names and hooks: ``latentstitch.stitching._hooks``; the ``data`` argument: ``latentstitch.stitching._data``;
activations on disk: ``latentstitch.stitching._store``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from latentstitch._core.params import check_positive_int
from latentstitch._core.progress import progress_bar
from latentstitch.stitching._data import iter_batches, num_batches
from latentstitch.stitching._hooks import as_layer_list, capture, eval_mode, resolve_layer, to_model
from latentstitch.stitching._store import ActivationStore, ChunkWriter


def _downsampled(t: torch.Tensor, size: tuple[int, int] | None) -> torch.Tensor:
    if size is None or t.ndim != 4:
        return t
    target = (min(size[0], t.shape[2]), min(size[1], t.shape[3]))
    return t if target == tuple(t.shape[2:]) else F.adaptive_avg_pool2d(t, target)


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
    total = num_batches(data, batch_size)
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
        See ``latentstitch.stitching._data``; labels are ignored.
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
    names = as_layer_list(layers)
    for name in names:
        resolve_layer(model, name, "layers")
    if store is not None and not isinstance(store, (str, os.PathLike)):
        raise TypeError(f"store: expected 'memory', a folder path or None, got {type(store).__name__}")
    to_disk = store is not None and store != "memory"
    writer = ChunkWriter(Path(store), names, chunk_size) if to_disk else None
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
