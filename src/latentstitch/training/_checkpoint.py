"""Checkpoints as safetensors + JSON (never pickle): model weights, optimiser state and training metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_model, save_file, save_model
from torch import nn

from latentstitch._core.atomic import atomic_path, write_text
from latentstitch._core.persist import read_json, read_safetensors

MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
METADATA_FILE = "checkpoint.json"


def writable_folder(folder: Path, name: str) -> None:
    """Create ``folder`` (and its parents) or raise a ValueError naming ``name``."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{name}: {str(folder)!r} exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"{name}: cannot create the folder {str(folder)!r} ({error.strerror or error})") from None


def save_checkpoint(
    directory: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write ``model.safetensors`` (the state dict: parameters and persistent buffers, anchors included),
    ``optimizer.safetensors`` (the optimiser's tensor state) and ``checkpoint.json`` (the optimiser's
    hyper-parameters and scalar state, plus ``metadata``) to ``directory``; return it.

    Each file is written atomically (a temporary file renamed onto it): an interrupted save leaves every file
    either as it was or whole. Tensors shared between parameters (tied weights) are stored once. The file layout
    is plain: the model file opens with any safetensors reader, keyed by ``state_dict`` names.
    """
    directory = Path(directory)
    writable_folder(directory, "directory")
    with atomic_path(directory / MODEL_FILE, option="directory") as temporary:
        save_model(model, str(temporary))
    record: dict[str, Any] = {"metadata": metadata or {}}
    if optimizer is not None:
        tensors, scalars = {}, {}
        state = optimizer.state_dict()
        for param_id, entries in state["state"].items():
            for name, value in entries.items():
                if isinstance(value, torch.Tensor):
                    tensors[f"{param_id}.{name}"] = value.detach().contiguous().cpu()
                else:
                    scalars[f"{param_id}.{name}"] = value
        with atomic_path(directory / OPTIMIZER_FILE, option="directory") as temporary:
            save_file(tensors, str(temporary))
        record["optimizer"] = {"param_groups": state["param_groups"], "scalars": scalars}
    try:
        text = json.dumps(record, indent=2)
    except TypeError as error:
        raise TypeError(f"metadata or optimizer hyper-parameters are not JSON-serialisable: {error}") from None
    write_text(directory / METADATA_FILE, text + "\n", option="directory")
    return directory


def load_checkpoint(
    directory: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    strict: bool = True,
) -> dict[str, Any]:
    """Restore ``model`` (and ``optimizer``, if given) from ``save_checkpoint``'s files; return the metadata.

    Tensors are loaded onto the device of the model's parameters. The optimiser must have been built over the
    same parameters in the same order. Every file is checked before anything is loaded (readable, the model's
    tensor names and shapes, the optimiser state's layout); every error names the checkpoint folder.
    """
    directory = Path(directory)
    where = repr(str(directory))
    if not directory.is_dir():
        raise ValueError(f"directory: no checkpoint folder at {where}")
    _, tensors = read_safetensors(directory / MODEL_FILE, "directory")
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    expected = {name: tuple(value.shape) for name, value in model.state_dict().items()}
    found = {name: tuple(value.shape) for name, value in tensors.items()}
    wrong = sorted(n for n in found.keys() & expected.keys() if found[n] != expected[n])
    missing, extra = sorted(expected.keys() - found.keys()), sorted(found.keys() - expected.keys())
    # tied weights are stored once by save_model: a missing name may be the alias of a stored one
    if wrong or (strict and extra) or (strict and missing and not _aliases_only(model, missing, found)):
        parts = [f"{n} {found[n]} vs the model's {expected[n]}" for n in wrong[:3]]
        parts += [f"missing {', '.join(missing[:3])}"] if missing else []
        parts += [f"unexpected {', '.join(extra[:3])}"] if extra else []
        raise ValueError(f"directory: {where} holds a checkpoint of another model ({'; '.join(parts)})")
    load_model(model, str(directory / MODEL_FILE), strict=strict, device=str(device))  # restores tied weights
    metadata_path = directory / METADATA_FILE
    record = read_json(metadata_path, "directory") if metadata_path.exists() else {}
    if optimizer is not None:
        if not isinstance(record, dict) or "optimizer" not in record:
            raise ValueError(f"optimizer: the checkpoint in {where} holds no optimiser state")
        _, saved = read_safetensors(directory / OPTIMIZER_FILE, "directory")
        try:
            state: dict[int, dict[str, Any]] = {}
            for key, value in saved.items():
                param_id, name = key.split(".", 1)
                state.setdefault(int(param_id), {})[name] = value.to(device)
            for key, value in record["optimizer"]["scalars"].items():
                param_id, name = key.split(".", 1)
                state.setdefault(int(param_id), {})[name] = value
            optimizer.load_state_dict({"state": state, "param_groups": record["optimizer"]["param_groups"]})
        except (KeyError, TypeError, ValueError, RuntimeError) as error:
            detail = " ".join(str(error).split())[:200]
            raise ValueError(
                f"directory: {where} holds an optimiser state this optimiser cannot take ({detail})"
            ) from None
    return record.get("metadata", {}) if isinstance(record, dict) else {}


def _aliases_only(model: nn.Module, missing: list[str], found: dict[str, tuple]) -> bool:
    """Whether every missing name shares its storage with a stored tensor (tied weights are saved once)."""
    state = model.state_dict()
    stored = {state[name].data_ptr() for name in found if name in state}
    return all(state[name].data_ptr() in stored for name in missing)
