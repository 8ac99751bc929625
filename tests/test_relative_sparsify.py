"""top_k= and power= of relative_projection: ASIF's sparsified, sharpened relative vectors."""

import numpy as np
import pytest
import torch
from rounding import assert_close_to_rounding

from latentstitch import relative_projection
from latentstitch.relative import RelativeProjection, sparsify_similarities


def test_keeps_the_top_k_values_and_raises_them_to_the_power(rng):
    x, anchors = rng.normal(size=(30, 8)), rng.normal(size=(20, 8))
    plain = relative_projection(x, anchors)
    out = relative_projection(x, anchors, top_k=5, power=3.0)
    for row, full in zip(out, plain, strict=True):
        kept = np.argsort(full)[-5:]
        np.testing.assert_allclose(row[kept], full[kept] ** 3)
        assert np.count_nonzero(row) == 5
    np.testing.assert_allclose(relative_projection(x, anchors, top_k=20), plain)  # k = all anchors: unchanged


def test_power_keeps_the_sign(rng):
    r = torch.tensor([[-0.5, 0.25, 0.0]])
    torch.testing.assert_close(sparsify_similarities(r, power=0.5), torch.tensor([[-(0.5**0.5), 0.5, 0.0]]))


def test_sharpening_keeps_each_row_s_order(rng):
    x, anchors = rng.normal(size=(10, 4)), rng.normal(size=(9, 4))
    plain = relative_projection(x, anchors, "angular")  # in [0, 1]
    sharp = relative_projection(x, anchors, "angular", power=8.0)
    np.testing.assert_array_equal(np.argsort(plain, axis=1), np.argsort(sharp, axis=1))


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
@pytest.mark.kernels
def test_chunks_equal_one_pass(similarity, rng):
    x, anchors = rng.normal(size=(53, 6)), rng.normal(size=(11, 6))
    one = relative_projection(x, anchors, similarity, top_k=3, power=2.0, chunk_size=100)
    chunked = relative_projection(x, anchors, similarity, top_k=3, power=2.0, chunk_size=7)
    # each chunk is the one-pass projection of its rows, byte for byte (the same rows through the same kernel) ...
    parts = [
        relative_projection(x[start : start + 7], anchors, similarity, top_k=3, power=2.0) for start in range(0, 53, 7)
    ]
    np.testing.assert_array_equal(chunked, np.concatenate(parts))
    # ... and equals the product of all 53 rows at once up to the order of its sums of 6 terms (another kernel)
    assert_close_to_rounding(chunked, one, terms=x.shape[1])
    np.testing.assert_array_equal(chunked == 0, one == 0)  # the same top 3 kept (no near tie at the 3rd)


def test_gradient_flows_to_the_kept_similarities(device):
    x = torch.randn(4, 5, dtype=torch.float64, device=device, requires_grad=True)
    anchors = torch.randn(7, 5, dtype=torch.float64, device=device)
    assert torch.autograd.gradcheck(lambda v: relative_projection(v, anchors, top_k=3, power=2.0), (x,))


def test_module_option(rng):
    anchors = torch.randn(9, 4)
    x = torch.randn(5, 4)
    layer = RelativeProjection(anchors=anchors, output_norm="l2", top_k=4, power=2.0)
    r = relative_projection(x, anchors, top_k=4, power=2.0)
    torch.testing.assert_close(layer(x), r / r.norm(dim=1, keepdim=True))  # ASIF: sparsify, sharpen, normalise


def test_errors(rng):
    x = rng.normal(size=(5, 3))
    with pytest.raises(ValueError, match=r"top_k: expected at most the number of anchors \(5\), got 6"):
        relative_projection(x, x, top_k=6)
    with pytest.raises(ValueError, match="top_k: expected an integer >= 1"):
        relative_projection(x, x, top_k=0)
    with pytest.raises(ValueError, match="power: expected a finite number > 0"):
        relative_projection(x, x, power=0.0)
    with pytest.raises(ValueError, match="power: needs a similarity.*'euclidean' is a distance"):
        relative_projection(x, x, "euclidean", power=2.0)
