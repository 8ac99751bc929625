"""``select_anchors`` k-means and farthest-point on 10,000 x 1,280 float32 vectors (300 anchors), against the
implementations they replace, measured in the same run.

Baselines: farthest-point sampling as the textbook loop (exact float64 distances from every sample to each new point,
the library's earlier code: a full (N, d) temporary per step) and k-means as scikit-learn's ``KMeans(n_init=1)`` with
its default greedy k-means++ seeding (the library's earlier code). Ours: one matrix-vector product per step for both
farthest-point and the k-means++ seeding, then scikit-learn's Lloyd iterations. The farthest-point indices are checked
to be identical to the baseline's; for k-means the inertia of the chosen anchors is shown beside the baseline's.
``--quick``: 2,000 x 256, 50 anchors.
"""

from __future__ import annotations

import numpy as np

SIZES = {"full": (10_000, 1280, 300), "quick": (2_000, 256, 50)}


def setup(n: int, d: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((40, d)).astype(np.float32) * 2
    return (centers[rng.integers(0, 40, n)] + rng.standard_normal((n, d)).astype(np.float32)).astype(np.float32)


def farthest_textbook(x: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    x64 = x.astype(np.float64)
    first = int(np.random.default_rng(seed).integers(len(x)))
    chosen, nearest = [first], np.linalg.norm(x64 - x64[first], axis=1)
    for _ in range(n - 1):
        chosen.append(int(np.argmax(nearest)))
        nearest = np.minimum(nearest, np.linalg.norm(x64 - x64[chosen[-1]], axis=1))
    return np.asarray(chosen)


def kmeans_default(x: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    from sklearn.cluster import KMeans
    from sklearn.metrics import pairwise_distances_argmin

    centers = KMeans(n_clusters=n, n_init=1, random_state=seed).fit(x).cluster_centers_
    return pairwise_distances_argmin(centers, x)


def inertia(x: np.ndarray, chosen: np.ndarray) -> float:
    anchors = x[chosen].astype(np.float64)
    squares = (x.astype(np.float64) ** 2).sum(1)[:, None] - 2 * x @ anchors.T + (anchors**2).sum(1)[None]
    return float(np.maximum(squares, 0).min(axis=1).sum())


def run(args) -> None:
    from benchmarks._harness import median_time, print_table, set_threads
    from latentstitch import select_anchors

    print(set_threads(args.threads))
    n, d, anchors = SIZES["quick" if args.quick else "full"]
    x = setup(n, d)
    outputs = {}

    def timed(name, fn):
        outputs[name] = fn()
        return median_time(fn, max(1, args.repeats - 1), warmup=0)

    rows = []
    base = timed("farthest_textbook", lambda: farthest_textbook(x, anchors))
    ours = timed("farthest", lambda: select_anchors(x, anchors, "farthest"))
    same = np.array_equal(outputs["farthest"], outputs["farthest_textbook"])
    rows += [
        ["farthest: textbook loop (baseline)", base, 1.0, ""],
        ["farthest: select_anchors", ours, ours / base, f"same indices: {same}"],
    ]
    base = timed("kmeans_default", lambda: kmeans_default(x, anchors))
    ours = timed("kmeans", lambda: select_anchors(x, anchors, "kmeans"))
    rows += [
        [
            "kmeans: sklearn KMeans default (baseline)",
            base,
            1.0,
            f"inertia {inertia(x, outputs['kmeans_default']):.4g}",
        ],
        ["kmeans: select_anchors", ours, ours / base, f"inertia {inertia(x, outputs['kmeans']):.4g}"],
    ]
    print_table(
        f"select_anchors, {n:,} x {d} float32, {anchors} anchors, {args.threads} thread(s)",
        ["method", "seconds", "time / baseline", "check"],
        rows,
    )
