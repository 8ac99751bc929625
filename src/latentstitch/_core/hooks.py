"""Forward hooks on named layers of torch models: layer names, capturing a layer's output, devices and modes.

Layers are named as ``dict(model.named_modules())`` names them ("layer2.0", "features.3", "encoder.layer.5"); a
layer's activation is the output of its module's *first* call in a forward pass. Capturing stops the forward pass
as soon as every requested layer has been seen (``StopForward``), so the rest of the network is not computed.
Generic torch only: ``stitching`` (activations, stitched models) and ``similarity`` (``layer_similarity``) both run
models through here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

OUTPUTS = ("tensor", "first")


class StopForward(Exception):
    """Raised by a capturing hook once every requested layer has been seen: the rest of the forward is skipped."""


def layer_names(model: nn.Module) -> list[str]:
    """Every named submodule of ``model`` (the names ``stitch``, ``get_activations`` and ``layer_similarity``
    accept), in order."""
    return [name for name, _ in model.named_modules() if name]


def name_list(names: Sequence[str], limit: int = 120) -> str:
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
            f"{name_list(layer_names(model))}"
        )
    return modules[name]


def as_layer_list(layers: str | Sequence[str], argument: str = "layers") -> list[str]:
    names = [layers] if isinstance(layers, str) else list(layers)
    if not names:
        raise ValueError(f"{argument}: expected at least one layer name")
    if len(set(names)) != len(names):
        raise ValueError(f"{argument}: names repeat: {names}")
    return names


def block_layers(model: nn.Module) -> list[str]:
    """The names of the blocks of ``model``'s longest ``nn.ModuleList`` (a transformer's layers, a CNN's stages):
    the default "every layer" of a model. Empty if it has no ``ModuleList``."""
    lists = [(name, module) for name, module in model.named_modules() if isinstance(module, nn.ModuleList)]
    if not lists:
        return []
    name, longest = max(lists, key=lambda item: len(item[1]))
    return [f"{name}.{index}" if name else str(index) for index in range(len(longest))]


def model_device(model: nn.Module) -> torch.device:
    parameter = next(model.parameters(), None)
    if parameter is None:
        parameter = next(model.buffers(), None)
    return parameter.device if parameter is not None else torch.device("cpu")


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


@contextmanager
def capturing(
    model: nn.Module, layers: Sequence[str], *, argument: str = "layers", output: str = "tensor"
) -> Iterator[dict[str, torch.Tensor]]:
    """Hooks on ``layers`` of ``model`` for the block: run the model inside it; the yielded dict then holds each
    layer's (first) output, in the order of ``layers``. The forward pass stops once all were seen (the block ends
    there, without error). A layer that never ran is an error naming it.

    ``output="tensor"``: a layer must output one tensor. ``"first"``: a tuple or list output gives its first item
    (Hugging Face layers return ``(hidden_states, ...)``).
    """
    modules = {name: resolve_layer(model, name, argument) for name in layers}
    captured: dict[str, torch.Tensor] = {}

    def hook_for(name: str) -> Callable[..., None]:
        def hook(_module: nn.Module, _inputs: Any, value: Any) -> None:
            if name in captured:
                return
            if output == "first" and isinstance(value, (tuple, list)) and value:
                value = value[0]
            if not isinstance(value, torch.Tensor):
                raise TypeError(
                    f"{argument}: {name!r} outputs a {type(value).__name__}, not a tensor; choose a layer whose output "
                    "is one tensor (e.g. a submodule of it)"
                )
            captured[name] = value
            if len(captured) == len(modules):
                raise StopForward

        return hook

    handles = [module.register_forward_hook(hook_for(name)) for name, module in modules.items()]
    try:
        yield captured
    except StopForward:
        pass
    finally:
        for handle in handles:
            handle.remove()
    missing = [name for name in modules if name not in captured]
    if missing:
        raise RuntimeError(f"{argument}: {missing} were not called in {type(model).__name__}'s forward pass")
    ordered = {name: captured[name] for name in modules}
    captured.clear()
    captured.update(ordered)
