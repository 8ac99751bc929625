"""Pre-transforms: scikit-learn contract, numpy/torch round trips, inverses."""

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import StandardScaler

from latentstitch import Centering, L2Normalization, StandardScaling
from latentstitch.relative import SPREAD_FLOOR

TRANSFORMS = [Centering(), StandardScaling(), L2Normalization(eps=None)]


@pytest.mark.parametrize("transform", TRANSFORMS, ids=lambda t: type(t).__name__)
def test_sklearn_contract(transform, rng):
    copy = clone(transform)
    assert copy.get_params() == transform.get_params()
    anchors = rng.normal(size=(8, 3))
    assert copy.fit(anchors) is copy
    with pytest.raises(NotFittedError):
        clone(transform).transform(anchors)


@pytest.mark.parametrize("transform", TRANSFORMS, ids=lambda t: type(t).__name__)
def test_type_and_dtype_round_trip(transform, rng):
    anchors = rng.normal(size=(8, 3)).astype(np.float32)
    fitted = clone(transform).fit(anchors)
    out = fitted.transform(anchors)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    as_torch = fitted.transform(torch.from_numpy(anchors).double())
    assert isinstance(as_torch, torch.Tensor) and as_torch.dtype == torch.float64
    np.testing.assert_allclose(as_torch.numpy(), out, rtol=1e-6)


@pytest.mark.parametrize("transform", [Centering(), StandardScaling()], ids=lambda t: type(t).__name__)
def test_inverse_undoes_transform(transform, rng):
    anchors, x = rng.normal(size=(10, 4)) * 3 + 1, rng.normal(size=(6, 4))
    fitted = clone(transform).fit(anchors)
    np.testing.assert_allclose(fitted.inverse_transform(fitted.transform(x)), x, atol=1e-12)


def test_standard_scaling_matches_scikit_learn_above_the_floor(rng):
    anchors = rng.normal(size=(20, 4))
    x = rng.normal(size=(7, 4))
    expected = StandardScaler().fit(anchors).transform(x)
    np.testing.assert_allclose(StandardScaling().fit(anchors).transform(x), expected, atol=1e-12)
    # spread_floor=0 is scikit-learn's rule exactly, constant features (scale 1) included
    anchors[:, 2] = 5.0
    expected = StandardScaler().fit(anchors).transform(x)
    np.testing.assert_allclose(StandardScaling(spread_floor=0.0).fit(anchors).transform(x), expected, atol=1e-12)


@pytest.mark.parametrize("spread", [0.0, 1e-30, 1e-9])
def test_near_dead_features_are_divided_by_the_relative_floor_not_blown_up(rng, spread):
    anchors = rng.normal(size=(50, 4)) * np.array([1.0, 3.0, 1.0, 0.5])
    anchors[:, 2] = 5.0 + spread * rng.normal(size=50)
    fitted = StandardScaling().fit(anchors)
    largest = anchors.std(axis=0).max()
    assert fitted.scale_[2] == pytest.approx(SPREAD_FLOOR * largest)
    scaled = fitted.transform(anchors)
    assert np.abs(scaled[:, 2]).max() < 1e-5  # without the floor a 1e-30 spread comes out at unit size
    np.testing.assert_allclose(scaled[:, [0, 1, 3]].std(axis=0), 1.0, rtol=1e-12)
    # the floor is relative to the largest spread: the same whatever the units of the data
    np.testing.assert_allclose(StandardScaling().fit(1e6 * anchors).scale_, 1e6 * fitted.scale_, rtol=1e-12)


@pytest.mark.parametrize("floor", [-0.1, 1.0, float("nan"), "0.1"])
def test_spread_floor_is_checked_at_fit(rng, floor):
    with pytest.raises((ValueError, TypeError), match="spread_floor"):
        StandardScaling(spread_floor=floor).fit(rng.normal(size=(5, 2)))


def test_centering_uses_the_anchor_mean(rng):
    anchors = rng.normal(size=(10, 3)) + 7
    np.testing.assert_allclose(Centering().fit(anchors).transform(anchors).mean(axis=0), 0, atol=1e-12)


def test_l2_normalization_gives_unit_rows_and_rejects_zero_rows(rng):
    x = rng.normal(size=(5, 3))
    np.testing.assert_allclose(np.linalg.norm(L2Normalization().fit(x).transform(x), axis=1), 1.0)
    x[3] = 0
    with pytest.raises(ValueError, match="x: row 3 has zero norm"):
        L2Normalization().fit(x[:2]).transform(x)


def test_width_mismatch_is_reported(rng):
    fitted = Centering().fit(rng.normal(size=(5, 3)))
    with pytest.raises(ValueError, match="x: has 4 features but Centering was fitted on 3"):
        fitted.transform(rng.normal(size=(2, 4)))
