"""Running torch models to named layers: layer names, forward hooks that capture a layer's output, devices and modes.

Layers are named as ``dict(model.named_modules())`` names them ("layer2.0", "features.3", "bn3"); a layer's
activation is the output of its module's *first* call in a forward pass. Capturing stops the forward pass as soon
as every requested layer has been seen, so the rest of the network is not computed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from latentstitch._core.errors import model_input_errors
from latentstitch.stitching._data import as_tensor


class StopForward(Exception):
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


def as_layer_list(layers: str | Sequence[str], argument: str = "layers") -> list[str]:
    names = [layers] if isinstance(layers, str) else list(layers)
    if not names:
        raise ValueError(f"{argument}: expected at least one layer name")
    if len(set(names)) != len(names):
        raise ValueError(f"{argument}: names repeat: {names}")
    return names


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
                raise StopForward

        return hook

    handles = [module.register_forward_hook(hook_for(name)) for name, module in modules.items()]
    try:
        with model_input_errors(inputs, "data", type(model).__name__):
            model(inputs)
    except StopForward:
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
            model(to_model(model, as_tensor(example, "example")))
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def format_shapes(shapes: dict[str, tuple[int, ...]], limit: int = 120) -> str:
    items = [f"{name} {shape}" for name, shape in shapes.items()]
    return _name_list(items, limit)
