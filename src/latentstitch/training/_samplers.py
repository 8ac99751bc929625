"""Seeded batch samplers: shuffled batches, class-balanced batches (Hofer et al.) and the mixed random /
class-pure schedule of the robust relative transform paper.

Each is a ``torch.utils.data.Sampler`` yielding lists of indices, so it serves as a ``DataLoader``'s
``batch_sampler``; ``TensorBatches`` applies one to in-memory tensors. Every sampler draws from its own
``torch.Generator`` seeded at construction: two samplers with the same seed yield the same batches, epoch after
epoch, whatever else uses torch's global random state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Sampler

from latentstitch._core.arrays import to_numpy
from latentstitch._core.params import check_bool, check_positive_int, check_seed


class RandomBatchSampler(Sampler[list[int]]):
    """A fresh random permutation of ``range(num_samples)`` every epoch, cut into batches of ``batch_size``.

    The last batch is smaller unless ``drop_last``.
    """

    def __init__(self, num_samples: int, batch_size: int, *, drop_last: bool = False, seed: int = 0):
        self.num_samples = check_positive_int(num_samples, "num_samples")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.drop_last = check_bool(drop_last, "drop_last")
        self.generator = torch.Generator().manual_seed(check_seed(seed))

    def __iter__(self) -> Iterator[list[int]]:
        order = torch.randperm(self.num_samples, generator=self.generator)
        stop = len(self) * self.batch_size if self.drop_last else self.num_samples
        for start in range(0, stop, self.batch_size):
            yield order[start : start + self.batch_size].tolist()

    def __len__(self) -> int:
        full, rest = divmod(self.num_samples, self.batch_size)
        return full + (0 if self.drop_last or not rest else 1)


class ClassBalancedBatchSampler(Sampler[list[int]]):
    """Batches of ``classes_per_batch`` groups of ``samples_per_class`` same-class samples (Hofer et al. 2020).

    Batch layout: group k occupies rows ``k*n .. (k+1)*n - 1`` (n = ``samples_per_class``), so the
    topological loss reads the groups with ``group_size=n`` or by reshaping the latents to (b, n, d).

    ``replacement=True`` (default) is Hofer et al.'s ``IntraLabelMultiDraw``: every epoch walks a random
    permutation of the data, b samples per batch; each sample brings ``n - 1`` further samples of its class drawn
    uniformly *with* replacement. Two groups of a batch may then share a class and a group may repeat a sample
    (the loss gives duplicates a death time of 0). ``len(labels) // b`` batches per epoch.

    ``replacement=False``: each batch draws b *distinct* classes (uniformly) and n distinct samples of each,
    balancing classes exactly; needs b <= number of classes and n <= the smallest class size. Same number of
    batches per epoch.
    """

    def __init__(
        self,
        labels: object,
        classes_per_batch: int = 8,
        samples_per_class: int = 16,
        *,
        replacement: bool = True,
        seed: int = 0,
    ):
        self.labels = _as_labels(labels)
        self.classes_per_batch = check_positive_int(classes_per_batch, "classes_per_batch")
        self.samples_per_class = check_positive_int(samples_per_class, "samples_per_class")
        self.replacement = check_bool(replacement, "replacement")
        seed = check_seed(seed)
        self.by_class = _indices_by_class(self.labels)
        if len(self.labels) < self.classes_per_batch:
            raise ValueError(f"labels: {len(self.labels)} samples cannot fill {self.classes_per_batch} groups")
        if not replacement:
            if self.classes_per_batch > len(self.by_class):
                raise ValueError(
                    f"classes_per_batch: {self.classes_per_batch} distinct classes requested but labels hold "
                    f"{len(self.by_class)}; lower it or use replacement=True"
                )
            smallest = min(len(rows) for rows in self.by_class.values())
            if self.samples_per_class > smallest:
                raise ValueError(
                    f"samples_per_class: {self.samples_per_class} distinct samples per class requested but the "
                    f"smallest class has {smallest}; lower it or use replacement=True"
                )
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.labels) // self.classes_per_batch

    def __iter__(self) -> Iterator[list[int]]:
        b, n = self.classes_per_batch, self.samples_per_class
        classes = list(self.by_class)
        if self.replacement:
            order = torch.randperm(len(self.labels), generator=self.generator)[: len(self) * b].tolist()
            for start in range(0, len(order), b):
                batch = []
                for first in order[start : start + b]:
                    rows = self.by_class[int(self.labels[first])]
                    draws = torch.randint(len(rows), (n - 1,), generator=self.generator).tolist()
                    batch += [first, *(rows[d] for d in draws)]
                yield batch
            return
        for _ in range(len(self)):
            batch = []
            for c in torch.randperm(len(classes), generator=self.generator)[:b].tolist():
                rows = self.by_class[classes[c]]
                batch += [rows[i] for i in torch.randperm(len(rows), generator=self.generator)[:n].tolist()]
            yield batch


class ClassAccumulationSampler(Sampler[list[int]]):
    """The mixed schedule of García-Castellanos et al. (``ClassAccumulationSampler``, arXiv 2409.10967).

    Yields groups of ``1 + class_pure_batches`` batches of ``batch_size``: first one *random* batch (uniform over
    the whole data, no replacement within the epoch), then ``class_pure_batches`` batches that each hold a single
    class (default: as many as there are classes). Every epoch each class's samples are shuffled and cut into
    class-pure batches (an incomplete last one is dropped); the groups take, round after round, one batch of
    every class that still has one, in random order. An epoch ends when fewer than ``class_pure_batches``
    class-pure batches are left.

    Why: a class-pure batch has biased batch statistics. So the training loop runs the random batch forward in
    train mode only to update batch-norm running statistics (and re-embed anchors), with no loss, and runs the
    class-pure batches with batch norm in eval mode (running statistics), computing cross-entropy plus the
    topological loss, accumulating their gradients for one optimiser step per group. ``tagged(...)`` marks each
    batch; with a ``DataLoader``, position ``i`` of the epoch is random iff ``i % group_size == 0``.
    ``ClassificationObjective`` implements the loop's side.
    """

    def __init__(self, labels: object, batch_size: int = 16, *, class_pure_batches: int | None = None, seed: int = 0):
        self.labels = _as_labels(labels)
        self.batch_size = check_positive_int(batch_size, "batch_size")
        seed = check_seed(seed)
        self.by_class = _indices_by_class(self.labels)
        self.class_pure_batches = check_positive_int(
            len(self.by_class) if class_pure_batches is None else class_pure_batches, "class_pure_batches"
        )
        if sum(len(rows) // self.batch_size for rows in self.by_class.values()) < self.class_pure_batches:
            raise ValueError(
                f"batch_size: too few samples per class for {self.class_pure_batches} class-pure batches of "
                f"{self.batch_size}"
            )
        if len(self.labels) < self.batch_size:
            raise ValueError(f"batch_size: {self.batch_size} exceeds the {len(self.labels)} samples")
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def group_size(self) -> int:
        return 1 + self.class_pure_batches

    def __len__(self) -> int:
        pure = sum(len(rows) // self.batch_size for rows in self.by_class.values())
        groups = min(pure // self.class_pure_batches, len(self.labels) // self.batch_size)
        return groups * self.group_size

    def __iter__(self) -> Iterator[list[int]]:
        s = self.batch_size
        per_class = {}
        for label, rows in self.by_class.items():
            shuffled = [rows[i] for i in torch.randperm(len(rows), generator=self.generator).tolist()]
            per_class[label] = [shuffled[k : k + s] for k in range(0, len(rows) - s + 1, s)]
        rounds = max(len(batches) for batches in per_class.values())
        pure = []
        for r in range(rounds):
            present = [label for label, batches in per_class.items() if r < len(batches)]
            for k in torch.randperm(len(present), generator=self.generator).tolist():
                pure.append(per_class[present[k]][r])
        random_order = torch.randperm(len(self.labels), generator=self.generator).tolist()
        for g in range(len(self) // self.group_size):
            yield random_order[g * s : (g + 1) * s]
            yield from pure[g * self.class_pure_batches : (g + 1) * self.class_pure_batches]

    def tagged(self, *tensors: torch.Tensor) -> TensorBatches:
        """``TensorBatches`` over ``tensors`` whose batches end with a bool: True for class-pure batches."""
        return TensorBatches(tensors, self, tag=lambda position: position % self.group_size != 0)


class TensorBatches:
    """Re-iterable batches of in-memory tensors: each epoch, ``tuple(t[indices] for t in tensors)`` for every
    index batch of ``sampler``. With ``tag``, each tuple ends with ``tag(position in the epoch)``."""

    def __init__(
        self,
        tensors: Sequence[torch.Tensor],
        sampler: Sampler[list[int]],
        *,
        tag: Callable[[int], object] | None = None,
    ):
        tensors = tuple(tensors)
        if not tensors or any(not isinstance(t, torch.Tensor) for t in tensors):
            raise TypeError("tensors: expected one or more torch tensors")
        if len({len(t) for t in tensors}) != 1:
            raise ValueError(f"tensors: different numbers of rows {[len(t) for t in tensors]}")
        self.tensors = tensors
        self.sampler = sampler
        self.tag = tag

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[tuple]:
        for position, indices in enumerate(self.sampler):
            index = torch.as_tensor(indices, dtype=torch.long, device=self.tensors[0].device)
            batch = tuple(t[index] for t in self.tensors)
            yield batch if self.tag is None else (*batch, self.tag(position))


def _as_labels(labels: object) -> np.ndarray:
    array = np.asarray(to_numpy(labels, "labels") if isinstance(labels, torch.Tensor) else labels)
    if array.ndim != 1 or array.dtype.kind not in "iub":
        raise ValueError(
            f"labels: expected a 1-D array of integer class labels, got shape {array.shape}, {array.dtype}"
        )
    if len(array) == 0:
        raise ValueError("labels: empty")
    return array


def _indices_by_class(labels: np.ndarray) -> dict[int, list[int]]:
    return {int(c): np.flatnonzero(labels == c).tolist() for c in np.unique(labels)}
