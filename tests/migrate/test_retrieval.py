"""The retrieval math: search by metric against brute force, ranks and the measures at known values."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latentstitch.migrate import bootstrap_mean, per_query, ranks, search
from latentstitch.migrate._retrieval import overlap, positions


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), metric=st.sampled_from(["ip", "cosine", "l2"]))
def test_search_matches_brute_force(seed, metric):
    rng = np.random.default_rng(seed)
    queries, index = rng.normal(size=(7, 5)), rng.normal(size=(40, 5)) * rng.uniform(0.5, 2, size=(40, 1))
    if metric == "ip":
        scores = queries @ index.T
    elif metric == "cosine":
        q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
        x = index / np.linalg.norm(index, axis=1, keepdims=True)
        scores = q @ x.T
    else:
        scores = -np.linalg.norm(queries[:, None] - index[None], axis=2)
    expected = np.argsort(-scores, axis=1)[:, :5]
    np.testing.assert_array_equal(search(queries, index, 5, metric), expected)


def test_measures_at_known_ranks():
    top = np.array([[4, 1, 2], [0, 9, 8], [5, 6, 7]])
    rank = ranks(top, np.array([4, 8, 3]))
    np.testing.assert_array_equal(rank, [1, 3, np.inf])
    measures = per_query(rank)
    np.testing.assert_allclose(measures["recall@1"], [1, 0, 0])
    np.testing.assert_allclose(measures["recall@10"], [1, 1, 0])
    np.testing.assert_allclose(measures["mrr@10"], [1, 1 / 3, 0])
    np.testing.assert_allclose(measures["ndcg@10"], [1, 1 / np.log2(4), 0])


def test_overlap_and_bootstrap():
    assert overlap(np.array([[1, 2, 3, 4]]), np.array([[4, 3, 9, 8]]))[0] == 0.5
    values = np.random.default_rng(0).binomial(1, 0.7, size=400).astype(float)
    interval = bootstrap_mean(values, np.random.default_rng(1))
    assert interval.low < values.mean() < interval.high
    assert interval.high - interval.low < 0.12


def test_ids_missing_from_the_index_are_named():
    with pytest.raises(ValueError, match=r"sample_ids: 2 of 3 ids are not in the index.*deleted"):
        positions(np.array([1, 2, 3]), np.array([3, 10, 11]), "sample_ids")
    np.testing.assert_array_equal(positions(np.array([5, 2, 9]), np.array(["9", "5"]), "ids"), [2, 0])
