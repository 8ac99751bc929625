"""Saving and loading stitching: fitted stitchers (one safetensors file, ``latentstitch._core.persist``, shared by
every estimator) and torch stitching layers (``save_stitching_layer`` / ``load_stitching_layer``)."""

from __future__ import annotations

import json
import os
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from latentstitch._core.atomic import atomic_path
from latentstitch._core.params import check_choice, check_output_path, check_positive_int
from latentstitch._core.persist import FORMAT, read_safetensors, save
from latentstitch._core.persist import load as _load
from latentstitch.stitching._base import AffineMap
from latentstitch.stitching._layers import LowRankStitch, affine_map

__all__ = ["FORMAT", "LAYER_FORMAT", "load", "load_stitching_layer", "save", "save_stitching_layer"]

LAYER_FORMAT = "latentstitch.stitching_layer/1"
_HEADER_KEY = "latentstitch"


def load(path: str | os.PathLike, expected: type = AffineMap) -> AffineMap:
    """Read a stitcher written by ``save``. ``expected``: the class (or a base class) the file must hold."""
    return _load(path, expected=expected)


def save_stitching_layer(layer: nn.Module, path: str | os.PathLike, metadata: dict[str, Any] | None = None) -> None:
    """Write a stitching layer (1x1 ``Conv2d``, ``Linear`` or ``LowRankStitch``) to one safetensors file.

    The parameters are the file's tensors; its kind, sizes and ``metadata`` (JSON-serialisable, e.g. the layer
    names it connects) are JSON in the header. Nothing is pickled; ``load_stitching_layer`` rebuilds it.
    """
    affine_map(layer)  # checks the type
    target = check_output_path(path, "path")
    if isinstance(layer, LowRankStitch):
        kind, sizes = "low_rank", {"in_features": layer.w1.shape[0], "out_features": layer.w2.shape[1]}
        sizes["rank"] = layer.rank
    elif isinstance(layer, nn.Conv2d):
        kind, sizes = "conv1x1", {"in_features": layer.in_channels, "out_features": layer.out_channels}
    else:
        kind, sizes = "linear", {"in_features": layer.in_features, "out_features": layer.out_features}
    tensors = {name: value.detach().cpu().contiguous() for name, value in layer.state_dict().items()}
    header = {"format": LAYER_FORMAT, "kind": kind, **sizes, "bias": "bias" in tensors, "metadata": metadata or {}}
    try:
        text = json.dumps(header)
    except TypeError as error:
        raise TypeError(f"metadata: not JSON-serialisable: {error}") from None
    with atomic_path(target) as temporary:
        save_file(tensors, os.fspath(temporary), metadata={_HEADER_KEY: text})


def load_stitching_layer(path: str | os.PathLike, *, with_metadata: bool = False) -> Any:
    """Read a layer written by ``save_stitching_layer`` (on the CPU); with ``with_metadata``, ``(layer, metadata)``.

    The whole file is checked before the layer is built: a readable safetensors file with a header of this format,
    a known kind with positive sizes, exactly the layer's tensors with the layer's shapes, finite values. Every
    error names the path and what is wrong."""
    metadata, tensors = read_safetensors(path, "path")
    where = repr(os.fspath(path))
    try:
        header = json.loads(metadata[_HEADER_KEY])
    except KeyError:
        raise ValueError(f"path: {where} was not written by save_stitching_layer (no latentstitch header)") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"path: {where} has a damaged header ({error})") from None
    if not isinstance(header, dict) or header.get("format") != LAYER_FORMAT:
        found = header.get("format") if isinstance(header, dict) else header
        raise ValueError(f"path: {where} has the format {found!r}, not a stitching layer ({LAYER_FORMAT!r})")
    try:
        layer = _empty_layer(header)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"path: {where} has a damaged header ({error})") from None
    expected = {name: tuple(value.shape) for name, value in layer.state_dict().items()}
    found = {name: tuple(value.shape) for name, value in tensors.items()}
    if expected != found:
        raise ValueError(f"path: {where} holds tensors {found}, but its header describes a layer with {expected}")
    for name, value in tensors.items():
        if not bool(torch.isfinite(value).all()):
            raise ValueError(f"path: {where} holds NaN or inf in {name!r}")
    layer.load_state_dict(tensors)
    return (layer, header.get("metadata", {})) if with_metadata else layer


def _empty_layer(header: dict[str, Any]) -> nn.Module:
    """The layer a stitching-layer header describes, before its tensors are loaded."""
    kind = check_choice(header["kind"], "kind", ("low_rank", "conv1x1", "linear"))
    p = check_positive_int(header["in_features"], "in_features")
    q = check_positive_int(header["out_features"], "out_features")
    if kind == "low_rank":
        return LowRankStitch(p, q, header["rank"])
    bias = header["bias"]
    if not isinstance(bias, bool):
        raise TypeError(f"bias: expected true or false, got {bias!r}")
    if kind == "conv1x1":
        return nn.Conv2d(p, q, kernel_size=1, bias=bias)
    return nn.Linear(p, q, bias=bias)
