"""The "whitened" similarity: the Mahalanobis inner product of the anchors' statistics, and what it is not
invariant to. (Its claimed affine invariances run with every other claim in test_relative_invariance.py.)"""

import numpy as np
import pytest
import torch

from latentstitch import relative_projection
from latentstitch.invariance import AXIS_SCALE, INVERTIBLE_LINEAR, random_transform


def test_equals_the_inner_product_of_whitened_vectors(rng):
    anchors = rng.normal(size=(40, 5)) @ rng.normal(size=(5, 5)) + 3.0
    x = rng.normal(size=(12, 5))
    mean, covariance = anchors.mean(0), np.cov(anchors, rowvar=False, bias=True)
    root = np.linalg.cholesky(np.linalg.inv(covariance))  # any W with W W^T = Sigma^-1 gives the same product
    zx, za = (x - mean) @ root, (anchors - mean) @ root
    np.testing.assert_allclose(relative_projection(x, anchors, "whitened"), zx @ za.T, atol=1e-9)
    cosine = relative_projection(x, anchors, "whitened", cosine=True)
    expected = (zx / np.linalg.norm(zx, axis=1, keepdims=True)) @ (za / np.linalg.norm(za, axis=1, keepdims=True)).T
    np.testing.assert_allclose(cosine, expected, atol=1e-9)


def test_cosine_of_a_sample_at_the_anchors_mean_is_zero(rng):
    half = np.array([[1.0, 0, 0], [0, 2, 0], [0, 0, 3], [1, 1, 1]])
    anchors = np.concatenate([half, -half])  # mean exactly 0
    out = relative_projection(np.zeros((1, 3)), anchors, "whitened", cosine=True)
    np.testing.assert_allclose(out, 0.0, atol=1e-12)


def test_whitened_anchors_have_identity_covariance(rng):
    anchors = rng.normal(size=(200, 4)) * [1.0, 10.0, 0.1, 3.0]
    gram = relative_projection(anchors, anchors, "whitened")  # Z Z^T with Z whitened: Z^T Z / m = I
    assert np.isclose(np.trace(gram) / len(anchors), 4.0)


def test_invariant_to_a_shear_where_cosine_is_not(rng):
    x, anchors = rng.normal(size=(20, 6)), rng.normal(size=(30, 6))
    t = random_transform(INVERTIBLE_LINEAR, 6, seed=4)
    np.testing.assert_allclose(
        relative_projection(t(x), t(anchors), "whitened"), relative_projection(x, anchors, "whitened"), atol=1e-8
    )
    assert not np.allclose(relative_projection(t(x), t(anchors)), relative_projection(x, anchors), atol=1e-3)


@pytest.mark.parametrize("warp", [np.tanh, lambda v: v + 0.3 * v**3])
def test_not_invariant_to_nonlinear_maps(warp, rng):
    x, anchors = rng.normal(size=(20, 4)), rng.normal(size=(30, 4))
    before = relative_projection(x, anchors, "whitened")
    assert not np.allclose(relative_projection(warp(x), warp(anchors), "whitened"), before, atol=1e-3)


def test_shrinkage_trades_exact_invariance_for_stability(rng):
    x, anchors = rng.normal(size=(20, 5)), rng.normal(size=(30, 5))
    t = random_transform(AXIS_SCALE, 5, seed=2)
    before = relative_projection(x, anchors, "whitened", shrinkage=0.5)
    assert not np.allclose(relative_projection(t(x), t(anchors), "whitened", shrinkage=0.5), before, atol=1e-3)


def test_too_few_anchors_warn_and_use_their_span(rng):
    anchors = rng.normal(size=(4, 6))  # 4 anchors span at most a 3-d affine subspace of R^6
    with pytest.warns(UserWarning, match=r"covariance has rank 3 < 6 features"):
        out = relative_projection(rng.normal(size=(5, 6)), anchors, "whitened")
    assert np.isfinite(out).all()
    with pytest.raises(ValueError, match="all anchors are the same point"):
        relative_projection(rng.normal(size=(5, 6)), np.ones((3, 6)), "whitened")
    with pytest.raises(ValueError, match=r"shrinkage: expected a number in \[0, 1\]"):
        relative_projection(anchors, anchors, "whitened", shrinkage=2.0)


def test_gradient(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, dtype=torch.float64, generator=g).to(device).requires_grad_()
    anchors = torch.randn(10, 3, dtype=torch.float64, generator=g).to(device)
    assert torch.autograd.gradcheck(lambda v: relative_projection(v, anchors, "whitened", cosine=True), (x,))
