"""Anchor studies: how the number of anchors and the way they are chosen drive zero-shot stitching on your data.

The relative-representations paper ends on "anchors are key": their number and diversity shape what the relative
space can express. ``anchor_study`` measures it for a pair of spaces holding the same samples (two encoders, two
seeds, two languages): for every selection strategy and number of anchors it trains a linear classifier on one
space's relative vectors and applies it, unchanged, to the other space's (its own parallel anchors), in both
directions.

Protocol (the same for every strategy, so the numbers compare): a stratified train / test split of the samples;
anchors from the training samples (strategies below); relative vectors standardised per sample over the anchors;
a linear softmax classifier trained full-batch with Adam (``epochs`` steps, ``lr``) on one space's training
samples; accuracy on the other space's test samples (stitched) and on its own (non-stitched). Each cell is the
mean over ``seeds`` (anchor choice and classifier initialisation) of the mean of the two directions.

Strategies: ``random``, ``stratified``, ``kmeans``, ``farthest`` (``select_anchors`` on the first space's training
samples; the same samples are the anchors in the second space); ``learned`` (``fit_prototypes``: k-means-initialised
convex prototypes trained jointly with the classifier in the training space, carried to the other space by their
weights); ``out_of_domain`` (random samples of a separate parallel pool, ``out_of_domain=(pool_a, pool_b)``, e.g.
texts or images of other topics embedded by both models).

Every classifier is trained by ``latentstitch.training.fit`` (full batch, Adam); the result is an ``AnchorStudy``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows, to_numpy
from latentstitch._core.params import check_choice, check_positive, check_positive_int, check_seed
from latentstitch._core.progress import progress_bar
from latentstitch.relative import fit_prototypes, relative_projection, select_anchors, standardize_rows
from latentstitch.training._anchor_study_result import AnchorStudy
from latentstitch.training._loop import fit

STUDY_STRATEGIES = ("random", "stratified", "kmeans", "farthest", "learned", "out_of_domain")


def anchor_study(
    space_a: ArrayLike,
    space_b: ArrayLike,
    labels: ArrayLike,
    *,
    n_anchors: Sequence[int] = (10, 30, 100, 300),
    strategies: Sequence[str] | None = None,
    out_of_domain: tuple[ArrayLike, ArrayLike] | None = None,
    similarity: str = "cosine",
    seeds: Sequence[int] = (0, 1, 2),
    test_size: float = 0.25,
    epochs: int = 300,
    lr: float = 0.05,
    plot: str | Path | None = None,
    title: str | None = None,
    progress: bool = False,
    **similarity_kwargs: Any,
) -> AnchorStudy:
    """Zero-shot stitched accuracy against the number of anchors, for every anchor selection strategy.

    Parameters
    ----------
    space_a, space_b : (N, d_a), (N, d_b) arrays or tensors
        The same N samples embedded by two models (rows parallel).
    labels : (N,) integer class labels
    n_anchors : sequence of int
        Numbers of anchors to try (each at most the number of training samples, and of out-of-domain samples).
    strategies : sequence of str, optional
        Among ``STUDY_STRATEGIES``; default all of them, ``out_of_domain`` only when ``out_of_domain`` is given.
    out_of_domain : (pool_a, pool_b), optional
        Parallel samples from outside the task, embedded by both models, for the ``out_of_domain`` strategy.
    similarity, **similarity_kwargs
        The relative projection (default cosine).
    seeds : sequence of int
        Each seed draws the anchors and initialises the classifiers.
    test_size : float
        Share of the samples held out (stratified split, fixed seed 0).
    epochs, lr : int, float
        Full-batch Adam steps and learning rate of every classifier (and of the learned prototypes).
    plot : path, optional
        Write ``AnchorStudy.plot`` there.
    title : str, optional
        The plot's title.
    progress : bool
        Show a progress bar.

    Returns
    -------
    AnchorStudy (``summary()``, ``to_markdown()``, ``plot(path)``, ``to_json(path)``).
    """
    study = _Study.checked(space_a, space_b, labels, n_anchors, strategies, out_of_domain, seeds, test_size, epochs, lr)
    relative = _Relative(similarity, dict(similarity_kwargs))
    records = []
    with progress_bar(progress) as bar:
        task = bar.add_task("anchor study", total=len(study.cells())) if bar else None
        for strategy, n, seed in study.cells():
            records.append(study.record(strategy, n, seed, relative))
            if bar is not None:
                bar.update(task, advance=1)
    result = AnchorStudy(records, study.settings(similarity, title))
    if plot is not None:
        result.plot(plot)
    return result


@dataclass(frozen=True)
class _Relative:
    """The relative projection of the study (a similarity and its options)."""

    similarity: str
    options: dict[str, Any]

    def __call__(self, x: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        return relative_projection(x, anchors, self.similarity, **self.options)


@dataclass(frozen=True)
class _Study:
    """The checked inputs of an anchor study: both spaces (float64, CPU), labels, the train / test split, the
    out-of-domain pools, and what to vary."""

    spaces: dict[str, torch.Tensor]
    y: np.ndarray
    train: np.ndarray
    test: np.ndarray
    ood: tuple[torch.Tensor, torch.Tensor] | None
    strategies: list[str]
    counts: list[int]
    seeds: list[int]
    epochs: int
    lr: float

    @classmethod
    def checked(cls, space_a, space_b, labels, n_anchors, strategies, out_of_domain, seeds, test_size, epochs, lr):
        from sklearn.model_selection import train_test_split

        a = as_float_tensor(space_a, "space_a", ndim=2, min_rows=4).detach().cpu().double()
        b = as_float_tensor(space_b, "space_b", ndim=2, min_rows=4).detach().cpu().double()
        check_same_rows(a, b, "space_a", "space_b")
        y = _labels(labels, a.shape[0])
        strategies = _strategies(strategies, out_of_domain is not None)
        ood = _pools(out_of_domain, a, b) if "out_of_domain" in strategies else None
        counts = [check_positive_int(n, "n_anchors") for n in n_anchors]
        if not counts:
            raise ValueError("n_anchors: expected at least one number of anchors")
        seeds = [check_seed(s, "seeds") for s in seeds]
        if not seeds:
            raise ValueError("seeds: expected at least one seed")
        epochs = check_positive_int(epochs, "epochs")
        lr = check_positive(lr, "lr")
        if not 0 < test_size < 1:
            raise ValueError(f"test_size: expected a number in (0, 1), got {test_size}")
        train, test = train_test_split(np.arange(len(y)), test_size=test_size, stratify=y, random_state=0)
        largest = max(counts)
        if largest > len(train):
            raise ValueError(f"n_anchors: {largest} anchors exceed the {len(train)} training samples")
        if ood is not None and largest > ood[0].shape[0]:
            raise ValueError(f"n_anchors: {largest} anchors exceed the {ood[0].shape[0]} out-of-domain samples")
        return cls({"a": a, "b": b}, y, train, test, ood, strategies, counts, seeds, epochs, lr)

    @property
    def classes(self) -> int:
        return int(self.y.max()) + 1

    def cells(self) -> list[tuple[str, int, int]]:
        """Every (strategy, number of anchors, seed), in the order they are run."""
        return [(strategy, n, seed) for strategy in self.strategies for n in self.counts for seed in self.seeds]

    def record(self, strategy: str, n: int, seed: int, relative: _Relative) -> dict[str, Any]:
        """One cell: a classifier trained on each space's relative vectors, read on both spaces' test samples."""
        if strategy == "learned":
            heads, anchors = self._learned(n, seed, relative)
        else:
            heads, anchors = self._chosen(strategy, n, seed, relative)
        y_test = torch.from_numpy(self.y[self.test])
        scores = {}
        for trained in ("a", "b"):
            for read in ("a", "b"):
                r = relative(self.spaces[read][self.test], anchors[trained][read])
                scores[f"{trained}_to_{read}"] = _accuracy(heads[trained], r, y_test)
        return {
            "strategy": strategy,
            "n_anchors": n,
            "seed": seed,
            **scores,
            "stitched": (scores["a_to_b"] + scores["b_to_a"]) / 2,
            "non_stitched": (scores["a_to_a"] + scores["b_to_b"]) / 2,
        }

    def _learned(self, n: int, seed: int, relative: _Relative):
        """Prototypes learned jointly with the classifier in each space, carried to both spaces by their weights."""
        heads, anchors = {}, {}
        y_train = torch.from_numpy(self.y[self.train])
        for side, x in self.spaces.items():
            prototypes, heads[side] = fit_prototypes(
                x[self.train],
                y_train,
                n,
                similarity=relative.similarity,
                epochs=self.epochs,
                lr=self.lr,
                seed=seed,
                **relative.options,
            )
            with torch.no_grad():  # the prototypes in both spaces, from the weights learned here
                anchors[side] = {s: prototypes(v[self.train]) for s, v in self.spaces.items()}
        return heads, anchors

    def _chosen(self, strategy: str, n: int, seed: int, relative: _Relative):
        """Anchors chosen by ``strategy`` (the same items in both spaces), a classifier trained on each space."""
        a, b = self.spaces["a"], self.spaces["b"]
        if strategy == "out_of_domain":
            index = np.random.default_rng(seed).choice(self.ood[0].shape[0], size=n, replace=False)
            chosen = {"a": self.ood[0][index], "b": self.ood[1][index]}
        else:
            kwargs = {"labels": self.y[self.train]} if strategy == "stratified" else {}
            index = self.train[select_anchors(a[self.train], n, strategy, seed=seed, **kwargs)]
            chosen = {"a": a[index], "b": b[index]}
        y_train = torch.from_numpy(self.y[self.train])
        heads = {
            side: train_relative_head(
                relative(x[self.train], chosen[side]), y_train, self.classes, self.epochs, self.lr, seed
            )
            for side, x in self.spaces.items()
        }
        return heads, {side: chosen for side in self.spaces}

    def settings(self, similarity: str, title: str | None) -> dict[str, Any]:
        y_test = self.y[self.test]
        return {
            "similarity": similarity,
            "samples": len(self.y),
            "train": len(self.train),
            "test": len(self.test),
            "classes": self.classes,
            "chance": float(np.bincount(y_test).max() / len(self.test)),
            "epochs": self.epochs,
            "lr": self.lr,
            "seeds": self.seeds,
            "title": title or f"anchor study ({similarity}, {len(self.train)} training samples)",
        }


def _strategies(strategies: Sequence[str] | None, with_pools: bool) -> list[str]:
    if strategies is None:
        strategies = [s for s in STUDY_STRATEGIES if s != "out_of_domain" or with_pools]
    strategies = [check_choice(s, "strategies", STUDY_STRATEGIES) for s in strategies]
    if not strategies:
        raise ValueError("strategies: expected at least one strategy")
    return strategies


def _pools(out_of_domain: Any, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if out_of_domain is None:
        raise ValueError("out_of_domain: the 'out_of_domain' strategy needs (pool_a, pool_b), parallel samples")
    ood_a = as_float_tensor(out_of_domain[0], "out_of_domain[0]", ndim=2, min_rows=1).detach().cpu().double()
    ood_b = as_float_tensor(out_of_domain[1], "out_of_domain[1]", ndim=2, min_rows=1).detach().cpu().double()
    check_same_rows(ood_a, ood_b, "out_of_domain[0]", "out_of_domain[1]")
    if ood_a.shape[1] != a.shape[1] or ood_b.shape[1] != b.shape[1]:
        raise ValueError("out_of_domain: the pools must have the widths of space_a and space_b")
    return ood_a, ood_b


def _labels(y: ArrayLike, n: int) -> np.ndarray:
    labels = to_numpy(y, "labels") if isinstance(y, torch.Tensor) else np.asarray(y)
    if labels.shape != (n,):
        raise ValueError(f"labels: expected shape ({n},) to match space_a, got {labels.shape}")
    if labels.dtype.kind not in "iub":
        raise TypeError(f"labels: expected integer class labels, got dtype {labels.dtype}")
    return labels.astype(np.int64)


def _cross_entropy(head: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    z, y = batch
    return F.cross_entropy(head(z), y)


def train_relative_head(r: torch.Tensor, y: torch.Tensor, classes: int, epochs: int, lr: float, seed: int) -> nn.Linear:
    """A linear softmax classifier on relative vectors standardised per sample over the anchors, trained full-batch
    by ``fit`` (Adam, ``epochs`` steps) and initialised under ``seed``, without touching torch's global generator."""
    seed = check_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = nn.Linear(r.shape[1], classes).to(r.dtype)
        fit(head, _cross_entropy, [(standardize_rows(r), y)], epochs=epochs, lr=lr, seed=None, progress=False)
    return head.eval()


@torch.no_grad()
def _accuracy(head: nn.Linear, r: torch.Tensor, y: torch.Tensor) -> float:
    return float((head(standardize_rows(r)).argmax(dim=1) == y).double().mean())
