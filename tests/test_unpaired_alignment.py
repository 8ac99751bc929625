"""UnpairedAlignment's pieces and its exactness: an orthogonal image of a clustered cloud is recovered to numerical
precision once the clusters are matched (issue 26), and every batched step equals its plain definition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

from latentstitch._core import knn
from latentstitch._core.kmeans import kmeans
from latentstitch.alignment import UnpairedAlignment
from latentstitch.alignment._common import orthogonal_factor, orthogonal_on_rows
from latentstitch.alignment._matching import match_by_structure, qap_objective, swap_gains


@pytest.fixture(autouse=True)
def single_threaded(one_thread):
    with threadpool_limits(limits=1):
        yield


def rotated_clusters(seed: int, n: int = 1800, d: int = 16, k: int = 12):
    """``y[partner[i]] = x[i] @ q``: k anisotropic Gaussian clusters, an exact rotation and a row permutation."""
    rng = np.random.default_rng(seed)
    centres, spreads = rng.standard_normal((k, d)) * 2, rng.uniform(0.2, 1.0, size=(k, d))
    labels = rng.integers(k, size=n)
    x = centres[labels] + spreads[labels] * rng.standard_normal((n, d))
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    permutation = rng.permutation(n)
    return x, (x @ q)[permutation], np.argsort(permutation), q


@pytest.mark.parametrize("seed", (0, 1, 2))
def test_an_exact_rotation_of_a_clustered_cloud_is_recovered_to_numerical_precision(seed):
    """Before issue 26 this case found 75% of partners; every one of 16 seeds is exact now (measured)."""
    x, y, partner, q = rotated_clusters(seed)
    model = UnpairedAlignment(random_state=seed).fit(x, y)
    mapped = model.transform(x)
    squared = (mapped**2).sum(1)[:, None] - 2 * mapped @ y.T + (y**2).sum(1)[None]
    assert np.mean(squared.argmin(axis=1) == partner) >= 0.99
    np.testing.assert_allclose(model.rotation_, q, atol=1e-8)
    assert model.n_mutual_ == len(x) and model.score_ > 0.99


def test_unrelated_clouds_score_low():
    x, y, _, _ = rotated_clusters(0)
    unrelated = np.random.default_rng(1).permuted(y, axis=0)  # every feature shuffled on its own
    assert UnpairedAlignment(random_state=0).fit(x, unrelated).score_ < 0.9


def test_swap_gains_equal_the_objective_change_of_every_swap():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 7, 7))
    gram_x, gram_y = a @ a.T, b @ b.T
    perms = np.stack([rng.permutation(7) for _ in range(3)])
    gains = swap_gains(gram_x, gram_y[perms[:, :, None], perms[:, None, :]])
    base = qap_objective(gram_x, gram_y, perms)
    for r, i, j in itertools.product(range(3), range(7), range(7)):
        swapped = perms[r].copy()
        swapped[[i, j]] = swapped[[j, i]]
        expected = qap_objective(gram_x, gram_y, swapped[None])[0] - base[r]
        assert gains[r, i, j] == pytest.approx(expected, abs=1e-9)


def test_centroids_are_matched_through_a_hidden_permutation_and_rotation():
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((15, 6))
    q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    hidden = rng.permutation(15)
    other = (centres @ q)[hidden]  # other[hidden^-1[a]] is centres[a]'s image
    gram = lambda c: (c - c.mean(0)) @ (c - c.mean(0)).T  # noqa: E731
    order = match_by_structure(gram(centres), gram(other), restarts=5, rng=rng)
    np.testing.assert_array_equal(hidden[order], np.arange(15))


def test_mutual_nearest_matches_its_definition_across_chunks(monkeypatch):
    monkeypatch.setattr(knn, "CHUNK_ELEMENTS", 40)  # blocks of a few rows
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(30, 5, generator=g), torch.randn(25, 5, generator=g)
    i, j = knn.mutual_nearest(a, b)
    scores = a @ b.T
    forward, backward = scores.argmax(dim=1), scores.argmax(dim=0)
    expected = [(r, int(forward[r])) for r in range(30) if int(backward[forward[r]]) == r]
    assert list(zip(i.tolist(), j.tolist(), strict=True)) == expected and expected


def test_batched_kmeans_equals_separate_runs_and_finds_separated_blobs():
    rng = np.random.default_rng(0)
    blobs = torch.as_tensor(np.repeat(np.eye(4) * 10, 50, axis=0) + rng.standard_normal((200, 4)) * 0.1)
    starts = torch.stack([blobs[torch.as_tensor(rng.choice(200, 4, replace=False))] for _ in range(3)])
    together = kmeans(blobs, 4, rng, init=starts)
    for start, result in zip(starts, together, strict=True):
        torch.testing.assert_close(kmeans(blobs, 4, rng, init=start), result)
    best = kmeans(blobs, 4, rng, n_init=3)
    torch.testing.assert_close(best[best.argmax(dim=1).argsort()].round(), torch.eye(4, dtype=best.dtype) * 10)


def test_the_thin_orthogonal_factor_agrees_on_the_rows_span():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(5, 12, dtype=torch.float64, generator=g), torch.randn(5, 9, dtype=torch.float64, generator=g)
    thin = orthogonal_on_rows(a, b)
    full = orthogonal_factor(a.T @ b)
    torch.testing.assert_close(a @ thin, a @ full)
    torch.testing.assert_close(thin.T @ thin @ thin.T, thin.T)  # a partial isometry


def test_a_bridge_on_rows_with_no_pairs_offers_the_unpaired_route():
    import warnings

    from latentstitch.bridge import Bridge, BridgeWarning

    x, y, _, _ = rotated_clusters(0, n=300)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", BridgeWarning)
        bridge = Bridge(routes=["procrustes"], cv=3).fit(x, y)  # y's rows are a permutation: no pair holds
    assert not bridge.reliable_ and any("--routes unpaired" in str(w.message) for w in said)
    offered = Bridge(routes=["unpaired"], cv=3).fit(x, y)  # the route ignores the (wrong) pairing
    assert offered.estimator_.score_ > 0.99
