"""Standard dataset formats users keep locally: torchvision MNIST/CIFAR folders, Hugging Face ``save_to_disk``
folders and Planetoid raw files (Cora, CiteSeer, PubMed).

Nothing is downloaded: each loader reads files already on disk, in their original format. CIFAR batches and
Planetoid files are Python pickles; they are read with a restricted unpickler that can only rebuild the few
classes those files hold (numpy arrays, scipy sparse matrices, lists and dicts), never call anything else, so a
tampered file cannot run code.
"""

from __future__ import annotations

import collections
import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.extras import require
from latentstitch._core.persist import read_json
from latentstitch.data._datasets import LabelledSplit, check_fraction, class_names, split_dataset, stratified_subset
from latentstitch.data._graphs import Graph, coalesce_edges
from latentstitch.data._images import images_to_float, labelled_from_parts, read_idx

# --------------------------------------------------------------------------------------------------------------
# Restricted unpickling
# --------------------------------------------------------------------------------------------------------------


def _numpy_reconstructors() -> dict[tuple[str, str], Any]:
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray  # type: ignore[no-redef]
    allowed: dict[tuple[str, str], Any] = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype}
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):  # written by numpy 1.x / 2.x
        allowed[(module, "_reconstruct")] = multiarray._reconstruct
        allowed[(module, "scalar")] = multiarray.scalar
    allowed[("_codecs", "encode")] = _latin1_bytes  # how Python 3 writes bytes into protocol-2 pickles
    return allowed


def _latin1_bytes(text: str, encoding: str = "latin1") -> bytes:
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refusing _codecs.encode with encoding {encoding!r}")
    return text.encode("latin1")


class _SparseState:
    """Stand-in for a pickled scipy sparse matrix: collects its state, rebuilt afterwards with public scipy API."""

    fmt = ""

    def __setstate__(self, state: dict) -> None:
        self.state = state


def _sparse_stand_in(fmt: str) -> type:
    return type(f"_{fmt}_state", (_SparseState,), {"fmt": fmt})


def _sparse_classes() -> dict[tuple[str, str], Any]:
    allowed = {}
    for fmt in ("csr", "csc", "coo"):
        stand_in = _sparse_stand_in(fmt)
        for module in (f"scipy.sparse.{fmt}", f"scipy.sparse._{fmt}"):  # module path before / after scipy 1.8
            for kind in ("matrix", "array"):
                allowed[(module, f"{fmt}_{kind}")] = stand_in
    return allowed


def _container_classes() -> dict[tuple[str, str], Any]:
    return {
        ("collections", "defaultdict"): collections.defaultdict,
        ("__builtin__", "list"): list,  # Python 2 name, as in Planetoid's graph files
        ("builtins", "list"): list,
    }


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the (module, name) pairs it is given and refuses every other global.

    Python 2 pickles (CIFAR, Planetoid) are decoded with ``encoding="latin1"``, numpy's documented setting for
    them (a Python 2 ``str`` holding array bytes maps one-to-one onto latin-1 characters).
    """

    def __init__(self, file, allowed: Mapping[tuple[str, str], Any], *, source: str) -> None:
        super().__init__(file, encoding="latin1")
        self._allowed = allowed
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"{self._source}: refusing to load {module}.{name}; only numpy arrays, scipy sparse matrices and "
                "plain containers are allowed in this file format"
            ) from None


def restricted_load(path: Path, allowed: Mapping[tuple[str, str], Any]) -> Any:
    """Unpickle ``path`` with only the ``allowed`` classes; a missing, truncated or damaged file is a ValueError
    naming it."""
    if not path.is_file():
        raise ValueError(f"path: {str(path)!r} not found")
    try:
        with open(path, "rb") as f:
            return RestrictedUnpickler(f, allowed, source=str(path)).load()
    except pickle.UnpicklingError as error:
        if "refusing to load" in str(error):
            raise
        raise ValueError(f"path: {str(path)!r} is not a readable pickle ({error})") from None
    except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError) as error:
        raise ValueError(f"path: {str(path)!r} is damaged or truncated ({type(error).__name__}: {error})") from None


def _entry(content: Any, key: str, path: Path) -> Any:
    """``content[key]`` of an unpickled file, a missing entry being an error naming the file."""
    if not isinstance(content, Mapping) or key not in content:
        raise ValueError(f"path: {str(path)!r} holds no {key!r} entry (not a file of this dataset's format?)")
    return content[key]


def _as_dense(value: Any, path: Path) -> np.ndarray:
    """A numpy array from a loaded array or sparse stand-in."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, _SparseState):
        from scipy import sparse

        state = value.state
        shape = tuple(state.get("_shape", state.get("shape")))
        if value.fmt == "coo":
            matrix = sparse.coo_matrix((state["data"], (state["row"], state["col"])), shape=shape)
        else:
            build = sparse.csr_matrix if value.fmt == "csr" else sparse.csc_matrix
            matrix = build((state["data"], state["indices"], state["indptr"]), shape=shape)
        return matrix.toarray()
    raise ValueError(f"{path}: expected an array or a sparse matrix, got {type(value).__name__}")


# --------------------------------------------------------------------------------------------------------------
# torchvision folders
# --------------------------------------------------------------------------------------------------------------

_TORCHVISION_IDX = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


def _find_idx(raw: Path, stem: str) -> Path:
    for candidate in (raw / stem, raw / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"{raw}: neither {stem} nor {stem}.gz found (torchvision's MNIST layout)")


def load_mnist_folder(
    root: str | os.PathLike,
    name: str = "MNIST",
    *,
    n_train: int | None = None,
    n_test: int | None = None,
    seed: int = 0,
    classes: tuple[str, ...] | None = None,
) -> LabelledSplit:
    """MNIST-format data from a torchvision download folder: ``root/<name>/raw/*-ubyte[.gz]`` (IDX files).

    ``name`` is the torchvision dataset folder (``MNIST``, ``FashionMNIST``, ``KMNIST``); ``root`` may also be the
    ``raw`` folder itself. The official train/test split, optionally cut to stratified seeded subsets. Images are
    (N, 1, 28, 28) float32 in [0, 1]; class names default to the label values.
    """
    root = Path(root)
    raw = root / name / "raw"
    if not raw.is_dir():
        raw = root
    parts = tuple(read_idx(_find_idx(raw, stem)) for stem in _TORCHVISION_IDX)
    labels = classes or class_names(np.unique(np.concatenate([parts[1], parts[3]])))
    return labelled_from_parts(name.lower(), parts, labels, n_train=n_train, n_test=n_test, seed=seed)


_CIFAR = {
    "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], "test_batch", "batches.meta"),
    "cifar100": ("cifar-100-python", ["train"], "test", "meta"),
}


def load_cifar_folder(
    root: str | os.PathLike,
    name: str = "cifar10",
    *,
    label: str = "fine",
    n_train: int | None = None,
    n_test: int | None = None,
    seed: int = 0,
) -> LabelledSplit:
    """CIFAR-10 / CIFAR-100 from the "python version" folders torchvision downloads.

    ``root`` holds ``cifar-10-batches-py/`` (``data_batch_1..5``, ``test_batch``, ``batches.meta``) or
    ``cifar-100-python/`` (``train``, ``test``, ``meta``), or is that folder itself. CIFAR-100 has ``label="fine"``
    (100 classes) or ``"coarse"`` (20 superclasses). Images are (N, 3, 32, 32) float32 in [0, 1]. The batches
    are Python 2 pickles; they are read with a restricted unpickler that only rebuilds numpy arrays.
    """
    if name not in _CIFAR:
        raise ValueError(f"name: expected 'cifar10' or 'cifar100', got {name!r}")
    if label not in ("fine", "coarse") or (name == "cifar10" and label != "fine"):
        raise ValueError(f"label: expected 'fine' (or 'coarse' for cifar100), got {label!r}")
    folder_name, train_files, test_file, meta_file = _CIFAR[name]
    folder = Path(root)
    if (folder / folder_name).is_dir():
        folder = folder / folder_name
    allowed = _numpy_reconstructors()
    key = "labels" if name == "cifar10" else f"{label}_labels"

    def read(files: list[str]) -> tuple[np.ndarray, np.ndarray]:
        images, labels = [], []
        for file in files:
            path = folder / file
            if not path.exists():
                raise FileNotFoundError(f"{path} not found (torchvision's {folder_name} layout)")
            batch = restricted_load(path, allowed)
            try:
                images.append(np.asarray(_entry(batch, "data", path), dtype=np.uint8).reshape(-1, 3, 32, 32))
                labels.append(np.asarray(_entry(batch, key, path), dtype=np.int64))
            except (TypeError, ValueError) as error:
                raise ValueError(f"path: {str(path)!r} does not hold CIFAR images and labels ({error})") from None
        return np.concatenate(images).transpose(0, 2, 3, 1), np.concatenate(labels)

    meta = restricted_load(folder / meta_file, allowed)
    names_key = "label_names" if name == "cifar10" else f"{label}_label_names"
    classes = tuple(_entry(meta, names_key, folder / meta_file))
    parts = (*read(train_files), *read([test_file]))
    return labelled_from_parts(
        name if name == "cifar10" else f"cifar100-{label}",
        parts,
        classes,
        n_train=n_train,
        n_test=n_test,
        seed=seed,
    )


# --------------------------------------------------------------------------------------------------------------
# Hugging Face save_to_disk
# --------------------------------------------------------------------------------------------------------------


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
        shard = folder / str(entry.get("filename") if isinstance(entry, dict) else entry)
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
        return {split: folder / split for split in listing["splits"]}
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


# --------------------------------------------------------------------------------------------------------------
# Planetoid
# --------------------------------------------------------------------------------------------------------------


def load_planetoid(root: str | os.PathLike, name: str = "cora") -> Graph:
    """Cora, CiteSeer or PubMed from the Planetoid raw files (Yang et al. 2016), the standard split.

    ``root`` holds ``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}``, directly or as PyTorch Geometric keeps
    them (``root/<Name>/raw/``). Assembled as PyG's ``Planetoid`` does: features (raw bag-of-words, not
    row-normalised) and labels are ``allx``/``ally`` then ``tx``/``ty`` put in test-index order; train = the
    first ``len(y)`` nodes, validation the next 500 (within ``allx``), test the nodes in ``test.index``; edges
    from the adjacency dict with self-loops and duplicates removed. CiteSeer's isolated test nodes (missing from
    ``tx``) get zero features and label -1 (PyG gives them label 0). The pickles are read with a restricted
    unpickler (numpy arrays, scipy sparse matrices, dict of lists only). The files store no class names:
    ``classes`` are the label indices.
    """
    key = name.lower()
    folder = Path(root)
    for candidate in (folder / name / "raw", folder / key / "raw", folder / key.capitalize() / "raw"):
        if candidate.is_dir():
            folder = candidate
            break
    allowed = {**_numpy_reconstructors(), **_sparse_classes(), **_container_classes()}

    def item(part: str) -> Any:
        path = folder / f"ind.{key}.{part}"
        if not path.exists():
            raise FileNotFoundError(f"{path} not found (Planetoid raw files: ind.{key}.x, .tx, .allx, ...)")
        return restricted_load(path, allowed)

    x, tx, allx = (_as_dense(item(p), folder / f"ind.{key}.{p}") for p in ("x", "tx", "allx"))
    y, ty, ally = (_as_dense(item(p), folder / f"ind.{key}.{p}") for p in ("y", "ty", "ally"))
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{folder}: ind.{key}.x has {x.shape[0]} rows but ind.{key}.y has {y.shape[0]}")
    graph = item("graph")
    index_path = folder / f"ind.{key}.test.index"
    try:
        test_index = np.loadtxt(index_path, dtype=np.int64, ndmin=1)
    except (OSError, ValueError) as error:
        raise ValueError(f"path: {str(index_path)!r} is not a list of node ids ({error})") from None
    if not isinstance(graph, Mapping):
        raise ValueError(f"path: {str(folder / f'ind.{key}.graph')!r} is not an adjacency dict")
    sorted_test = np.sort(test_index)
    ty_labels = _labels_from_onehot(ty)
    span = int(sorted_test[-1] - sorted_test[0]) + 1
    if span != len(sorted_test):  # CiteSeer: test ids with gaps (isolated nodes absent from tx)
        tx_full = np.zeros((span, tx.shape[1]), dtype=tx.dtype)
        tx_full[sorted_test - sorted_test[0]] = tx
        ty_full = np.full(span, -1, dtype=np.int64)
        ty_full[sorted_test - sorted_test[0]] = ty_labels
        tx, ty_labels = tx_full, ty_full
    features = np.concatenate([allx, tx]).astype(np.float32)
    labels = np.concatenate([_labels_from_onehot(ally), ty_labels])
    features[test_index] = features[sorted_test]
    labels[test_index] = labels[sorted_test]
    n = features.shape[0]
    rows = np.asarray([node for node, neighbours in graph.items() for _ in neighbours], dtype=np.int64)
    cols = np.asarray([m for neighbours in graph.values() for m in neighbours], dtype=np.int64)
    inside = (rows < n) & (cols < n)
    edge_index = coalesce_edges(rows[inside], cols[inside], n, symmetric=False)
    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    masks[0][: len(y)] = True
    masks[1][len(y) : min(len(y) + 500, allx.shape[0])] = True  # the clip only matters for tiny graphs
    masks[2][test_index] = True
    classes = class_names(range(ally.shape[1]))  # the files store no class names
    return Graph(key, features, edge_index, labels, *masks, classes)


def _labels_from_onehot(onehot: np.ndarray) -> np.ndarray:
    labels = onehot.argmax(axis=1).astype(np.int64)
    labels[onehot.sum(axis=1) == 0] = -1
    return labels
