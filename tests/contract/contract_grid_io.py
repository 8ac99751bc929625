"""The generated grid of the contract suite, second part: files (every loader and saver), training, Frankenstein
stitching of torch models, data readers, encoders, distributed entry points and the command line.

File cases damage a valid file in every way a user meets (empty, truncated, garbage, text, a folder, missing, a
file of another kind, a header naming missing tensors, tensors of the wrong shape, unknown or mistyped
parameters, extra entries) and expect one clear error naming the path.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from contract_cases import Case, cli_outcome, close_to, finite_in, output_check
from contract_grid import SCRATCH, data_pair, fit_pair, make_estimator
from contract_registry import BAD_COUNTS, BAD_SEEDS, CLI, CLI_WITH_OUT, ESTIMATORS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


class Workspace:
    """A fresh folder per case, under one temporary root."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="latentstitch-contract-", dir=SCRATCH))
        self.count = 0

    def folder(self) -> Path:
        self.count += 1
        path = self.root / f"case{self.count:04d}"
        path.mkdir()
        return path


# --- damaging safetensors files -------------------------------------------------------------------------------------


def _rewrite(path: Path, change: Callable[[dict, dict], None]) -> None:
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(path), framework="pt") as handle:
        metadata = dict(handle.metadata() or {})
        tensors = {k: handle.get_tensor(k) for k in handle.keys()}
    change(tensors, metadata)
    save_file(tensors, str(path), metadata=metadata)


def _header_change(change: Callable[[dict, dict], None]) -> Callable[[dict, dict], None]:
    """A change of the JSON header stored under metadata['latentstitch']."""

    def apply(tensors: dict, metadata: dict) -> None:
        header = json.loads(metadata["latentstitch"])
        change(tensors, header)
        metadata["latentstitch"] = json.dumps(header)

    return apply


RAW_DAMAGE: dict[str, Callable[[Path], Path]] = {
    "empty file": lambda p: (p.write_bytes(b""), p)[1],
    "truncated": lambda p: (p.write_bytes(p.read_bytes()[: max(8, len(p.read_bytes()) // 2)]), p)[1],
    "garbage bytes": lambda p: (p.write_bytes(b"\xff" * 200), p)[1],
    "a text file": lambda p: (p.write_text("model weights, honestly: 0.1 0.2 0.3 " * 4), p)[1],
    "missing": lambda p: (p.unlink(), p)[1],
    "a folder": lambda p: (p.unlink(), p.mkdir(), p)[2],
}


def _foreign_safetensors(path: Path) -> Path:
    from safetensors.torch import save_file

    save_file({"weight": torch.zeros(3, 3)}, str(path))
    return path


def file_cases(
    family: str,
    target: str,
    make: Callable[[Path], Path],
    load: Callable[[Path], Any],
    workspace: Workspace,
    header_changes: dict[str, Callable[[dict, dict], None]] | None = None,
    tensor_changes: dict[str, Callable[[dict, dict], None]] | None = None,
) -> list[Case]:
    """Cases loading a file written by ``make(folder) -> path``, damaged in every way; each must be refused with
    an error naming the path."""

    def named_path(damage: Callable[[Path], Path]) -> Callable[[], Any]:
        def run() -> Any:
            return load(damage(make(workspace.folder())))

        return run

    cases = [
        Case(family, target, f"load: {label}", named_path(damage), names=(str(workspace.root),), valid=False)
        for label, damage in RAW_DAMAGE.items()
    ]
    cases.append(
        Case(
            family,
            target,
            "load: a safetensors file of another program",
            named_path(_foreign_safetensors_at),
            names=(str(workspace.root),),
            valid=False,
        )
    )
    for label, change in {**(header_changes or {}), **(tensor_changes or {})}.items():
        cases.append(
            Case(
                family,
                target,
                f"load: {label}",
                named_path(functools.partial(_apply_change, change)),
                names=(str(workspace.root),),
                valid=False,
            )
        )
    return cases


def _foreign_safetensors_at(path: Path) -> Path:
    path.unlink()
    return _foreign_safetensors(path)


def _apply_change(change: Callable[[dict, dict], None], path: Path) -> Path:
    _rewrite(path, change)
    return path


# --- estimators: persistence ------------------------------------------------------------------------------------


def _fitted_file(name: str, folder: Path) -> Path:
    a, b = fit_pair(name, 30)
    fitted = make_estimator(name).fit(a, b) if ESTIMATORS[name]["paired"] else make_estimator(name).fit(a)
    path = folder / f"{name}.safetensors"
    fitted.save(path)
    return path


def _load_estimator(name: str, path: Path) -> Any:
    from contract_grid import estimator_class

    return estimator_class(name).load(path)


def _learned_arrays(name: str) -> list[tuple[str, bool]]:
    a, b = fit_pair(name, 30)
    fitted = make_estimator(name).fit(a, b) if ESTIMATORS[name]["paired"] else make_estimator(name).fit(a)
    return [
        (k, torch.as_tensor(v).is_floating_point())
        for k, v in vars(fitted).items()
        if k.endswith("_") and isinstance(v, (np.ndarray, torch.Tensor))
    ]


def _grow(key: str) -> Callable[[dict, dict], None]:
    def change(tensors: dict, metadata: dict) -> None:
        value = tensors[key]
        tensors[key] = torch.zeros(*(s + 1 for s in value.shape), dtype=value.dtype) if value.ndim else value + 1

    return change


def _poison(key: str, fill: float) -> Callable[[dict, dict], None]:
    def change(tensors: dict, metadata: dict) -> None:
        tensors[key] = torch.full_like(tensors[key], fill)

    return change


def estimator_file_cases(name: str, workspace: Workspace) -> list[Case]:
    first_param = next(iter(make_estimator(name).get_params(deep=False)), None)
    header = {
        "header names a parameter the class lacks": _header_change(
            lambda t, h: h["params"].update(alpha_typo={"value": 1.0})
        ),
        "learned entry shadows a method": _header_change(lambda t, h: h["learned"].update(transform={"value": 1})),
        "header names a missing tensor": _header_change(lambda t, h: h["learned"].update(ghost_={"array": "numpy"})),
        "another class than asked for": _header_change(
            lambda t, h: h.update({"class": "Procrustes" if name != "Procrustes" else "LeastSquares"})
        ),
        "extra tensor": lambda t, m: t.update(payload=torch.zeros(3)),
    }
    if first_param is not None:
        header[f"mistyped parameter {first_param}"] = _header_change(
            lambda t, h: h["params"].update({first_param: {"value": "oops"}})
        )
    tensors = {}
    for key, floating in _learned_arrays(name):
        tensors[f"{key} of the wrong shape"] = _grow(key)
        if floating:  # an integer array (indices) cannot hold NaN
            tensors[f"NaN in {key}"] = _poison(key, math.nan)
    return file_cases(
        "file",
        name,
        functools.partial(_fitted_file, name),
        functools.partial(_load_estimator, name),
        workspace,
        header,
        tensors,
    )


# --- torch models for stitching -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def tiny_models() -> tuple[Any, Any, torch.Tensor, torch.Tensor]:
    from latentstitch.models import tiny10

    torch.manual_seed(0)
    net_a, net_b = tiny10(0.25).eval(), tiny10(0.25).eval()
    images = torch.rand(24, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    labels = torch.arange(24) % 10
    return net_a, net_b, images, labels


def _stitch_with(data: Any, **options: Any) -> Any:
    from latentstitch.stitching import affine_map, stitch

    net_a, net_b, _, _ = tiny_models()
    frank = stitch(net_a, net_b, "bn3", "bn3", "least_squares", data=data, **options)
    return affine_map(frank.stitching_layer)[0].detach()


def _activations(data: Any, **options: Any) -> Any:
    from latentstitch.stitching import get_activations

    net_a, _, _, _ = tiny_models()
    return get_activations(net_a, data, "bn2", **options)


def _task_loss(**options: Any) -> Any:
    from latentstitch.stitching import fit_task_loss, stitch

    net_a, net_b, images, labels = tiny_models()
    frank = stitch(net_a, net_b, "bn3", "bn3")
    settings = {"epochs": 1, "batch_size": 8, "progress": False, **options}
    return fit_task_loss(frank, (images, labels), **settings).history[-1]["loss"]


def _metrics(data: Any, **options: Any) -> Any:
    from latentstitch.stitching import stitch, stitch_metrics

    net_a, net_b, images, _ = tiny_models()
    frank = stitch(net_a, net_b, "bn3", "bn3", "identity", example=images[:2])
    return stitch_metrics(frank, data, **options)["agreement"]


def _initialize(**options: Any) -> Any:
    from latentstitch.stitching import stitch

    net_a, net_b, images, _ = tiny_models()
    return stitch(net_a, net_b, "bn3", "bn3", data=images, **options)


def _layer_pair() -> tuple[Any, Any]:
    return torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)


def stitching_cases(workspace: Workspace) -> list[Case]:
    from latentstitch.stitching import interpolate_layers, sparsify_layer

    _, _, images, labels = tiny_models()
    reference = functools.partial(_stitch_with, images)
    cases = [
        Case("stitching", "stitch", "float32 data", functools.partial(_stitch_with, images), check=finite_in()),
        Case(
            "stitching",
            "stitch",
            "float64 data",
            functools.partial(_stitch_with, images.double()),
            check=close_to(lambda: reference().numpy(), rtol=1e-3, atol=1e-4),
        ),
        Case(
            "stitching",
            "stitch",
            "numpy data",
            functools.partial(_stitch_with, images.numpy()),
            check=close_to(lambda: reference().numpy(), rtol=1e-5, atol=1e-6),
        ),
        Case(
            "stitching",
            "stitch",
            "uint8 data",
            functools.partial(_stitch_with, (images * 255).to(torch.uint8)),
            names=("data",),
            valid=False,
        ),
        Case(
            "stitching",
            "stitch",
            "data as a list of two batches",
            functools.partial(_stitch_with, [images[:12], images[12:]]),
            check=close_to(lambda: reference().numpy(), rtol=1e-4, atol=1e-5),
        ),
        Case(
            "stitching",
            "stitch",
            "rank=0",
            functools.partial(_stitch_with, images, rank=0),
            names=("rank",),
            valid=False,
        ),
        Case(
            "stitching",
            "stitch",
            "seed=-1",
            functools.partial(_initialize, stitcher="random", seed=-1),
            names=("seed",),
            valid=False,
        ),
        Case(
            "stitching",
            "stitch",
            "seed='0'",
            functools.partial(_initialize, stitcher="random", seed="0"),
            names=("seed",),
            valid=False,
        ),
        Case(
            "stitching",
            "stitch",
            "stitcher='ridge'",
            functools.partial(_initialize, stitcher="ridge"),
            names=("stitcher",),
            valid=False,
        ),
        Case(
            "stitching",
            "stitch",
            "batch_size=0",
            functools.partial(_initialize, stitcher="least_squares", batch_size=0),
            names=("batch_size",),
            valid=False,
        ),
    ]
    act_reference = functools.partial(_activations, images)
    cases += [
        Case(
            "stitching",
            "get_activations",
            "list of batches",
            functools.partial(_activations, [images[:10], images[10:]]),
            check=close_to(lambda: act_reference().numpy(), rtol=1e-5, atol=1e-6),
        ),
        Case(
            "stitching",
            "get_activations",
            "list [inputs, labels]",
            functools.partial(_activations, [images, labels]),
            names=("data",),
            valid=False,
        ),
        Case(
            "stitching",
            "get_activations",
            "list of single images",
            functools.partial(_activations, [images[0], images[1], images[2]]),
            names=("data",),
            valid=False,
        ),
        Case(
            "stitching",
            "get_activations",
            "list of (inputs, labels) batches",
            functools.partial(_activations, [(images[:10], labels[:10]), (images[10:], labels[10:])]),
            check=close_to(lambda: act_reference().numpy(), rtol=1e-5, atol=1e-6),
        ),
        Case(
            "stitching",
            "get_activations",
            "nested Python lists",
            functools.partial(_activations, images[:4].tolist()),
            names=("data",),
            check=finite_in(),
        ),
        Case(
            "stitching",
            "get_activations",
            "empty data",
            functools.partial(_activations, images[:0]),
            names=("data",),
            valid=False,
        ),
        Case(
            "stitching",
            "get_activations",
            "downsample=2.5",
            functools.partial(_activations, images, downsample=2.5),
            names=("downsample",),
            valid=False,
        ),
        Case(
            "stitching",
            "get_activations",
            "downsample=(2, 0)",
            functools.partial(_activations, images, downsample=(2, 0)),
            names=("downsample",),
            valid=False,
        ),
        Case(
            "stitching",
            "get_activations",
            "store=123",
            functools.partial(_activations, images, store=123),
            names=("store",),
            valid=False,
        ),
        Case(
            "stitching",
            "get_activations",
            "layers=[]",
            functools.partial(_get_layers, []),
            names=("layers",),
            valid=False,
        ),
        Case(
            "stitching",
            "get_activations",
            "layers='nope'",
            functools.partial(_get_layers, "nope"),
            names=("layers",),
            valid=False,
        ),
    ]
    for bad in BAD_COUNTS:
        cases.append(
            Case(
                "stitching",
                "get_activations",
                f"batch_size={bad!r}",
                functools.partial(_activations, images, batch_size=bad),
                names=("batch_size",),
                valid=False,
            )
        )

    def store_on_file() -> Any:
        path = workspace.folder() / "a-file"
        path.write_text("x")
        return _activations(images, store=path)

    cases.append(
        Case(
            "stitching",
            "get_activations",
            "store is a file",
            store_on_file,
            names=("store", str(workspace.root)),
            valid=False,
        )
    )

    def chunk_size_zero() -> Any:
        return _activations(images, store=workspace.folder() / "store", chunk_size=0)

    cases.append(
        Case("stitching", "get_activations", "chunk_size=0", chunk_size_zero, names=("chunk_size",), valid=False)
    )
    for option, values in {
        "lr": [0.0, -1.0, math.nan, "0.1"],
        "weight_decay": [-1.0, math.nan],
        "temperature": [0.0, math.nan],
        "epochs": [0, 2.5],
        "seed": [-1, "0"],
        "l1": [-1.0, math.nan],
        "cka_penalty": [math.nan],
        "track_every": [0],
        "batch_size": [0],
        "target": ["logits"],
    }.items():
        for value in values:
            cases.append(
                Case(
                    "stitching",
                    "fit_task_loss",
                    f"{option}={value!r}",
                    functools.partial(_task_loss, **{option: value}),
                    names=(option,),
                    valid=False,
                )
            )
    cases.append(Case("stitching", "fit_task_loss", "clean", _task_loss, check=finite_in(0)))
    cases.append(
        Case(
            "stitching",
            "stitch_metrics",
            "batch_size=0",
            functools.partial(_metrics, images, batch_size=0),
            names=("batch_size",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "stitching",
            "stitch_metrics",
            "empty data",
            functools.partial(_metrics, images[:0]),
            names=("data",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "stitching", "stitch_metrics", "clean", functools.partial(_metrics, (images, labels)), check=finite_in(0, 1)
        )
    )
    first, second = _layer_pair()
    for weight in (math.nan, "0.5", None):
        cases.append(
            Case(
                "stitching",
                "interpolate_layers",
                f"weight={weight!r}",
                functools.partial(interpolate_layers, first, second, weight),
                names=("weight",),
                valid=False,
            )
        )
    for threshold in (-1.0, math.nan, "0"):
        cases.append(
            Case(
                "stitching",
                "sparsify_layer",
                f"threshold={threshold!r}",
                functools.partial(sparsify_layer, first, threshold),
                names=("threshold",),
                valid=False,
            )
        )
    return cases


def _get_layers(layers: Any) -> Any:
    from latentstitch.stitching import get_activations

    net_a, _, images, _ = tiny_models()
    return get_activations(net_a, images, layers)


# --- stitching layers and activation stores on disk ----------------------------------------------------------------


def _saved_layer(kind: str, folder: Path) -> Path:
    from latentstitch.stitching import LowRankStitch, save_stitching_layer

    layer = {"linear": torch.nn.Linear(4, 3), "conv": torch.nn.Conv2d(4, 3, 1), "low_rank": LowRankStitch(4, 3, 2)}[
        kind
    ]
    path = folder / "layer.safetensors"
    save_stitching_layer(layer, path, {"layer_a": "bn3", "layer_b": "bn3"})
    return path


def _load_layer(path: Path) -> Any:
    from latentstitch.stitching import load_stitching_layer

    return load_stitching_layer(path)


def _save_layer_to_missing_folder(folder: Path) -> Any:
    from latentstitch.stitching import save_stitching_layer

    save_stitching_layer(torch.nn.Linear(4, 3), folder / "missing" / "layer.safetensors")


def _estimator_file_as_layer(folder: Path) -> Path:
    return _fitted_file("LeastSquares", folder)


def layer_file_cases(workspace: Workspace) -> list[Case]:
    header = {
        "unknown kind": _header_change(lambda t, h: h.update(kind="attention")),
        "negative in_features": _header_change(lambda t, h: h.update(in_features=-4)),
        "in_features disagrees with the weight": _header_change(lambda t, h: h.update(in_features=5)),
        "header without kind": _header_change(lambda t, h: h.pop("kind")),
        "damaged JSON header": lambda t, m: m.update(latentstitch="{not json"),
    }
    tensors = {
        "weight of the wrong shape": _grow("weight"),
        "missing bias tensor": lambda t, m: t.pop("bias"),
        "extra tensor": lambda t, m: t.update(payload=torch.zeros(2)),
        "NaN weight": _poison("weight", math.nan),
    }
    cases = file_cases(
        "file",
        "load_stitching_layer",
        functools.partial(_saved_layer, "linear"),
        _load_layer,
        workspace,
        header,
        tensors,
    )
    cases += file_cases(
        "file",
        "load_stitching_layer (low rank)",
        functools.partial(_saved_layer, "low_rank"),
        _load_layer,
        workspace,
        {"rank larger than the sizes": _header_change(lambda t, h: h.update(rank=9))},
        {"w1 of the wrong shape": _grow("w1")},
    )

    def estimator_file() -> Any:
        return _load_layer(_estimator_file_as_layer(workspace.folder()))

    cases.append(
        Case(
            "file",
            "load_stitching_layer",
            "load: an estimator file",
            estimator_file,
            names=(str(workspace.root),),
            valid=False,
        )
    )
    missing = str(SCRATCH / "missing")
    cases.append(
        Case(
            "file",
            "save_stitching_layer",
            "save into a missing folder",
            functools.partial(_save_layer_to_missing_folder, SCRATCH),
            names=(missing, "path"),
            valid=False,
        )
    )
    return cases


def _store(folder: Path) -> Path:
    from latentstitch.stitching import get_activations

    net_a, _, images, _ = tiny_models()
    get_activations(net_a, images, ["bn1", "bn2"], store=folder / "store", chunk_size=10)
    return folder / "store"


def _read_store(path: Path) -> Any:
    from latentstitch.stitching import ActivationStore

    return ActivationStore(path).load("bn2")


def store_cases(workspace: Workspace) -> list[Case]:
    def damage(change: Callable[[Path], None]) -> Callable[[], Any]:
        def run() -> Any:
            path = _store(workspace.folder())
            change(path)
            return _read_store(path)

        return run

    changes = {
        "missing folder": lambda p: shutil.rmtree(p),
        "no index.json": lambda p: (p / "index.json").unlink(),
        "damaged index.json": lambda p: (p / "index.json").write_text("{not json"),
        "index.json without files": lambda p: _edit_json(p / "index.json", lambda d: d.pop("files")),
        "index.json of another format": lambda p: _edit_json(p / "index.json", lambda d: d.update(format="x/1")),
        "a chunk file missing": lambda p: (p / "chunk-00001.safetensors").unlink(),
        "a chunk file truncated": lambda p: (p / "chunk-00001.safetensors").write_bytes(b"\x00" * 12),
        "a chunk of the wrong shape": lambda p: _rewrite(p / "chunk-00001.safetensors", _grow("bn2")),
        "counts disagree with the chunks": lambda p: _edit_json(p / "index.json", lambda d: d.update(counts=[1, 1, 1])),
        "index.json names a chunk outside its folder": _chunk_outside,
    }
    cases = [
        Case("file", "ActivationStore", f"load: {label}", damage(change), names=(str(workspace.root),), valid=False)
        for label, change in changes.items()
    ]
    cases.append(
        Case(
            "file",
            "ActivationStore",
            "load of an unknown layer",
            functools.partial(_read_unknown, workspace),
            names=("layers", "layer"),
            valid=False,
        )
    )
    return cases


def _chunk_outside(store: Path) -> None:
    """The store's second chunk moved next to the folder, and the index pointing there (issue 27)."""
    (store / "chunk-00001.safetensors").rename(store.parent / "chunk-00001.safetensors")
    _edit_json(store / "index.json", lambda d: d["files"].__setitem__(1, "../chunk-00001.safetensors"))


def _shard_outside(folder: Path) -> None:
    """The train split's Arrow shard copied next to the dataset folder, and state.json naming the copy."""
    shard = next((folder / "train").glob("*.arrow"))
    shutil.copy(shard, folder.parent / shard.name)
    _edit_json(folder / "train" / "state.json", lambda d: d["_data_files"][0].update(filename=f"../../{shard.name}"))


def _split_outside(folder: Path) -> None:
    """The train split copied next to the dataset folder, and dataset_dict.json naming the copy."""
    shutil.copytree(folder / "train", folder.parent / "train")
    _edit_json(folder / "dataset_dict.json", lambda d: d.update(splits=["../train", "test"]))


def _read_unknown(workspace: Workspace) -> Any:
    from latentstitch.stitching import ActivationStore

    return ActivationStore(_store(workspace.folder())).load("nope")


def _edit_json(path: Path, change: Callable[[dict], Any]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


# --- training --------------------------------------------------------------------------------------------------


def _fit(**options: Any) -> Any:
    from latentstitch.training import RandomBatchSampler, TensorBatches, classification_loss, fit

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    y = torch.arange(32) % 3
    settings = {
        "loss_fn": classification_loss,
        "batches": TensorBatches((x, y), RandomBatchSampler(32, 8, seed=0)),
        "epochs": 1,
        "progress": False,
        **options,
    }
    return fit(model, settings.pop("loss_fn"), settings.pop("batches"), **settings)[-1]["loss"]


def _checkpoint(folder: Path) -> Path:
    from latentstitch.training import save_checkpoint

    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    save_checkpoint(folder / "checkpoint", model, optimizer, {"epoch": 1})
    return folder / "checkpoint"


def _load_checkpoint(path: Path, model: Any = None, with_optimizer: bool = True) -> Any:
    from latentstitch.training import load_checkpoint

    model = model or torch.nn.Linear(4, 3)
    optimizer = torch.optim.Adam(model.parameters()) if with_optimizer else None
    return load_checkpoint(path, model, optimizer)


def training_cases(workspace: Workspace) -> list[Case]:
    from latentstitch.training import (
        ClassAccumulationSampler,
        ClassBalancedBatchSampler,
        ClassificationObjective,
        RandomBatchSampler,
        TensorBatches,
    )

    cases = [Case("training", "fit", "clean", _fit, check=finite_in(0))]
    for option, values in {
        "epochs": [-1, 2.5, "1"],
        "lr": [0.0, -1.0, math.nan, "0.1"],
        "grad_clip": [0.0, -1.0, math.nan],
        "accumulate": [0, 2.5],
        "seed": BAD_SEEDS,
        "checkpoint_every": [0],
        "loss_fn": [None, "cross_entropy"],
        "batches": [[], None],
    }.items():
        for value in values:
            cases.append(
                Case(
                    "training",
                    "fit",
                    f"{option}={value!r}",
                    functools.partial(_fit, **{option: value}),
                    names=(option,),
                    valid=False,
                )
            )

    def checkpoint_dir_is_file() -> Any:
        path = workspace.folder() / "file"
        path.write_text("x")
        return _fit(checkpoint_dir=path)

    cases.append(
        Case(
            "training",
            "fit",
            "checkpoint_dir is a file",
            checkpoint_dir_is_file,
            names=("checkpoint_dir",),
            valid=False,
        )
    )
    samplers = {
        "RandomBatchSampler": (
            RandomBatchSampler,
            (32, 8),
            {"num_samples": BAD_COUNTS, "batch_size": BAD_COUNTS, "seed": BAD_SEEDS, "drop_last": ["yes"]},
        ),
        "ClassBalancedBatchSampler": (
            ClassBalancedBatchSampler,
            (np.arange(32) % 4, 2, 4),
            {
                "classes_per_batch": BAD_COUNTS,
                "samples_per_class": BAD_COUNTS,
                "seed": BAD_SEEDS,
                "replacement": ["yes"],
            },
        ),
        "ClassAccumulationSampler": (
            ClassAccumulationSampler,
            (np.arange(32) % 4, 4),
            {"batch_size": BAD_COUNTS, "class_pure_batches": [0, 2.5], "seed": BAD_SEEDS},
        ),
    }
    positional = {
        "RandomBatchSampler": ("num_samples", "batch_size"),
        "ClassBalancedBatchSampler": ("labels", "classes_per_batch", "samples_per_class"),
        "ClassAccumulationSampler": ("labels", "batch_size"),
    }
    for name, (cls, args, bad) in samplers.items():
        cases.append(
            Case(
                "training",
                name,
                "clean",
                functools.partial(_first_batch, cls, args, {}),
                check=lambda r: None if len(r) else "empty batch",
            )
        )
        for option, values in bad.items():
            for value in values:
                changed = list(args)
                options: dict = {}
                if option in positional[name]:
                    changed[positional[name].index(option)] = value
                else:
                    options[option] = value
                cases.append(
                    Case(
                        "training",
                        name,
                        f"{option}={value!r}",
                        functools.partial(_first_batch, cls, tuple(changed), options),
                        names=(option,),
                        valid=False,
                    )
                )
        if name != "RandomBatchSampler":
            cases.append(
                Case(
                    "training",
                    name,
                    "float labels",
                    functools.partial(_first_batch, cls, (np.linspace(0, 1, 32), *args[1:]), {}),
                    names=("labels",),
                    valid=False,
                )
            )
            cases.append(
                Case(
                    "training",
                    name,
                    "empty labels",
                    functools.partial(_first_batch, cls, (np.zeros(0, dtype=int), *args[1:]), {}),
                    names=("labels",),
                    valid=False,
                )
            )
    cases.append(
        Case(
            "training",
            "TensorBatches",
            "no tensors",
            functools.partial(TensorBatches, [], RandomBatchSampler(4, 2)),
            names=("tensors",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "training",
            "TensorBatches",
            "different lengths",
            functools.partial(TensorBatches, [torch.ones(4), torch.ones(5)], RandomBatchSampler(4, 2)),
            names=("tensors",),
            valid=False,
        )
    )
    for args, names in [
        ((0, 0.1), "total_steps"),
        ((-5, 0.1), "total_steps"),
        ((100, math.nan), "maximum"),
        ((100, -1.0), "maximum"),
    ]:
        cases.append(
            Case(
                "training",
                "cyclical_weight",
                f"{names}={args}",
                functools.partial(_weight_at, args, {}),
                names=(names,),
                valid=False,
            )
        )
    for option, value in [("cycles", 0), ("ratio", 0.0), ("ratio", 1.5), ("ratio", math.nan)]:
        cases.append(
            Case(
                "training",
                "cyclical_weight",
                f"{option}={value!r}",
                functools.partial(_weight_at, (100, 0.1), {option: value}),
                names=(option,),
                valid=False,
            )
        )
    for option, value in [
        ("weight", math.nan),
        ("weight", -1.0),
        ("weight", "0.1"),
        ("group_size", 0),
        ("topological", {"decoder": None}),
    ]:
        cases.append(
            Case(
                "training",
                "ClassificationObjective",
                f"{option}={value!r}",
                functools.partial(ClassificationObjective, **{option: value}),
                names=(option,),
                valid=False,
            )
        )

    def load_damaged(
        change: Callable[[Path], None], model: Any = None, with_optimizer: bool = True
    ) -> Callable[[], Any]:
        def run() -> Any:
            path = _checkpoint(workspace.folder())
            change(path)
            return _load_checkpoint(path, model, with_optimizer)

        return run

    damages = {
        "missing folder": lambda p: shutil.rmtree(p),
        "empty model file": lambda p: (p / "model.safetensors").write_bytes(b""),
        "truncated model file": lambda p: (p / "model.safetensors").write_bytes(
            (p / "model.safetensors").read_bytes()[:30]
        ),
        "damaged checkpoint.json": lambda p: (p / "checkpoint.json").write_text("{oops"),
        "damaged optimizer file": lambda p: (p / "optimizer.safetensors").write_bytes(b"\xff" * 50),
        "model weight of the wrong shape": lambda p: _rewrite(p / "model.safetensors", _grow("weight")),
    }
    for label, change in damages.items():
        cases.append(
            Case(
                "file",
                "load_checkpoint",
                f"load: {label}",
                load_damaged(change),
                names=(str(workspace.root),),
                valid=False,
            )
        )
    cases.append(
        Case(
            "file",
            "load_checkpoint",
            "load: into a different model",
            load_damaged(lambda p: None, torch.nn.Linear(5, 3), False),
            names=(str(workspace.root), "model"),
            valid=False,
        )
    )

    def save_into_file() -> Any:
        from latentstitch.training import save_checkpoint

        blocker = workspace.folder() / "file"
        blocker.write_text("x")
        save_checkpoint(blocker / "checkpoint", torch.nn.Linear(2, 2))

    cases.append(
        Case("file", "save_checkpoint", "save under a file", save_into_file, names=(str(workspace.root),), valid=False)
    )
    return cases


def _first_batch(cls: Any, args: tuple, options: dict) -> list[int]:
    return next(iter(cls(*args, **options)))


def _weight_at(args: tuple, options: dict) -> float:
    from latentstitch.training import cyclical_weight

    weight = cyclical_weight(*args, **options)
    value = weight(10)
    if not math.isfinite(value):
        raise AssertionError(f"weight {value}")
    return value


# --- data readers --------------------------------------------------------------------------------------------------


def _copy_fixture(name: str, folder: Path) -> Path:
    target = folder / name
    shutil.copytree(FIXTURES / name, target)
    return target


def data_cases(workspace: Workspace) -> list[Case]:
    from latentstitch import data

    cases = []

    def idx(change: Callable[[Path], Path], name: str = "train-labels-idx1-ubyte.gz") -> Callable[[], Any]:
        def run() -> Any:
            folder = _copy_fixture("torchvision", workspace.folder())
            path = folder / "FashionMNIST" / "raw" / name
            path = change(path)
            return data.read_idx(path)

        return run

    for label, change in {
        "missing": lambda p: (p.unlink(), p)[1],
        "a folder": lambda p: (p.unlink(), p.mkdir(), p)[2],
        "empty": lambda p: (p.write_bytes(b""), p)[1],
        "garbage .gz": lambda p: (p.write_bytes(b"not gzip at all" * 4), p)[1],
        "truncated .gz": lambda p: (p.write_bytes(p.read_bytes()[:20]), p)[1],
        "header announces more data": lambda p: (p.write_bytes(gzip.compress(gzip.decompress(p.read_bytes())[:-3])), p)[
            1
        ],
        "bad magic number": lambda p: (p.write_bytes(gzip.compress(b"\x01\x02\x03\x04" + b"\x00" * 12)), p)[1],
    }.items():
        cases.append(Case("data", "read_idx", label, idx(change), names=(str(workspace.root),), valid=False))

    def mnist_folder(**options: Any) -> Any:
        folder = _copy_fixture("torchvision", workspace.folder())
        return data.load_mnist_folder(folder, **options).x_train.shape[0]

    cases.append(
        Case("data", "load_mnist_folder", "clean", mnist_folder, check=lambda r: None if r == 20 else f"{r} rows")
    )
    for option, values in {"n_train": [0, -1, 2.5, 999], "seed": BAD_SEEDS}.items():
        for value in values:
            cases.append(
                Case(
                    "data",
                    "load_mnist_folder",
                    f"{option}={value!r}",
                    functools.partial(
                        mnist_folder,
                        n_train=10 if option == "seed" else value,
                        **({option: value} if option == "seed" else {}),
                    ),
                    names=(option,),
                    valid=False,
                )
            )
    cases.append(
        Case(
            "data",
            "load_mnist_folder",
            "missing root",
            lambda: data.load_mnist_folder(workspace.root / "nowhere"),
            names=("root", str(workspace.root / "nowhere")),
            valid=False,
        )
    )

    def cifar(change: Callable[[Path], None] | None = None, **options: Any) -> Any:
        folder = _copy_fixture("cifar", workspace.folder())
        if change is not None:
            change(folder / "cifar-10-batches-py")
        return data.load_cifar_folder(folder, **options).x_train.shape[0]

    cases.append(Case("data", "load_cifar_folder", "clean", cifar, check=finite_in(1)))
    for label, change in {
        "empty batch file": lambda p: (p / "data_batch_1").write_bytes(b""),
        "truncated batch file": lambda p: (p / "data_batch_1").write_bytes((p / "data_batch_1").read_bytes()[:40]),
        "garbage batch file": lambda p: (p / "data_batch_1").write_bytes(b"\x80\x02garbage" * 8),
        "missing meta file": lambda p: (p / "batches.meta").unlink(),
        "batch without labels": lambda p: _pickle_dict(p / "data_batch_1", {"data": np.zeros((2, 3072), np.uint8)}),
    }.items():
        cases.append(
            Case(
                "data",
                "load_cifar_folder",
                label,
                functools.partial(cifar, change),
                names=(str(workspace.root),),
                valid=False,
            )
        )
    cases.append(
        Case(
            "data",
            "load_cifar_folder",
            "name='cifar1000'",
            functools.partial(cifar, name="cifar1000"),
            names=("name",),
            valid=False,
        )
    )

    def planetoid(change: Callable[[Path], None] | None = None) -> Any:
        folder = _copy_fixture("planetoid", workspace.folder())
        if change is not None:
            change(folder)
        return data.load_planetoid(folder, "tiny").num_nodes

    cases.append(Case("data", "load_planetoid", "clean", planetoid, check=finite_in(1)))
    for label, change in {
        "missing graph file": lambda p: (p / "ind.tiny.graph").unlink(),
        "empty x file": lambda p: (p / "ind.tiny.x").write_bytes(b""),
        "garbage x file": lambda p: (p / "ind.tiny.x").write_bytes(b"\x80\x02" + b"\xff" * 30),
        "damaged test.index": lambda p: (p / "ind.tiny.test.index").write_text("one\ntwo\n"),
    }.items():
        cases.append(
            Case(
                "data",
                "load_planetoid",
                label,
                functools.partial(planetoid, change),
                names=(str(workspace.root),),
                valid=False,
            )
        )

    def hf(change: Callable[[Path], None] | None = None, column: str = "text") -> Any:
        folder = _copy_fixture("hf", workspace.folder()) / "text_dict"
        if change is not None:
            change(folder)
        return len(data.load_hf_from_disk(folder, column).x_train)

    cases.append(Case("data", "load_hf_from_disk", "clean", hf, check=finite_in(1)))
    for label, change in {
        "damaged dataset_dict.json": lambda p: (p / "dataset_dict.json").write_text("{oops"),
        "damaged state.json": lambda p: (p / "train" / "state.json").write_text("[1, 2"),
        "missing arrow shard": lambda p: [f.unlink() for f in (p / "train").glob("*.arrow")],
        "truncated arrow shard": lambda p: [f.write_bytes(f.read_bytes()[:50]) for f in (p / "train").glob("*.arrow")],
        "state.json names a shard outside the folder": _shard_outside,
        "dataset_dict.json names a split outside the folder": _split_outside,
    }.items():
        cases.append(
            Case(
                "data",
                "load_hf_from_disk",
                label,
                functools.partial(hf, change),
                names=(str(workspace.root),),
                valid=False,
            )
        )
    cases.append(
        Case(
            "data",
            "load_hf_from_disk",
            "unknown column",
            functools.partial(hf, None, "body"),
            names=("input_column", "'body'", "body"),
            valid=False,
        )
    )

    y = np.arange(40) % 4
    for n in (0, -1, 2.5, 41, "3"):
        cases.append(
            Case(
                "data",
                "stratified_subset",
                f"n={n!r}",
                functools.partial(data.stratified_subset, y, n, 0),
                names=("n",),
                valid=False,
            )
        )
    for seed in BAD_SEEDS:
        cases.append(
            Case(
                "data",
                "stratified_subset",
                f"seed={seed!r}",
                functools.partial(data.stratified_subset, y, 20, seed),
                names=("seed",),
                valid=False,
            )
        )
    x40 = np.random.default_rng(0).standard_normal((40, 3))
    for option, value in [("test_size", 0.0), ("test_size", 1.5), ("seed", -1), ("seed", "0")]:
        settings = {"test_size": 0.25, "seed": 0, option: value}
        cases.append(
            Case(
                "data",
                "split_dataset",
                f"{option}={value!r}",
                functools.partial(data.split_dataset, "d", x40, y, ("a", "b", "c", "d"), **settings),
                names=(option,),
                valid=False,
            )
        )
    for option, value in [("test_size", 0.0), ("seed", -1)]:
        cases.append(
            Case(
                "data",
                "load_mnist_5k",
                f"{option}={value!r}",
                functools.partial(data.load_mnist_5k, **{option: value}),
                names=(option,),
                valid=False,
            )
        )
    for option, value in [("n", 0), ("test_size", 1.0), ("seed", -1)]:
        cases.append(
            Case(
                "data",
                "load_bbc_news",
                f"{option}={value!r}",
                functools.partial(data.load_bbc_news, **{option: value}),
                names=(option,),
                valid=False,
            )
        )
    sbm = {"sizes": [10, 10], "p_in": 0.5, "p_out": 0.1}
    for option, value in [
        ("sizes", []),
        ("sizes", [0, 5]),
        ("sizes", [2.5]),
        ("p_in", math.nan),
        ("p_in", "0.5"),
        ("p_out", 1.5),
        ("num_features", 0),
        ("num_features", -1),
        ("feature_signal", math.nan),
        ("feature_signal", -1.0),
        ("train_fraction", 0.0),
        ("val_fraction", math.nan),
        ("seed", -1),
        ("seed", "0"),
    ]:
        cases.append(
            Case(
                "data",
                "stochastic_block_model",
                f"{option}={value!r}",
                functools.partial(_sbm, {**sbm, option: value}),
                names=(option,),
                valid=False,
            )
        )
    cases.append(Case("data", "stochastic_block_model", "clean", functools.partial(_sbm, sbm), check=finite_in()))
    table = data.WordVectors("t", ("a", "b", "c"), np.eye(3, dtype=np.float32))
    for n in (-1, 2.5, "2"):
        cases.append(
            Case("data", "WordVectors.head", f"n={n!r}", functools.partial(table.head, n), names=("n",), valid=False)
        )
    cases.append(
        Case(
            "data",
            "WordVectors",
            "vectors of the wrong shape",
            functools.partial(data.WordVectors, "t", ("a", "b"), np.eye(3)),
            names=("vectors",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "data",
            "WordVectors.index_of",
            "unknown word",
            functools.partial(table.index_of, ["zz"]),
            names=("zz", "'zz'"),
            valid=False,
        )
    )
    cases.append(
        Case(
            "data",
            "intersect_vocabularies",
            "one table",
            functools.partial(data.intersect_vocabularies, table),
            names=("tables",),
            valid=False,
        )
    )
    for value in (-1, 0, 2.5):
        cases.append(
            Case(
                "data",
                "load_glove_50d",
                f"max_words={value!r}",
                functools.partial(data.load_glove_50d, max_words=value),
                names=("max_words",),
                valid=False,
            )
        )
    cases.append(
        Case(
            "data",
            "load_sample_photos",
            "unknown photo",
            functools.partial(data.load_sample_photos, ("astronaut",)),
            names=("names",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "data",
            "load_bilingual_lexicon",
            "unknown language",
            functools.partial(data.load_bilingual_lexicon, "eng", "xxx"),
            names=("target", "freedict-eng-xxx", "dict-freedict-eng-xxx"),
            valid=False,
        )
    )
    return cases


def _sbm(settings: dict) -> Any:
    from latentstitch.data import stochastic_block_model

    graph = stochastic_block_model(settings.pop("sizes"), settings.pop("p_in"), settings.pop("p_out"), **settings)
    return graph.x


def _pickle_dict(path: Path, content: dict) -> None:
    import pickle

    path.write_bytes(pickle.dumps(content, protocol=2))


# --- encoders --------------------------------------------------------------------------------------------------


def _word_encoder() -> Any:
    from latentstitch.data import WordVectors
    from latentstitch.encoders import WordVectorEncoder

    table = WordVectors("tiny-words", ("cat", "dog", "fish"), np.arange(12, dtype=np.float32).reshape(3, 4), "1")
    return WordVectorEncoder(table)


def encoder_cases(workspace: Workspace) -> list[Case]:
    from latentstitch.encoders import WordVectorEncoder, get_encoder

    words = ["cat", "fish", "dog"]
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)[[0, 2, 1]]
    encode = _word_encoder().encode
    cases = [
        Case("encoder", "encode", "clean", functools.partial(encode, words, progress=False), check=close_to(expected)),
        Case(
            "encoder",
            "encode",
            "empty list",
            functools.partial(encode, [], progress=False),
            names=("inputs",),
            valid=False,
        ),
        Case(
            "encoder",
            "encode",
            "one string",
            functools.partial(encode, "cat", progress=False),
            names=("inputs",),
            valid=False,
        ),
        Case(
            "encoder",
            "encode",
            "numbers",
            functools.partial(encode, [1, 2], progress=False),
            names=("inputs",),
            valid=False,
        ),
        Case(
            "encoder",
            "encode",
            "unknown word",
            functools.partial(encode, ["cow"], progress=False),
            names=("cow", "'cow'"),
            valid=False,
        ),
        Case(
            "encoder",
            "encode",
            "cache=123",
            functools.partial(encode, words, progress=False, cache=123),
            names=("cache",),
            valid=False,
        ),
        Case(
            "encoder",
            "encode",
            "layers=True",
            functools.partial(encode, words, progress=False, layers=True),
            names=("layers",),
            valid=False,
        ),
        Case(
            "encoder",
            "WordVectorEncoder",
            "unknown='skip'",
            functools.partial(WordVectorEncoder, _word_encoder().table, unknown="skip"),
            names=("unknown",),
            valid=False,
        ),
        Case(
            "encoder",
            "WordVectorEncoder",
            "not a table",
            functools.partial(WordVectorEncoder, {"cat": [1.0]}),
            names=("table",),
            valid=False,
        ),
        Case(
            "encoder",
            "get_encoder",
            "unknown name",
            functools.partial(get_encoder, "word2vec"),
            names=("name",),
            valid=False,
        ),
    ]
    for bad in BAD_COUNTS:
        cases.append(
            Case(
                "encoder",
                "encode",
                f"batch_size={bad!r}",
                functools.partial(encode, words, progress=False, batch_size=bad),
                names=("batch_size",),
                valid=False,
            )
        )

    def damaged_cache(change: Callable[[Path], None]) -> Callable[[], Any]:
        def run() -> Any:
            folder = workspace.folder()
            encoder = _word_encoder()
            encoder.encode(words, progress=False, cache=folder)
            (path,) = list(folder.rglob("*.safetensors"))
            change(path)
            return encoder.encode(words, progress=False, cache=folder)

        return run

    for label, change in {
        "empty cache file": lambda p: p.write_bytes(b""),
        "truncated cache file": lambda p: p.write_bytes(p.read_bytes()[:30]),
        "cache file of the wrong shape": lambda p: _rewrite(p, lambda t, m: t.update(embeddings=torch.zeros(2, 4))),
        "cache file without embeddings": lambda p: _rewrite(p, lambda t, m: t.update(other=t.pop("embeddings"))),
    }.items():
        cases.append(
            Case(
                "encoder",
                "encode",
                f"cache: {label}",
                damaged_cache(change),
                names=("cache",),
                check=close_to(expected),
            )
        )

    def cache_under_file() -> Any:
        blocker = workspace.folder() / "file"
        blocker.write_text("x")
        return _word_encoder().encode(words, progress=False, cache=blocker / "cache")

    cases.append(
        Case("encoder", "encode", "cache folder under a file", cache_under_file, names=("cache",), valid=False)
    )
    return cases


# --- distributed ------------------------------------------------------------------------------------------------


def distributed_cases() -> list[Case]:
    try:
        import dask.array as da
    except ModuleNotFoundError:
        return []
    from latentstitch.distributed import get_client
    from latentstitch.relative import relative_projection
    from latentstitch.similarity import StreamingCKA
    from latentstitch.stitching import LeastSquares

    x = np.random.default_rng(0).standard_normal((40, 4))
    nan_x = x.copy()
    nan_x[25, 1] = np.nan
    lazy = da.from_array(x, chunks=10)
    cases = [
        Case(
            "distributed",
            "relative_projection",
            "dask x with NaN",
            lambda: relative_projection(da.from_array(nan_x, chunks=10), x[:5]).compute(),
            names=("x",),
            valid=False,
        ),
        Case(
            "distributed",
            "relative_projection",
            "dask int x",
            lambda: relative_projection(da.from_array(x.astype(int), chunks=10), x[:5]).compute(),
            names=("x",),
            valid=False,
        ),
        Case(
            "distributed",
            "relative_projection",
            "dask x, chunk_size=-1",
            lambda: relative_projection(lazy, x[:5], chunk_size=-1).compute(),
            names=("chunk_size",),
            valid=False,
        ),
        Case(
            "distributed",
            "relative_projection",
            "dask x, eps=-1",
            lambda: relative_projection(lazy, x[:5], eps=-1.0).compute(),
            names=("eps",),
            valid=False,
        ),
        Case(
            "distributed",
            "LeastSquares",
            "dask a with NaN",
            lambda: LeastSquares().fit(da.from_array(nan_x, chunks=10), x),
            names=("a",),
            valid=False,
        ),
        Case(
            "distributed",
            "StreamingCKA",
            "dask chunk with NaN",
            lambda: StreamingCKA().update(da.from_array(nan_x, chunks=10), x).compute(),
            names=("x",),
            valid=False,
        ),
        Case("distributed", "get_client", "client=3", functools.partial(get_client, 3), names=("client",), valid=False),
        Case(
            "distributed",
            "get_client",
            "workers=0",
            functools.partial(get_client, None, 0),
            names=("workers",),
            valid=False,
        ),
        Case(
            "distributed",
            "relative_projection",
            "dask x",
            lambda: relative_projection(lazy, x[:5]).compute(),
            check=close_to(lambda: relative_projection(x, x[:5])),
        ),
    ]
    return cases


# --- library odds and ends -------------------------------------------------------------------------------------------


def misc_cases() -> list[Case]:
    from latentstitch._core.device import set_threads

    return [
        Case(
            "misc",
            "set_threads",
            f"threads={value!r}",
            functools.partial(set_threads, value),
            names=("threads",),
            valid=False,
        )
        for value in (0, -1, 2.5, "2")
    ]


# --- the command line --------------------------------------------------------------------------------------------


@functools.cache
def _cli_files(workspace: Workspace) -> dict[str, str]:
    """The files the CLI cases read (see contract_registry.CLI): written once per workspace."""
    folder = workspace.folder()
    a, b = data_pair(40, 6, 5)
    files = {"source": a, "target": b, "short": b[:39]}
    paths = {name: str(folder / f"{name}.npy") for name in files}
    for name, values in files.items():
        np.save(paths[name], values)
    return {**paths, "missing": str(folder / "missing.npy"), "out": str(workspace.folder())}


def cli_cases(workspace: Workspace) -> list[Case]:
    cases = []
    for command, bad in CLI.items():
        for argv, option in bad:
            out = str(workspace.root / f"cli-{command}")
            files = _cli_files(workspace)
            full = [command, *(a.format(**files) for a in argv)]
            full += ["--out", out, "--quiet"] if command in CLI_WITH_OUT else []
            cases.append(
                Case(
                    "cli",
                    command,
                    " ".join(argv),
                    cli_outcome(full, option.format(**files)),
                    names=(option.format(**files),),
                    valid=False,
                )
            )

    def out_under_file(command: list[str]) -> Callable[[], Any]:
        def run() -> Any:
            blocker = workspace.folder() / "file"
            blocker.write_text("x")
            return cli_outcome([*command, "--out", str(blocker / "sub"), "--quiet"], "--out")()

        return run

    cases.append(Case("cli", "demo", "--out under a file", out_under_file(["demo"]), names=("--out",), valid=False))
    cases.append(
        Case(
            "cli",
            "reproduce",
            "--out under a file",
            out_under_file(["reproduce", "ae-stitching"]),
            names=("--out",),
            valid=False,
        )
    )
    cases.append(
        Case("cli", "latentstitch", "no command", cli_outcome([], None), check=output_check(required=["usage"]))
    )
    cases.append(
        Case(
            "cli",
            "reproduce",
            "--list",
            cli_outcome(["reproduce", "--list"], None),
            check=output_check(required=["ae-stitching"]),
        )
    )
    smoke = cli_outcome(
        [
            "demo",
            "--epochs",
            "1",
            "--anchors",
            "50",
            "--latent-dim",
            "8",
            "--out",
            str(workspace.root / "smoke"),
            "--quiet",
        ],
        None,
    )
    cases.append(
        Case(
            "cli",
            "demo",
            "--epochs 1 (a smoke run)",
            smoke,
            check=output_check(forbidden=["holds", "HOLD"], required=["smoke"]),
            slow=True,
        )
    )
    return cases


def io_cases() -> list[Case]:
    workspace = Workspace()
    cases: list[Case] = []
    for name in ESTIMATORS:
        cases += estimator_file_cases(name, workspace)
    cases += layer_file_cases(workspace)
    cases += store_cases(workspace)
    cases += stitching_cases(workspace)
    cases += training_cases(workspace)
    cases += data_cases(workspace)
    cases += encoder_cases(workspace)
    cases += distributed_cases()
    cases += misc_cases()
    cases += cli_cases(workspace)
    return cases


def all_cases() -> list[Case]:
    from contract_grid import numeric_cases

    return numeric_cases() + io_cases()
