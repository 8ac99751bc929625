"""Running torch models to named layers for stitching: ``capture`` (one batch of inputs), layer shapes, inputs on the
model's device. The generic hook machinery (names, ``capturing``, modes) is ``latentstitch._core.hooks``.

Layers are named as ``dict(model.named_modules())`` names them ("layer2.0", "features.3", "bn3"); a layer's
activation is the output of its module's *first* call in a forward pass. Capturing stops the forward pass as soon
as every requested layer has been seen, so the rest of the network is not computed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from latentstitch._core.errors import model_input_errors
from latentstitch._core.hooks import (
    StopForward,
    as_layer_list,
    capturing,
    eval_mode,
    layer_names,
    model_device,
    name_list,
    resolve_layer,
)
from latentstitch.stitching._data import as_tensor

__all__ = [
    "StopForward",
    "as_layer_list",
    "capture",
    "eval_mode",
    "format_shapes",
    "layer_names",
    "layer_shapes",
    "model_device",
    "resolve_layer",
    "to_model",
]


def to_model(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """``inputs`` on the model's device; floating-point inputs in the model's floating-point dtype (float64 data
    into a float32 network is converted, as the network would compute in float32 anyway). Integer inputs (token
    ids) are left as they are."""
    target = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    dtype = target if target is not None and inputs.is_floating_point() else inputs.dtype
    return inputs.to(device=model_device(model), dtype=dtype)


# --- capture ------------------------------------------------------------------------------------------------------


def capture(model: nn.Module, inputs: torch.Tensor, layers: Sequence[str]) -> dict[str, torch.Tensor]:
    """Run ``model(inputs)`` until every layer in ``layers`` has produced its (first) output; return them.

    Runs in the current grad mode and module modes (callers choose ``no_grad`` / ``eval``). A layer that is never
    called, or whose output is not a tensor, is an error naming it.
    """
    try:
        with capturing(model, layers) as captured, model_input_errors(inputs, "data", type(model).__name__):
            model(inputs)
    except (RuntimeError, ValueError, IndexError) as error:
        if str(error).startswith(("data:", "layers:")):
            raise
        detail = " ".join(str(error).split())[:300]
        raise ValueError(
            f"data: {type(model).__name__} failed on a batch of shape {tuple(inputs.shape)} ({detail}); data is an "
            "array of inputs (N, ...), an (inputs, labels) tuple or an iterable of such batches"
        ) from error
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
            model(to_model(model, as_tensor(example, "example")))
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def format_shapes(shapes: dict[str, tuple[int, ...]], limit: int = 120) -> str:
    items = [f"{name} {shape}" for name, shape in shapes.items()]
    return name_list(items, limit)
