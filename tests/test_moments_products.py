"""CrossMoments options used by the similarity indices: input-precision products, blocks, gradient tracking."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import latentstitch._core.moments as moments_module
from latentstitch._core.moments import CrossMoments


def data(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 6)) * 3 + 50, rng.standard_normal((n, 4)) - 20


def test_input_precision_products_are_close_to_float64():
    a, b = data()
    exact = CrossMoments().update(a, b)
    fast = CrossMoments(precision="input").update(a.astype(np.float32), b.astype(np.float32))
    assert fast.product_dtype(torch.float32) == torch.float32
    for method in ("centered_aa", "centered_ab", "centered_bb"):
        torch.testing.assert_close(getattr(fast, method)(), getattr(exact, method)(), rtol=1e-5, atol=1e-3)
    # float64 data keeps float64 products in either mode
    torch.testing.assert_close(CrossMoments(precision="input").update(a, b).centered_ab(), exact.centered_ab())


def test_blocks_do_not_change_the_moments(monkeypatch):
    a, b = data()
    whole = CrossMoments().update(a, b)
    monkeypatch.setattr(moments_module, "_BLOCK_ELEMENTS", 64)  # blocks of 64 rows
    blocked = CrossMoments().update(a, b)
    torch.testing.assert_close(blocked.centered_ab(), whole.centered_ab(), rtol=1e-12, atol=1e-9)
    torch.testing.assert_close(blocked.mean_a, whole.mean_a)


def test_track_grad_gives_gradients_of_centred_moments():
    a, b = (torch.from_numpy(v[:30]).requires_grad_() for v in data())
    moments = CrossMoments(track_grad=True).update(a, b)
    moments.centered_ab().sum().backward()
    expected_a = (b - b.mean(0)).sum(1, keepdim=True).expand_as(a)
    torch.testing.assert_close(a.grad, expected_a.detach())
    assert CrossMoments().update(a, b).centered_ab().requires_grad is False


def test_unknown_options_are_named():
    with pytest.raises(ValueError, match="precision: expected one of"):
        CrossMoments(precision="half")
    with pytest.raises(TypeError, match="products: expected a tuple of names"):
        CrossMoments(products="input")
