"""Learned prototype anchors (k-means initialised, convex combinations of samples) and anchor_study."""

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans

from latentstitch import relative_projection
from latentstitch.invariance import INVERTIBLE_LINEAR, ORTHOGONAL, random_transform
from latentstitch.relative import LearnedAnchors, fit_prototypes
from latentstitch.training import STUDY_STRATEGIES, anchor_study


def test_starts_at_the_kmeans_centroids(rng):
    pool = rng.normal(size=(120, 3))
    anchors = LearnedAnchors.from_kmeans(pool, 5, seed=2)
    centers = KMeans(n_clusters=5, n_init=1, random_state=2).fit(pool).cluster_centers_
    np.testing.assert_allclose(anchors(torch.from_numpy(pool)).detach().numpy(), centers, atol=1e-10)
    weights = anchors.weights.detach()
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(5, dtype=weights.dtype))
    assert int((weights > 0).sum()) == 120  # every sample weighs in exactly one prototype, its cluster's
    free = LearnedAnchors.from_kmeans(pool, 5, mode="free", seed=2)
    np.testing.assert_allclose(free().detach().numpy(), centers, atol=1e-10)


@pytest.mark.parametrize(("similarity", "kind"), [("cosine", ORTHOGONAL), ("whitened", INVERTIBLE_LINEAR)])
def test_convex_prototypes_carry_the_similarity_s_affine_invariances_to_another_space(similarity, kind, rng):
    pool = rng.normal(size=(80, 4))
    x = rng.normal(size=(10, 4))
    anchors = LearnedAnchors.from_kmeans(pool, 6)
    with torch.no_grad():
        anchors.logits.normal_()  # any learned weights, not only the initial ones
    t = random_transform(kind, 4, seed=5)
    moved = t(pool)
    before = relative_projection(x, anchors(torch.from_numpy(pool)).detach().numpy(), similarity)
    after = relative_projection(t(x), anchors(torch.from_numpy(moved)).detach().numpy(), similarity)
    np.testing.assert_allclose(after, before, atol=1e-8)


def test_prototypes_lose_the_per_sample_scale_invariance_of_sample_anchors(rng):
    pool = rng.normal(size=(60, 5))
    x = pool[:10]
    scale = np.exp(rng.uniform(-1, 1, size=(60, 1)))  # every sample rescaled by its own factor
    sample = relative_projection(x, pool[20:26])
    np.testing.assert_allclose(relative_projection(x * scale[:10], (pool * scale)[20:26]), sample, atol=1e-10)
    anchors = LearnedAnchors.from_kmeans(pool, 6)
    with torch.no_grad():
        before = relative_projection(x, anchors(torch.from_numpy(pool)).numpy())
        after = relative_projection(x * scale[:10], anchors(torch.from_numpy(pool * scale)).numpy())
    assert not np.allclose(after, before, atol=1e-3)


def test_free_anchors_do_not_move_with_the_space(rng):
    pool = rng.normal(size=(50, 3))
    anchors = LearnedAnchors.from_kmeans(pool, 4, mode="free")
    t = random_transform(ORTHOGONAL, 3, seed=1)
    with torch.no_grad():
        before = relative_projection(pool, anchors().numpy())
        after = relative_projection(t(pool), anchors().numpy())
    assert not np.allclose(after, before, atol=1e-3)
    with pytest.raises(ValueError, match="weights: free anchors are points"):
        anchors.weights  # noqa: B018


def test_fit_prototypes_trains_anchors_and_classifier_together(one_thread):
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (150,), generator=g)
    x = torch.randn(3, 6, generator=g)[y] * 2 + torch.randn(150, 6, generator=g)
    anchors, head = fit_prototypes(x, y, 6, epochs=60, seed=0)
    start = LearnedAnchors.from_kmeans(x, 6, seed=0)
    assert not torch.allclose(anchors.logits, start.logits)  # the weights moved
    with torch.no_grad():
        r = relative_projection(x, anchors(x))
        z = (r - r.mean(1, keepdim=True)) / r.std(1, unbiased=False, keepdim=True)
        assert float((head(z).argmax(1) == y).double().mean()) > 0.9


def test_anchor_study_on_a_rotated_rescaled_copy_stitches_exactly(tmp_path, rng, one_thread):
    y = rng.integers(0, 3, 160)
    a = rng.normal(size=(3, 8))[y] * 2 + rng.normal(size=(160, 8))
    t = random_transform(ORTHOGONAL, 8, seed=1)
    b = 3.0 * t(a)  # cosine is invariant to this, whatever the anchors, so stitched = non-stitched
    ood = rng.normal(size=(30, 8))
    study = anchor_study(
        a, b, y, n_anchors=(4, 8), out_of_domain=(ood, 3.0 * t(ood)), seeds=(0,), epochs=40, plot=tmp_path / "s.png"
    )
    assert {r["strategy"] for r in study.records} == set(STUDY_STRATEGIES)
    for record in study.records:
        assert record["a_to_b"] == pytest.approx(record["a_to_a"], abs=1e-12), record
        assert record["b_to_a"] == pytest.approx(record["b_to_b"], abs=1e-12), record
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"
    assert "| learned | 8 |" in study.to_markdown()


def test_anchor_study_errors(rng):
    a, y = rng.normal(size=(40, 3)), rng.integers(0, 2, 40)
    with pytest.raises(ValueError, match="out_of_domain: the 'out_of_domain' strategy needs"):
        anchor_study(a, a, y, strategies=["out_of_domain"])
    with pytest.raises(ValueError, match="n_anchors: 100 anchors exceed the 30 training samples"):
        anchor_study(a, a, y, n_anchors=(100,), strategies=["random"])
    with pytest.raises(ValueError, match="strategies: expected one of"):
        anchor_study(a, a, y, strategies=["best"])
    with pytest.raises(ValueError, match=r"labels: expected shape \(40,\)"):
        anchor_study(a, a, y[:5])
    with pytest.raises(ValueError, match=r"space_a and space_b must have the same number of samples \(rows\)"):
        anchor_study(a, a[:20], y)
