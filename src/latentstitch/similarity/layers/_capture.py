"""Running a model over one batch with forward hooks on named layers, and pooling each layer's output into rows:
the model side of ``layer_similarity`` and ``layer_moments``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from latentstitch._core.hooks import as_layer_list, block_layers, capturing, model_device


def resolve_layers(model: nn.Module, layers: str | Sequence[str] | None, side: str) -> list[str]:
    argument = f"layers_{side}"
    if not isinstance(model, nn.Module):
        raise TypeError(f"model_{side}: expected a torch nn.Module, got {type(model).__name__}")
    if layers is None:
        found = block_layers(model)
        if not found:
            raise ValueError(f"{argument}: {type(model).__name__} has no nn.ModuleList of blocks; name the layers")
        return found
    return as_layer_list(layers, argument)


def split_batch(batch: Any, separate: bool, index: int) -> tuple[Any, Any]:
    if separate:
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise ValueError(f"data: with separate_inputs, batch {index} must be a pair (inputs_a, inputs_b)")
        return batch[0], batch[1]
    if isinstance(batch, (tuple, list)) and not isinstance(batch, Mapping):
        if not batch:
            raise ValueError(f"data: batch {index} is empty")
        batch = batch[0]  # (inputs, labels, ...)
    return batch, batch


def run_model(model: nn.Module, inputs: Any) -> None:
    """Run ``model`` on a batch, moved to its device."""
    device = model_device(model)
    if isinstance(inputs, Mapping):
        model(**{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()})
        return
    if isinstance(inputs, np.ndarray):
        inputs = torch.from_numpy(np.ascontiguousarray(inputs))
    if not isinstance(inputs, torch.Tensor):
        raise TypeError(f"data: expected batches of tensors, arrays or mappings of them, got {type(inputs).__name__}")
    floating = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    model(inputs.to(device=device, dtype=floating if floating and inputs.is_floating_point() else inputs.dtype))


def pooled_layers(
    model: nn.Module, inputs: Any, layers: list[str], pooling: str, argument: str
) -> dict[str, torch.Tensor]:
    with capturing(model, layers, argument=argument, output="first") as captured:
        run_model(model, inputs)
    mask = inputs.get("attention_mask") if isinstance(inputs, Mapping) else None
    return {name: pool(value, mask, pooling, name) for name, value in captured.items()}


def pool(states: torch.Tensor, mask: torch.Tensor | None, pooling: str, name: str = "layer") -> torch.Tensor:
    """One layer's output as rows: (batch, d) as it is; (batch, tokens, d) and channels-first maps (batch, C, ...)
    pooled per ``pooling`` (see ``layer_similarity``). Sums are taken in float32 at least."""
    if states.ndim == 2:
        return states
    if states.ndim < 2:
        raise ValueError(f"layers: {name!r} outputs shape {tuple(states.shape)}; expected (batch, ...) activations")
    if states.ndim > 3:  # a convolutional map (batch, channels, *positions): positions play the tokens
        states = states.flatten(2).transpose(1, 2)
        mask = None
    work = states if states.dtype == torch.float64 else states.float()
    if mask is not None and mask.shape != states.shape[:2]:
        raise ValueError(
            f"layers: {name!r} outputs shape {tuple(states.shape)}, but the attention mask is {tuple(mask.shape)}; "
            "choose layers whose output is (batch, tokens, features)"
        )
    if pooling == "first":
        return states[:, 0]
    if pooling == "tokens":
        return work.reshape(-1, work.shape[-1]) if mask is None else work[mask.to(work.device).bool()]
    if mask is None:
        return work.mean(dim=1)
    weights = mask.to(device=work.device, dtype=work.dtype).unsqueeze(-1)
    return (work * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
