"""select_anchors: determinism, the official stratified recipe, and each strategy's defining property."""

import numpy as np
import pytest
import torch
from sklearn.utils import shuffle

from latentstitch import select_anchors
from latentstitch.relative import STRATEGIES


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_deterministic_for_a_seed_and_distinct(strategy, rng):
    x = rng.normal(size=(200, 5))
    labels = rng.integers(0, 4, size=200)
    kwargs = {"labels": labels} if strategy == "stratified" else {}
    first = select_anchors(x, 12, strategy, seed=3, **kwargs)
    again = select_anchors(torch.from_numpy(x), 12, strategy, seed=3, **kwargs)
    other = select_anchors(x, 12, strategy, seed=4, **kwargs)
    np.testing.assert_array_equal(first, again)
    assert first.dtype == np.int64 and len(set(first.tolist())) == 12
    assert not np.array_equal(first, other)


def test_stratified_follows_the_official_relreps_recipe():
    # relreps: shuffle (index, target) with sklearn's shuffle(random_state=seed), then one anchor per class in
    # sorted class order, round-robin.
    labels = np.array([2, 0, 1, 0, 2, 2, 1, 0, 0, 2, 1, 1])
    indices, targets = shuffle(np.arange(12), labels, random_state=0)
    per_class = {c: indices[targets == c] for c in (0, 1, 2)}
    expected = [per_class[c][i] for i in range(2) for c in (0, 1, 2)]
    np.testing.assert_array_equal(select_anchors(np.zeros((12, 2)), 6, "stratified", labels=labels), expected)


def test_stratified_balances_classes_and_skips_exhausted_ones():
    labels = np.array([0] * 20 + [1] * 20 + [2] * 2)
    chosen = select_anchors(np.zeros((42, 1)), 10, "stratified", labels=labels)
    counts = np.bincount(labels[chosen], minlength=3)
    assert counts.tolist() == [4, 4, 2]


def test_kmeans_picks_the_real_sample_nearest_each_cluster(rng):
    centers = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    x = np.concatenate([c + rng.normal(scale=0.1, size=(30, 2)) for c in centers])
    chosen = select_anchors(x, 3, "kmeans")
    assert sorted(int(i) // 30 for i in chosen) == [0, 1, 2]  # one anchor in each blob


def test_farthest_point_reaches_the_outliers(rng):
    x = np.concatenate([rng.normal(size=(100, 2)), [[50.0, 50.0], [-60.0, 40.0]]])
    chosen = select_anchors(x, 3, "farthest", seed=0)
    assert {100, 101} <= set(chosen.tolist())


def test_farthest_point_refuses_more_anchors_than_distinct_samples():
    x = np.repeat(np.eye(3), 4, axis=0)  # 12 rows, 3 distinct
    with pytest.raises(ValueError, match="only 3 distinct samples"):
        select_anchors(x, 4, "farthest")


def test_errors_name_the_argument(rng):
    x = rng.normal(size=(10, 2))
    with pytest.raises(ValueError, match="n: asked for 11 anchors but x has only 10 samples"):
        select_anchors(x, 11)
    with pytest.raises(ValueError, match="n: expected an integer >= 1"):
        select_anchors(x, 0)
    with pytest.raises(ValueError, match="labels: strategy='stratified' needs"):
        select_anchors(x, 3, "stratified")
    with pytest.raises(ValueError, match=r"labels: expected shape \(10,\)"):
        select_anchors(x, 3, "stratified", labels=np.zeros(9))
    with pytest.raises(ValueError, match="labels: only used by strategy='stratified'"):
        select_anchors(x, 3, "random", labels=np.zeros(10))
    with pytest.raises(ValueError, match="strategy: expected one of"):
        select_anchors(x, 3, "best")


def test_random_and_stratified_need_only_the_number_of_samples(rng):
    data = rng.normal(size=(50, 3))
    np.testing.assert_array_equal(select_anchors(50, 7, seed=2), select_anchors(data, 7, seed=2))
    labels = rng.integers(0, 3, size=50)
    np.testing.assert_array_equal(
        select_anchors(50, 9, "stratified", labels=labels), select_anchors(data, 9, "stratified", labels=labels)
    )
    with pytest.raises(TypeError, match="x: strategy='kmeans' needs the"):
        select_anchors(50, 3, "kmeans")
    with pytest.raises(ValueError, match="n: asked for 60 anchors but x has only 50"):
        select_anchors(50, 60)
    with pytest.raises(ValueError, match="x: expected an integer >= 1"):
        select_anchors(0, 1)


def _farthest_reference(x: np.ndarray, n: int, seed: int) -> list[int]:
    """The textbook loop (and the library's earlier implementation): exact float64 distances to every new point."""
    first = int(np.random.default_rng(seed).integers(len(x)))
    chosen, nearest = [first], np.linalg.norm(x - x[first], axis=1)
    for _ in range(n - 1):
        chosen.append(int(np.argmax(nearest)))
        nearest = np.minimum(nearest, np.linalg.norm(x - x[chosen[-1]], axis=1))
    return chosen


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_farthest_point_equals_the_exact_textbook_loop(rng, dtype):
    x = (rng.normal(size=(400, 16)) * rng.uniform(0.1, 3, size=16)).astype(dtype)
    expected = _farthest_reference(x.astype(np.float64), 40, seed=5)
    # exact indices from another precision and kernel: at every step the farthest point leads the runner-up by at
    # least 2e-4 of its distance (measured), far above float32 rounding (~1e-6 for 16 features)
    np.testing.assert_array_equal(select_anchors(x, 40, "farthest", seed=5), expected)


def test_kmeans_centres_are_as_good_as_scikit_learns_default(rng):
    from sklearn.cluster import KMeans

    centers = rng.normal(scale=5, size=(12, 8))
    x = np.concatenate([c + rng.normal(size=(40, 8)) for c in centers])
    ours = select_anchors(x, 12, "kmeans", seed=0)
    assert len({int(i) // 40 for i in ours}) == 12  # one anchor in every blob

    def inertia(points):
        return float(((x[:, None, :] - points[None]) ** 2).sum(-1).min(1).sum())

    reference = KMeans(12, n_init=1, random_state=0).fit(x).cluster_centers_
    assert inertia(x[ours]) <= 1.5 * inertia(reference)


@pytest.mark.parametrize(
    "labels",
    [np.r_[np.zeros(15), np.full(15, np.nan)], np.full(30, np.nan), np.array([0, None] * 15, dtype=object)],
    ids=["half_nan", "all_nan", "none"],
)
def test_stratified_anchors_refuse_missing_labels_by_name(labels):
    x = np.random.default_rng(0).normal(size=(30, 4))
    with pytest.raises(ValueError, match=r"^labels: \d+ label\(s\) are missing"):
        select_anchors(x, 6, "stratified", labels=labels)
