"""Saving and loading stitchers: one safetensors file, arrays as tensors and everything else as JSON in its header.

Nothing is pickled and nothing is imported by name: a file names its class, and only the classes of this package
(plus the scalers they hold) can be rebuilt. Learned state is every attribute with a trailing underscore:
arrays become tensors, ``CrossMoments`` its state dict, nested estimators (a translator's stitcher and scalers) are
stored recursively under their attribute's name, and numbers, strings and None go to the JSON header.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from latentstitch._moments import CrossMoments
from latentstitch.relative import StandardScaling
from latentstitch.stitching._base import _AffineMap

FORMAT = "latentstitch.stitching/1"
_HEADER_KEY = "latentstitch"


def _classes() -> dict[str, type]:
    return {**_AffineMap._registry, "StandardScaling": StandardScaling}


def _encode_params(params: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, value in params.items():
        if isinstance(value, BaseEstimator):
            out[name] = {"estimator": type(value).__name__, "params": _encode_params(value.get_params(deep=False))}
        else:
            out[name] = {"value": _plain(value, name)}
    return out


def _decode_params(encoded: dict[str, Any]) -> dict[str, Any]:
    return {
        name: _build(item["estimator"], item["params"]) if "estimator" in item else item["value"]
        for name, item in encoded.items()
    }


def _build(class_name: str, encoded_params: dict[str, Any]) -> BaseEstimator:
    classes = _classes()
    if class_name not in classes:
        raise ValueError(f"path: holds an unknown class {class_name!r}; loadable classes: {', '.join(sorted(classes))}")
    return classes[class_name](**_decode_params(encoded_params))


def _plain(value: Any, name: str) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [_plain(v, name) for v in value]
    raise TypeError(f"{name}: cannot save a value of type {type(value).__name__}")


def _learned_state(estimator: BaseEstimator, prefix: str, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    learned = {}
    for name, value in vars(estimator).items():
        if not name.endswith("_") or name.startswith("_"):
            continue
        key = prefix + name
        if isinstance(value, (np.ndarray, torch.Tensor)):
            tensors[key] = torch.as_tensor(value).detach().cpu().clone(memory_format=torch.contiguous_format)
            learned[name] = {"array": "numpy" if isinstance(value, np.ndarray) else "torch"}
        elif isinstance(value, CrossMoments):
            tensors.update(
                {
                    f"{key}.{k}": v.detach().cpu().clone(memory_format=torch.contiguous_format)
                    for k, v in value.state_dict().items()
                }
            )
            learned[name] = {"moments": value.precision}
        elif isinstance(value, BaseEstimator):
            learned[name] = {
                "estimator": type(value).__name__,
                "params": _encode_params(value.get_params(deep=False)),
                "learned": _learned_state(value, key + ".", tensors),
            }
        else:
            learned[name] = {"value": _plain(value, key)}
    return learned


def _restore(estimator: BaseEstimator, learned: dict[str, Any], prefix: str, tensors: dict[str, torch.Tensor]) -> None:
    for name, item in learned.items():
        key = prefix + name
        if "array" in item:
            value = tensors[key].numpy() if item["array"] == "numpy" else tensors[key]
        elif "moments" in item:
            state = {k[len(key) + 1 :]: v for k, v in tensors.items() if k.startswith(key + ".")}
            value = CrossMoments.from_state_dict(state, precision=item["moments"])
        elif "estimator" in item:
            value = _build(item["estimator"], item["params"])
            _restore(value, item["learned"], key + ".", tensors)
        else:
            value = item["value"]
        setattr(estimator, name, value)


def save(estimator: _AffineMap, path: str | os.PathLike) -> None:
    from latentstitch import __version__

    check_is_fitted(estimator, "coef_")
    tensors: dict[str, torch.Tensor] = {}
    header = {
        "format": FORMAT,
        "version": __version__,
        "class": type(estimator).__name__,
        "params": _encode_params(estimator.get_params(deep=False)),
        "learned": _learned_state(estimator, "", tensors),
    }
    save_file(tensors, os.fspath(path), metadata={_HEADER_KEY: json.dumps(header)})


def load(path: str | os.PathLike, expected: type = _AffineMap) -> _AffineMap:
    """Read a stitcher written by ``save``. ``expected``: the class (or a base class) the file must hold."""
    with safe_open(os.fspath(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    if _HEADER_KEY not in metadata:
        raise ValueError(f"path: {os.fspath(path)!r} is a safetensors file but was not written by latentstitch")
    header = json.loads(metadata[_HEADER_KEY])
    if header.get("format") != FORMAT:
        raise ValueError(f"path: unsupported format {header.get('format')!r}; this version reads {FORMAT!r}")
    estimator = _build(header["class"], header["params"])
    if not isinstance(estimator, expected):
        raise ValueError(f"path: holds a {header['class']}, not a {expected.__name__}")
    _restore(estimator, header["learned"], "", tensors)
    return estimator
