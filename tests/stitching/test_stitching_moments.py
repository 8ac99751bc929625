"""The CrossMoments options the stitchers rely on: a subset of products, input-precision products, squares alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from latentstitch._core.moments import CrossMoments

pytestmark = pytest.mark.kernels  # merged chunks against one pass


def paired(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 7)) * 3 + 100, rng.standard_normal((n, 5)) - 50


def test_skipped_products_are_not_kept_and_asking_for_them_is_an_error():
    a, b = paired()
    moments = CrossMoments(products=("ab", "aa_diag")).update(a, b)
    assert moments.aa is None and moments.bb is None and moments.bb_diag is None
    centred_a, centred_b = a - a.mean(0), b - b.mean(0)
    np.testing.assert_allclose(moments.centered_ab().numpy(), centred_a.T @ centred_b, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(moments.centered_aa_diag().numpy(), (centred_a**2).sum(0), rtol=1e-10)
    np.testing.assert_allclose(moments.raw_aa_diag().numpy(), (a**2).sum(0), rtol=1e-12)
    with pytest.raises(
        ValueError, match=r"aa: not accumulated \(this accumulator keeps products \('ab', 'aa_diag'\)\)"
    ):
        moments.centered_aa()
    with pytest.raises(ValueError, match="bb_diag: not accumulated"):
        moments.centered_bb_diag()
    with pytest.raises(ValueError, match="products: expected one of"):
        CrossMoments(products=("ba",))


def test_diagonals_come_from_the_full_products_when_kept():
    a, b = paired()
    full = CrossMoments().update(a, b)
    squares = CrossMoments(products=("aa_diag", "bb_diag")).update(a, b)
    np.testing.assert_allclose(full.centered_bb_diag().numpy(), squares.centered_bb_diag().numpy(), rtol=1e-10)
    np.testing.assert_allclose(full.centered_aa_diag().numpy(), torch.diagonal(full.centered_aa()).numpy())


def test_input_precision_takes_float32_products_and_accumulates_in_float64():
    a, b = paired(4000)
    exact = CrossMoments().update(a, b)
    fast = CrossMoments(products=("ab",), precision="input")
    for chunk in np.array_split(np.arange(4000), 8):
        fast.update(a[chunk].astype(np.float32), b[chunk].astype(np.float32))
    assert fast.ab.dtype == torch.float64
    reference = exact.centered_ab().numpy()
    error = np.abs(fast.centered_ab().numpy() - reference).max() / np.abs(reference).max()
    assert 1e-9 < error < 1e-5  # float32 products (not float64-exact), but about the shift: far better than raw


def test_merge_and_state_dict_keep_the_chosen_statistics():
    a, b = paired(300)
    products = ("aa", "ab", "bb_diag")
    left = CrossMoments(products=products).update(a[:100], b[:100])
    right = CrossMoments(products=products).update(a[100:], b[100:])
    merged = left.merge(right)
    whole = CrossMoments(products=products).update(a, b)
    for accessor in ("centered_aa", "centered_ab", "centered_bb_diag", "raw_ab"):
        np.testing.assert_allclose(getattr(merged, accessor)().numpy(), getattr(whole, accessor)().numpy(), rtol=1e-9)
    restored = CrossMoments.from_state_dict(merged.state_dict())
    assert restored.products == products
    np.testing.assert_array_equal(restored.centered_bb_diag().numpy(), merged.centered_bb_diag().numpy())
    with pytest.raises(ValueError, match="other: holds products"):
        merged.merge(CrossMoments().update(a, b))
