"""Hugging Face ``save_to_disk`` folders (Arrow files with a ``state.json`` and ``dataset_info.json``), read with
pyarrow without the ``datasets`` package. Nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.atomic import inside_folder
from latentstitch._core.extras import require
from latentstitch._core.params import check_seed
from latentstitch._core.persist import read_json
from latentstitch.data._datasets import LabelledSplit, check_fraction, class_names, split_dataset, stratified_subset
from latentstitch.data._images import images_to_float


def _arrow_table(folder: Path):
    """The Arrow table of one ``Dataset.save_to_disk`` folder (``state.json`` + Arrow stream shards, memory-mapped)."""
    pa = require("pyarrow", "text", package="pyarrow")
    state = read_json(folder / "state.json", "path")
    if not isinstance(state, dict) or not isinstance(state.get("_data_files"), list):
        raise ValueError(f"path: {str(folder / 'state.json')!r} is not a save_to_disk state file")
    if state.get("_indices_data_files"):
        raise ValueError(f"{folder}: saved with an indices mapping; call flatten_indices() before save_to_disk")
    tables = []
    for entry in state["_data_files"]:
        name = entry.get("filename") if isinstance(entry, dict) else entry
        shard = inside_folder(folder, name, manifest=folder / "state.json")
        try:
            with pa.memory_map(str(shard)) as source:
                tables.append(pa.ipc.open_stream(source).read_all())
        except (OSError, pa.ArrowException) as error:
            raise ValueError(f"path: {str(shard)!r} is not a readable Arrow shard ({error})") from None
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _read_arrow_dataset(folder: Path) -> tuple[dict[str, list], dict]:
    """Columns and features of one ``Dataset.save_to_disk`` folder (``state.json`` + Arrow stream shards)."""
    info = read_json(folder / "dataset_info.json", "path")
    if not isinstance(info, dict):
        raise ValueError(f"path: {str(folder / 'dataset_info.json')!r} is not a save_to_disk info file")
    return _arrow_table(folder).to_pydict(), info.get("features") or {}


def _split_folders(folder: Path) -> dict[str, Path]:
    if (folder / "dataset_dict.json").exists():
        listing = read_json(folder / "dataset_dict.json", "path")
        if not isinstance(listing, dict) or not isinstance(listing.get("splits"), list):
            raise ValueError(f"path: {str(folder / 'dataset_dict.json')!r} lists no splits")
        manifest = folder / "dataset_dict.json"
        return {str(split): inside_folder(folder, split, manifest=manifest) for split in listing["splits"]}
    if (folder / "state.json").exists():
        return {"all": folder}
    raise FileNotFoundError(f"{folder}: not a save_to_disk folder (no dataset_dict.json or state.json)")


def read_hf_saved(path: str | os.PathLike) -> dict[str, tuple[dict[str, list], dict]]:
    """Every split of a Hugging Face ``save_to_disk`` folder: ``{split: (columns, features)}``.

    A ``DatasetDict`` folder (``dataset_dict.json`` listing split subfolders) gives each split; a single
    ``Dataset`` folder gives one split named ``"all"``. Read with pyarrow (the Arrow IPC stream files the
    ``datasets`` library writes), so ``datasets`` itself is not needed.
    """
    return {split: _read_arrow_dataset(folder) for split, folder in _split_folders(Path(path)).items()}


def read_hf_tables(path: str | os.PathLike) -> dict[str, Any]:
    """Every split of a Hugging Face ``save_to_disk`` folder as a ``pyarrow.Table`` (columnar, memory-mapped):
    ``{split: table}``, split names as in ``read_hf_saved``."""
    return {split: _arrow_table(folder) for split, folder in _split_folders(Path(path)).items()}


def _decode_column(values: list, feature: dict, column: str) -> np.ndarray | list[str]:
    kind = feature.get("_type")
    if kind == "Image":
        from io import BytesIO

        from PIL import Image  # Pillow comes with matplotlib, a core dependency

        images = []
        for value in values:
            with Image.open(BytesIO(value["bytes"])) as image:
                images.append(np.asarray(image))
        return images_to_float(np.stack(images))
    if kind == "Value" and feature.get("dtype") in ("string", "large_string"):
        return [str(v) for v in values]
    if kind in ("Array2D", "Array3D", "Sequence", "List") or kind == "Value":
        array = np.asarray(values)
        return array.astype(np.float32) if array.dtype.kind == "f" else array
    raise ValueError(f"column {column!r}: feature type {kind!r} is not supported as model input")


def load_hf_from_disk(
    path: str | os.PathLike,
    input_column: str,
    label_column: str = "label",
    *,
    test_size: float = 0.2,
    seed: int = 0,
    n_train: int | None = None,
    n_test: int | None = None,
) -> LabelledSplit:
    """A labelled dataset from a Hugging Face ``save_to_disk`` folder, as a :class:`LabelledSplit`.

    Text columns become lists of strings, image columns (N, C, H, W) float32 in [0, 1], numeric columns arrays.
    Labels must be a ``ClassLabel`` (its names become ``classes``) or integers. A ``DatasetDict`` with
    ``train`` and ``test`` splits keeps them (cut to stratified seeded subsets by ``n_train`` / ``n_test``);
    otherwise all rows are pooled and split with ``test_size`` (stratified, seeded).
    """
    check_seed(seed)
    splits = read_hf_saved(path)

    def columns(split: str) -> tuple[np.ndarray | list[str], np.ndarray, dict]:
        data, features = splits[split]
        for column in (input_column, label_column):
            if column not in data:
                raise KeyError(f"{path} [{split}]: no column {column!r}; columns are {', '.join(data)}")
        x = _decode_column(data[input_column], features.get(input_column, {"_type": "Value"}), input_column)
        return x, np.asarray(data[label_column], dtype=np.int64), features.get(label_column, {})

    name = Path(path).name
    if "train" in splits and "test" in splits:
        x_train, y_train, feature = columns("train")
        x_test, y_test, _ = columns("test")
        classes = tuple(feature.get("names") or class_names(np.unique(np.concatenate([y_train, y_test]))))
        train = stratified_subset(y_train, n_train, seed, "n_train")
        test = stratified_subset(y_test, n_test, seed, "n_test")
        return LabelledSplit(name, _take(x_train, train), y_train[train], _take(x_test, test), y_test[test], classes)
    check_fraction(test_size, "test_size")
    parts = [columns(split) for split in splits]
    x: np.ndarray | list[str]
    if isinstance(parts[0][0], list):
        x = [item for part in parts for item in part[0]]
    else:
        x = np.concatenate([part[0] for part in parts])
    y = np.concatenate([part[1] for part in parts])
    classes = tuple(parts[0][2].get("names") or class_names(np.unique(y)))
    return split_dataset(name, x, y, classes, test_size=test_size, seed=seed)


def _take(x: np.ndarray | list[str], rows: np.ndarray) -> np.ndarray | list[str]:
    return [x[i] for i in rows] if isinstance(x, list) else x[rows]
