"""Choosing anchors: which samples every other sample is described relative to.

``select_anchors`` returns indices into the data, so the same indices pick *parallel anchors* in any other space
that holds the same samples (another seed, another architecture, a translation of the same sentences). Anchors
may also be out-of-domain: any vectors of the right width can be passed as ``anchors`` to the projection.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.metrics import pairwise_distances_argmin
from sklearn.utils import shuffle

from latentstitch._validation import ArrayLike, as_float_tensor, check_choice, check_positive_int, check_seed, to_numpy

STRATEGIES = ("random", "stratified", "kmeans", "farthest")


def select_anchors(
    x: ArrayLike,
    n: int,
    strategy: str = "random",
    *,
    labels: ArrayLike | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Pick ``n`` anchor indices among the rows of ``x``; deterministic for a given ``seed``.

    Strategies
    ----------
    random
        Uniform sample without replacement.
    stratified
        The official relreps recipe: shuffle the indices with ``sklearn.utils.shuffle(random_state=seed)``, then
        take one per class in sorted class order, round-robin, until ``n`` (classes that run out are skipped).
        Needs ``labels``.
    kmeans
        k-means with ``n`` clusters (``random_state=seed``); for each centroid the real sample nearest to it
        (distinct samples).
    farthest
        Farthest-point sampling (greedy k-center): start at a seeded random sample, then repeatedly add the
        sample farthest (Euclidean) from those chosen. Covers the space, including outliers.

    Returns
    -------
    indices : (n,) int64 numpy array, in selection order.
    """
    check_choice(strategy, "strategy", STRATEGIES)
    n = check_positive_int(n, "n")
    seed = check_seed(seed, allow_none=True)
    xt = as_float_tensor(x, "x", ndim=2)
    total = xt.shape[0]
    if n > total:
        raise ValueError(f"n: asked for {n} anchors but x has only {total} samples")
    if strategy == "stratified":
        return _stratified(total, n, labels, seed)
    if labels is not None:
        raise ValueError(f"labels: only used by strategy='stratified', not {strategy!r}")
    if strategy == "random":
        return np.random.default_rng(seed).choice(total, size=n, replace=False).astype(np.int64)
    if strategy == "kmeans":
        return _kmeans(to_numpy(xt, "x"), n, seed)
    return _farthest(xt, n, seed)


def _stratified(total: int, n: int, labels: ArrayLike | None, seed: int) -> np.ndarray:
    if labels is None:
        raise ValueError("labels: strategy='stratified' needs the class label of every sample")
    y = np.asarray(to_numpy(labels, "labels") if isinstance(labels, torch.Tensor) else labels)
    if y.ndim != 1 or y.shape[0] != total:
        raise ValueError(f"labels: expected shape ({total},) to match x, got {y.shape}")
    indices, targets = shuffle(np.arange(total), y, random_state=seed)
    per_class = [indices[targets == c] for c in sorted(set(targets.tolist()))]
    chosen: list[int] = []
    for position in range(max(len(p) for p in per_class)):
        for members in per_class:
            if position < len(members):
                chosen.append(int(members[position]))
                if len(chosen) == n:
                    return np.asarray(chosen, dtype=np.int64)
    raise AssertionError("unreachable: n <= number of samples")


def _kmeans(x: np.ndarray, n: int, seed: int) -> np.ndarray:
    centers = KMeans(n_clusters=n, n_init=1, random_state=seed).fit(x).cluster_centers_
    nearest = pairwise_distances_argmin(centers, x)
    chosen: list[int] = []
    used: set[int] = set()
    for center, index in zip(centers, nearest, strict=True):
        if index in used:  # two centroids share a nearest sample: take the nearest unused one
            order = np.argsort(((x - center) ** 2).sum(axis=1))
            index = next(i for i in order if i not in used)
        used.add(int(index))
        chosen.append(int(index))
    return np.asarray(chosen, dtype=np.int64)


def _farthest(x: torch.Tensor, n: int, seed: int) -> np.ndarray:
    x64 = x.detach().double()
    first = int(np.random.default_rng(seed).integers(x.shape[0]))
    chosen = [first]
    nearest = torch.linalg.vector_norm(x64 - x64[first], dim=1)
    for _ in range(n - 1):
        index = int(torch.argmax(nearest))
        if nearest[index] == 0:
            raise ValueError(f"x: has only {len(chosen)} distinct samples, fewer than the n={n} anchors asked for")
        chosen.append(index)
        nearest = torch.minimum(nearest, torch.linalg.vector_norm(x64 - x64[index], dim=1))
    return np.asarray(chosen, dtype=np.int64)
