"""Saving and loading fitted estimators: one safetensors file, arrays as tensors and everything else as JSON in its
header. Never pickle.

Nothing is imported by name: a file names its class, and only classes registered here (every subclass of
``Persistable``) can be rebuilt. Learned state is every attribute with a trailing underscore: arrays become
tensors, ``CrossMoments`` its state dict, nested estimators (a translator's stitcher and scalers, a bridge's
route) are stored recursively under their attribute's name; numbers, strings, None, lists and string-keyed dicts
of those go to the JSON header.

``load`` checks the whole file before it builds anything: that the path is a readable safetensors file written by
latentstitch, that the class is known and the parameters are the class's own, that every learned name is a
learned-state name (``name_``) that does not shadow a method, that every tensor the header names is present and
no other tensor is, and finally the class's own ``_check_params()`` (the parameters' types and ranges, as ``fit``
checks them) and ``_check_loaded()`` (shapes that must agree, finite values). Every error names the path and what
is wrong.

``read_safetensors`` and ``read_json`` are the validated readers every other loader of the package uses
(stitching layers, checkpoints, activation stores, encoder caches).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from latentstitch._core.atomic import atomic_path
from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import check_declared, check_output_path
from latentstitch._version import __version__

FORMAT = "latentstitch/1"
READABLE_FORMATS = (FORMAT, "latentstitch.stitching/1")  # files of earlier versions stay readable
HEADER_KEY = "latentstitch"

_CLASSES: dict[str, type] = {}


def register(cls: type) -> type:
    """Make ``cls`` loadable by name (a class decorator; ``Persistable`` subclasses are registered already)."""
    _CLASSES[cls.__name__] = cls
    return cls


class Persistable:
    """``save(path)`` / ``load(path)`` for an estimator: one safetensors file, validated on load.

    A subclass may define ``_check_loaded(self)``, raising ``ValueError`` when restored learned state is
    inconsistent (e.g. a coefficient matrix whose shape disagrees with ``n_features_in_``).
    """

    _persist_registered: ClassVar[bool] = True

    #: learned name -> the function that rebuilds its typed value (results as dataclasses with ``to_dict``) from
    #: the JSON form it is saved in.
    _learned_types: ClassVar[dict[str, Callable[[Any], Any]]] = {}

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        """Register the class for ``load`` by name, unless it is private or an ``abstract=True`` base class."""
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_") and not abstract:
            register(cls)

    def save(self, path: str | os.PathLike) -> None:
        """Write parameters and learned state to one safetensors file (never pickle). Arrays come back on the CPU."""
        save(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike):
        """Read an estimator written by ``save``; refuses files of other classes than this one (or its subclasses)
        and files that fail validation, naming the path and what is wrong."""
        return load(path, expected=cls)

    #: parameter name -> its rule (``latentstitch._core.params.rule``): every constructor parameter, declared once.
    _parameter_constraints: ClassVar[dict[str, Callable[[Any, str], Any]]] = {}

    def _check_params(self) -> None:
        """Validate the constructor's parameters by their declared rules (``_parameter_constraints``), naming the
        one at fault. Called by ``fit`` and by ``load``, so a file with a mistyped parameter is refused when it is
        read. A subclass with a rule spanning several parameters overrides this and calls ``super()`` first."""
        check_declared(self)

    def _check_loaded(self) -> None:
        """Check restored learned state for consistency (override in subclasses)."""


# --- writing ---------------------------------------------------------------------------------------------------


def _plain(value: Any, name: str) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if np.isfinite(value) else {"float": str(value)}  # JSON has no NaN/inf
    if isinstance(value, (tuple, list)):
        return [_plain(v, name) for v in value]
    if dataclasses.is_dataclass(value) and hasattr(value, "to_dict"):  # a typed result: saved as its JSON form
        return _plain(value.to_dict(), name)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: _plain(v, f"{name}[{k!r}]") for k, v in value.items()}}
    raise TypeError(f"{name}: cannot save a value of type {type(value).__name__}")


def _unplain(value: Any) -> Any:
    if isinstance(value, list):
        return [_unplain(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"float"}:
            return float(value["float"])
        if set(value) == {"dict"}:
            return {k: _unplain(v) for k, v in value["dict"].items()}
    return value


def _encode_params(params: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, value in params.items():
        if isinstance(value, BaseEstimator):
            out[name] = {"estimator": type(value).__name__, "params": _encode_params(value.get_params(deep=False))}
        else:
            out[name] = {"value": _plain(value, name)}
    return out


def _tensor(value: np.ndarray | torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(value).detach().cpu().clone(memory_format=torch.contiguous_format)


def _learned_state(estimator: BaseEstimator, prefix: str, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    learned = {}
    for name, value in vars(estimator).items():
        if not name.endswith("_") or name.startswith("_"):
            continue
        key = prefix + name
        if isinstance(value, (np.ndarray, torch.Tensor)):
            tensors[key] = _tensor(value)
            learned[name] = {"array": "numpy" if isinstance(value, np.ndarray) else "torch"}
        elif isinstance(value, CrossMoments):
            tensors.update({f"{key}.{k}": _tensor(v) for k, v in value.state_dict().items()})
            learned[name] = {"moments": value.precision, "fields": sorted(value.state_dict())}
        elif isinstance(value, BaseEstimator):
            learned[name] = {
                "estimator": type(value).__name__,
                "params": _encode_params(value.get_params(deep=False)),
                "learned": _learned_state(value, key + ".", tensors),
            }
        else:
            learned[name] = {"value": _plain(value, key)}
    return learned


def save(estimator: BaseEstimator, path: str | os.PathLike) -> None:
    """Write a fitted estimator to ``path`` (one safetensors file; see the module docstring)."""
    from safetensors.torch import save_file

    check_is_fitted(estimator)
    target = check_output_path(path, "path")
    tensors: dict[str, torch.Tensor] = {}
    header = {
        "format": FORMAT,
        "version": __version__,
        "class": type(estimator).__name__,
        "params": _encode_params(estimator.get_params(deep=False)),
        "learned": _learned_state(estimator, "", tensors),
    }
    with atomic_path(target, option="path") as temporary:
        save_file(tensors, os.fspath(temporary), metadata={HEADER_KEY: json.dumps(header)})


# --- reading ---------------------------------------------------------------------------------------------------


class _Invalid(ValueError):
    pass


def read_safetensors(path: str | os.PathLike, name: str = "path") -> tuple[dict[str, str], dict[str, torch.Tensor]]:
    """The metadata and tensors of a safetensors file, every failure one ValueError naming ``name`` and the path
    (missing, a folder, empty, damaged, truncated, not safetensors). The one reader of every loader."""
    from safetensors import safe_open

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name}: expected a file path (str or os.PathLike), got {type(path).__name__}")
    source = Path(os.fspath(path))
    where = repr(str(source))
    if not source.exists():
        raise ValueError(f"{name}: no such file: {where}")
    if source.is_dir():
        raise ValueError(f"{name}: {where} is a folder, not a safetensors file")
    if source.stat().st_size == 0:
        raise ValueError(f"{name}: {where} is empty, not a safetensors file")
    try:
        with safe_open(os.fspath(source), framework="pt") as handle:
            metadata = handle.metadata() or {}
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    except Exception as error:  # safetensors raises its own error types (and OSError) for damaged files
        detail = " ".join(str(error).split()) or type(error).__name__
        raise ValueError(f"{name}: {where} is not a readable safetensors file ({detail})") from None
    return metadata, tensors


def read_json(path: Path, name: str = "path") -> Any:
    """A JSON file, a missing or damaged one being a ValueError naming ``name`` and the path."""
    where = repr(str(path))
    if not path.is_file():
        raise ValueError(f"{name}: no such file: {where}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{name}: {where} is not valid JSON ({error})") from None


def _read(path: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    where = repr(str(path))
    metadata, tensors = read_safetensors(path)
    if HEADER_KEY not in metadata:
        raise ValueError(f"path: {where} is a safetensors file but was not written by latentstitch")
    try:
        header = json.loads(metadata[HEADER_KEY])
    except json.JSONDecodeError as error:
        raise ValueError(f"path: {where} has a damaged latentstitch header ({error})") from None
    if not isinstance(header, dict):
        raise ValueError(f"path: {where} has a damaged latentstitch header (not a JSON object)")
    if header.get("format") not in READABLE_FORMATS:
        raise ValueError(
            f"path: {where} has the unsupported format {header.get('format')!r}; this version reads {FORMAT!r}"
        )
    for key in ("class", "params", "learned"):
        if key not in header:
            raise ValueError(f"path: {where} has a damaged latentstitch header (no {key!r} entry)")
    return header, tensors


#: The packages that define persistable estimators. A class registers itself when its module is imported; a file
#: read before that package was imported (the package root imports lazily) finds it after these are imported by
#: name. A plugin-style lookup: the core names them as strings and imports nothing above it at import time.
ESTIMATOR_PACKAGES = (
    "latentstitch.stitching",
    "latentstitch.alignment",
    "latentstitch.relative",
    "latentstitch.bridge",
)


def registered_classes() -> dict[str, type]:
    """Every loadable class, by name: the estimator packages are imported first (each class registers itself when
    its module is imported, and the package root imports lazily)."""
    for package in ESTIMATOR_PACKAGES:
        importlib.import_module(package)
    return dict(_CLASSES)


def _class_of(class_name: Any) -> type:
    classes = _CLASSES if isinstance(class_name, str) and class_name in _CLASSES else registered_classes()
    if not isinstance(class_name, str) or class_name not in classes:
        raise _Invalid(f"holds an unknown class {class_name!r}; loadable classes: {', '.join(sorted(classes))}")
    return classes[class_name]


def _check_encoded_params(cls: type, encoded: Any, where: str) -> None:
    if not isinstance(encoded, dict):
        raise _Invalid(f"{where}: parameters must be a JSON object")
    allowed = set(cls._get_param_names()) if issubclass(cls, BaseEstimator) else set()
    unknown = sorted(set(encoded) - allowed)
    if unknown:
        raise _Invalid(
            f"{where}: unknown parameter(s) {', '.join(unknown)} for {cls.__name__}; "
            f"its parameters are {', '.join(sorted(allowed)) or 'none'}"
        )
    for name, item in encoded.items():
        if not isinstance(item, dict) or not ({"value"} == set(item) or {"estimator", "params"} == set(item)):
            raise _Invalid(f"{where}: parameter {name!r} is damaged")
        if "estimator" in item:
            _check_encoded_params(_class_of(item["estimator"]), item["params"], f"{where}.{name}")


def _check_learned(cls: type, learned: Any, prefix: str, tensors: dict[str, torch.Tensor], used: set[str]) -> None:
    if not isinstance(learned, dict):
        raise _Invalid(f"learned state of {prefix or 'the estimator'} must be a JSON object")
    for name, item in learned.items():
        key = prefix + name
        if not (isinstance(name, str) and name.isidentifier() and name.endswith("_") and not name.startswith("_")):
            raise _Invalid(f"{key!r} is not a learned-state name (letters, ending in '_')")
        if hasattr(cls, name):
            raise _Invalid(f"{key!r} would shadow {cls.__name__}.{name}")
        if not isinstance(item, dict):
            raise _Invalid(f"learned entry {key!r} is damaged")
        if "array" in item:
            if key not in tensors:
                raise _Invalid(f"the header names the tensor {key!r} but the file does not hold it")
            used.add(key)
        elif "moments" in item:
            fields = item.get("fields") or [k[len(key) + 1 :] for k in tensors if k.startswith(key + ".")]
            missing = [f for f in fields if f"{key}.{f}" not in tensors]
            if missing or not fields:
                raise _Invalid(f"the statistics {key!r} are incomplete (missing {', '.join(missing) or 'all'})")
            used.update(f"{key}.{f}" for f in fields)
        elif "estimator" in item:
            nested = _class_of(item["estimator"])
            _check_encoded_params(nested, item.get("params", {}), key)
            _check_learned(nested, item.get("learned", {}), key + ".", tensors, used)
        elif "value" not in item:
            raise _Invalid(f"learned entry {key!r} is damaged")


def _build(class_name: str, encoded_params: dict[str, Any]) -> BaseEstimator:
    cls = _class_of(class_name)
    params = {
        name: _build(item["estimator"], item["params"]) if "estimator" in item else _unplain(item["value"])
        for name, item in encoded_params.items()
    }
    return cls(**params)


def _restore(estimator: BaseEstimator, learned: dict[str, Any], prefix: str, tensors: dict[str, torch.Tensor]) -> None:
    for name, item in learned.items():
        key = prefix + name
        if "array" in item:
            tensor = tensors[key]
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise _Invalid(f"{key} holds NaN or inf")
            value = tensor.numpy() if item["array"] == "numpy" else tensor
        elif "moments" in item:
            state = {k[len(key) + 1 :]: v for k, v in tensors.items() if k.startswith(key + ".")}
            value = CrossMoments.from_state_dict(state, precision=item["moments"])
        elif "estimator" in item:
            value = _build(item["estimator"], item["params"])
            _restore(value, item["learned"], key + ".", tensors)
            _check_consistent(value, key)
        else:
            value = _unplain(item["value"])
            typed = getattr(type(estimator), "_learned_types", {}).get(name)
            value = value if typed is None else typed(value)
        setattr(estimator, name, value)


def _check_consistent(estimator: BaseEstimator, key: str) -> None:
    for check in (getattr(estimator, "_check_params", None), getattr(estimator, "_check_loaded", None)):
        if check is None:
            continue
        try:
            check()
        except (ValueError, TypeError) as error:
            raise _Invalid(f"{key or type(estimator).__name__}: {error}") from None


def load(path: str | os.PathLike, expected: type = BaseEstimator) -> Any:
    """Read an estimator written by ``save``. ``expected``: the class (or a base class) the file must hold."""
    source = Path(os.fspath(path))
    header, tensors = _read(source)
    where = repr(str(source))
    try:
        cls = _class_of(header["class"])
        if not issubclass(cls, expected):
            raise _Invalid(f"holds a {header['class']}, not a {expected.__name__}")
        _check_encoded_params(cls, header["params"], "parameters")
        used: set[str] = set()
        _check_learned(cls, header["learned"], "", tensors, used)
        extra = sorted(set(tensors) - used)
        if extra:
            raise _Invalid(f"holds tensors the header does not name: {', '.join(extra[:5])}")
        estimator = _build(header["class"], header["params"])
        _restore(estimator, header["learned"], "", tensors)
        _check_consistent(estimator, "")
    except _Invalid as error:
        raise ValueError(f"path: {where} {error}") from None
    except (TypeError, ValueError, KeyError) as error:
        raise ValueError(f"path: {where} could not be restored ({error})") from None
    return estimator
