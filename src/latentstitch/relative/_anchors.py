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

from latentstitch._core.arrays import ArrayLike, as_float_tensor, to_numpy
from latentstitch._core.params import check_choice, check_positive_int, check_seed

STRATEGIES = ("random", "stratified", "kmeans", "farthest")


def select_anchors(
    x: ArrayLike | int,
    n: int,
    strategy: str = "random",
    *,
    labels: ArrayLike | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Pick ``n`` anchor indices among the rows of ``x``; deterministic for a given ``seed``.

    ``x`` is the (N, d) data, or for the strategies that never look at the vectors (``random``, ``stratified``) just
    the number of samples N: ``select_anchors(1200, 300)`` picks 300 of 1,200 rows.

    Strategies
    ----------
    random
        Uniform sample without replacement.
    stratified
        The official relreps recipe: shuffle the indices with ``sklearn.utils.shuffle(random_state=seed)``, then
        take one per class in sorted class order, round-robin, until ``n`` (classes that run out are skipped).
        Needs ``labels``.
    kmeans
        k-means with ``n`` clusters (Lloyd's algorithm from a greedy k-means++ start, ``seed``); for each centroid the
        real sample nearest to it (distinct samples). The data are clustered in float32.
    farthest
        Farthest-point sampling (greedy k-center): start at a seeded random sample, then repeatedly add the
        sample farthest (Euclidean) from those chosen. Covers the space, including outliers.

    Both k-means++ and farthest-point keep every sample's squared distance to the nearest chosen point and update
    it with one matrix-vector product per new point (``|x|^2 - 2 x.c + |c|^2``), so each step reads the data once;
    on 10,000 x 1,280 vectors picking 300 anchors takes seconds.

    Returns
    -------
    indices : (n,) int64 numpy array, in selection order.
    """
    check_choice(strategy, "strategy", STRATEGIES)
    n = check_positive_int(n, "n")
    seed = check_seed(seed, allow_none=True)
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        if strategy in ("kmeans", "farthest"):
            raise TypeError(f"x: strategy={strategy!r} needs the (N, d) data, not only the number of samples")
        total, xt = check_positive_int(x, "x"), None
    else:
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
    data = to_numpy(xt, "x")
    if strategy == "kmeans":
        return _kmeans(data, n, seed)
    return _farthest(data, n, seed)


def _stratified(total: int, n: int, labels: ArrayLike | None, seed: int) -> np.ndarray:
    if labels is None:
        raise ValueError("labels: strategy='stratified' needs the class label of every sample")
    y = np.asarray(to_numpy(labels, "labels") if isinstance(labels, torch.Tensor) else labels)
    if y.ndim != 1 or y.shape[0] != total:
        raise ValueError(f"labels: expected shape ({total},) to match x, got {y.shape}")
    missing = np.flatnonzero(_is_missing(y))
    if missing.size:
        raise ValueError(
            f"labels: {missing.size} label(s) are missing (NaN or None; first at row {missing[0]}); stratified "
            "sampling needs the class of every sample: drop those rows or give them a class"
        )
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


def _is_missing(y: np.ndarray) -> np.ndarray:
    """Which labels are missing: NaN in a float array, None or NaN in an object array."""
    if y.dtype.kind == "f":
        return np.isnan(y)
    if y.dtype.kind == "O":
        return np.array([v is None or (isinstance(v, float) and v != v) for v in y], dtype=bool)
    return np.zeros(y.shape, dtype=bool)


class _NearestDistances:
    """Every sample's squared Euclidean distance to the nearest of a growing set of chosen samples.

    Adding a sample costs one matrix-vector product, ``|x_i|^2 - 2 x_i.c + |c|^2``, in the data's precision
    (float64 for farthest-point sampling, float32 for k-means++ seeding); an exact float64 check guards against
    calling two distinct samples equal.
    """

    def __init__(self, x: np.ndarray):
        self.x = x
        self.squares = np.einsum("ij,ij->i", x, x)
        self.nearest = np.full(x.shape[0], np.inf, dtype=x.dtype)
        self.chosen: list[int] = []

    def add(self, index: int) -> None:
        distances = self.squares - 2 * (self.x @ self.x[index]) + self.squares[index]
        np.minimum(self.nearest, np.maximum(distances, 0), out=self.nearest)
        self.nearest[index] = 0
        self.chosen.append(index)

    def add_best_of(self, candidates: np.ndarray) -> None:
        """Add the candidate that leaves the smallest total squared distance (the greedy k-means++ step): all
        candidates' distances come from one matrix product, so the data are still read once per step."""
        distances = self.squares[:, None] - 2 * (self.x @ self.x[candidates].T) + self.squares[candidates][None, :]
        after = np.minimum(self.nearest[:, None], np.maximum(distances, 0))
        best = int(np.argmin(after.sum(axis=0, dtype=np.float64)))
        self.nearest = after[:, best].copy()
        self.nearest[candidates[best]] = 0
        self.chosen.append(int(candidates[best]))

    def is_new(self, index: int) -> bool:
        """Whether sample ``index`` differs from every chosen one (exactly, in float64)."""
        scale = max(float(self.squares.max()), np.finfo(np.float64).tiny)
        if self.nearest[index] > 1e-3 * scale:  # far beyond the expansion's rounding
            return True
        row = self.x[index].astype(np.float64)
        return bool(np.any(self.x[self.chosen].astype(np.float64) != row, axis=1).all())


def _kmeans_plus_plus(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Greedy k-means++ seeding (Arthur and Vassilvitskii 2007, with scikit-learn's ``2 + log(n)`` trials per centre):
    draw candidates with probability proportional to the squared distance to the nearest centre so far, keep the one
    that lowers the total squared distance most."""
    tracker = _NearestDistances(x)
    tracker.add(int(rng.integers(x.shape[0])))
    trials = 2 + int(np.log(n))
    for _ in range(n - 1):
        weights = tracker.nearest.astype(np.float64)
        total = weights.sum()
        if total > 0:
            candidates = rng.choice(x.shape[0], size=trials, p=weights / total)
        else:
            candidates = rng.integers(x.shape[0], size=1)
        tracker.add_best_of(np.unique(candidates))
    return x[tracker.chosen]


def _kmeans(data: np.ndarray, n: int, seed: int) -> np.ndarray:
    x = np.ascontiguousarray(data, dtype=np.float32)
    start = _kmeans_plus_plus(x, n, np.random.default_rng(seed))
    centers = KMeans(n_clusters=n, init=start, n_init=1, random_state=seed).fit(x).cluster_centers_
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


def _farthest(data: np.ndarray, n: int, seed: int) -> np.ndarray:
    # float64, as the textbook loop: in float32 the expansion's rounding reorders near-ties among 10^4 samples
    x = np.ascontiguousarray(data, dtype=np.float64)
    tracker = _NearestDistances(x)
    tracker.add(int(np.random.default_rng(seed).integers(x.shape[0])))
    for _ in range(n - 1):
        index = int(np.argmax(tracker.nearest))
        if not tracker.is_new(index):
            raise ValueError(
                f"x: has only {len(tracker.chosen)} distinct samples, fewer than the n={n} anchors asked for"
            )
        tracker.add(index)
    return np.asarray(tracker.chosen, dtype=np.int64)
