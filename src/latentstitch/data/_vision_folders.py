"""torchvision-style MNIST and CIFAR folders users keep locally, read in their original format (IDX files, CIFAR
pickle batches through the restricted unpickler). Nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from latentstitch._core.params import check_seed
from latentstitch.data._datasets import LabelledSplit, class_names
from latentstitch.data._images import labelled_from_parts, read_idx
from latentstitch.data._unpickle import entry, numpy_reconstructors, restricted_load

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
    check_seed(seed)
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
    check_seed(seed)
    folder = Path(root)
    if (folder / folder_name).is_dir():
        folder = folder / folder_name
    allowed = numpy_reconstructors()
    key = "labels" if name == "cifar10" else f"{label}_labels"

    def read(files: list[str]) -> tuple[np.ndarray, np.ndarray]:
        images, labels = [], []
        for file in files:
            path = folder / file
            if not path.exists():
                raise FileNotFoundError(f"{path} not found (torchvision's {folder_name} layout)")
            batch = restricted_load(path, allowed)
            try:
                images.append(np.asarray(entry(batch, "data", path), dtype=np.uint8).reshape(-1, 3, 32, 32))
                labels.append(np.asarray(entry(batch, key, path), dtype=np.int64))
            except (TypeError, ValueError) as error:
                raise ValueError(f"path: {str(path)!r} does not hold CIFAR images and labels ({error})") from None
        return np.concatenate(images).transpose(0, 2, 3, 1), np.concatenate(labels)

    meta = restricted_load(folder / meta_file, allowed)
    names_key = "label_names" if name == "cifar10" else f"{label}_label_names"
    classes = tuple(entry(meta, names_key, folder / meta_file))
    parts = (*read(train_files), *read([test_file]))
    return labelled_from_parts(
        name if name == "cifar10" else f"cifar100-{label}",
        parts,
        classes,
        n_train=n_train,
        n_test=n_test,
        seed=seed,
    )
