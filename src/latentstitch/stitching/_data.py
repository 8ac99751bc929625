"""The data-argument convention of ``latentstitch.stitching``.

Data (``data`` arguments here and in the rest of ``latentstitch.stitching``): an array or tensor of inputs, a tuple
``(inputs, labels)`` of arrays or tensors, or any iterable of batches (a ``DataLoader``) whose items are input
tensors or ``(inputs, labels, ...)`` tuples. Models are assumed batch-first: activations are concatenated along
dimension 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch

from latentstitch._core.params import check_positive_int


def as_tensor(x: Any, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    raise TypeError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")


def in_memory(data: Any) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """``(inputs, labels or None)`` if ``data`` is an array or an ``(inputs, labels)`` tuple; None for a loader."""
    if isinstance(data, (torch.Tensor, np.ndarray)):
        return as_tensor(data, "data"), None
    if isinstance(data, tuple) and data and isinstance(data[0], (torch.Tensor, np.ndarray)):
        inputs = as_tensor(data[0], "data[0]")
        labels = as_tensor(data[1], "data[1]") if len(data) > 1 else None
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
            inputs = as_tensor(batch[0], "data")
            labels = as_tensor(batch[1], "data") if len(batch) > 1 else None
        else:
            inputs, labels = as_tensor(batch, "data"), None
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


def num_batches(data: Any, batch_size: int) -> int | None:
    memory = in_memory(data)
    if memory is not None:
        return -(-len(memory[0]) // batch_size)
    return len(data) if hasattr(data, "__len__") else None
