"""Scale-free ridge and the cross-validated ridge path: the path from one eigendecomposition per fold equals fitting
every ridge on every fold, and relative ridges mean the same at any scale and any number of samples."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from latentstitch._core.folds import kfold, training_rows
from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch.stitching import LatentTranslator, LeastSquares, LeastSquaresCV, ridge_path


def _pair(rng, n=60, p=8, q=5, noise=0.3):
    a = rng.normal(size=(n, p)) * rng.uniform(0.2, 5, size=p) + rng.normal(size=p)
    b = a @ rng.normal(size=(p, q)) + noise * rng.normal(size=(n, q)) + 2.0
    return a, b


@pytest.mark.parametrize("standardize", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("units", ["gram", "relative"])
@pytest.mark.parametrize("n", [60, 12])  # 12 rows: training parts of 9 or 10 rows for 8 features plus intercept
def test_path_equals_fitting_every_ridge_on_every_fold(rng, standardize, bias, units, n):
    a, b = _pair(rng, n=n)
    ridges = [0.0, 1e-3, 0.1, 3.0] if units == "relative" else [0.0, 0.5, 20.0, 400.0]
    path = ridge_path(a, b, ridges, folds=3, seed=4, bias=bias, standardize=standardize, ridge_units=units)
    parts = kfold(n, 3, 4)
    for k, held_out in enumerate(parts):
        train = training_rows(parts, k)
        for j, ridge in enumerate(ridges):
            stitcher = LeastSquares(bias=bias, ridge=ridge, ridge_units=units)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RankDeficiencyWarning)
                fitted = (LatentTranslator(stitcher) if standardize else stitcher).fit(a[train], b[train])
            expected = fitted.score(a[held_out], b[held_out])
            assert path.scores[k, j] == pytest.approx(expected, abs=1e-8), (k, ridge)
    assert path.best in ridges and path.mean.shape == (4,) and path.std.shape == (4,)


def test_relative_ridge_is_scale_free_and_independent_of_the_number_of_samples(rng):
    a, b = _pair(rng, n=40)
    x = rng.normal(size=(10, 8))
    base = LeastSquares(ridge=0.3, ridge_units="relative").fit(a, b).transform(x)
    rescaled = LeastSquares(ridge=0.3, ridge_units="relative").fit(1000.0 * a, b).transform(1000.0 * x)
    doubled = LeastSquares(ridge=0.3, ridge_units="relative").fit(np.tile(a, (2, 1)), np.tile(b, (2, 1)))
    np.testing.assert_allclose(rescaled, base, rtol=1e-9)
    np.testing.assert_allclose(doubled.transform(x), base, rtol=1e-9)
    # the same number in Gram units is a different strength at another scale
    gram = LeastSquares(ridge=0.3 * 40).fit(a, b).transform(x)
    gram_rescaled = LeastSquares(ridge=0.3 * 40).fit(1000.0 * a, b).transform(1000.0 * x)
    assert np.abs(gram - gram_rescaled).max() > 1e-3


def test_cross_validated_ridge_follows_the_noise_level(rng):
    a = rng.normal(size=(80, 20))
    clean = a @ rng.normal(size=(20, 3))
    noise = rng.normal(size=(80, 3))
    small = LeastSquaresCV().fit(a, clean + 1e-6 * noise).ridge_
    large = LeastSquaresCV().fit(a, noise).ridge_  # nothing to learn: shrink everything
    assert small <= 1e-3 and large >= 10.0


def test_least_squares_cv_is_a_stitcher_that_saves_and_loads(rng, tmp_path):
    a, b = _pair(rng, n=50)
    fitted = LatentTranslator(LeastSquaresCV(folds=4)).fit(torch.from_numpy(a), torch.from_numpy(b))
    inner = fitted.stitcher_
    assert set(inner.path_) == {"ridges", "mean_r2", "std_r2"} and inner.ridge_ in inner.path_["ridges"]
    fitted.save(tmp_path / "t.safetensors")
    again = LatentTranslator.load(tmp_path / "t.safetensors")
    x = torch.from_numpy(rng.normal(size=(5, 8)))
    torch.testing.assert_close(again.transform(x), fitted.transform(x))
    assert again.stitcher_.ridge_ == inner.ridge_


def test_ridge_path_errors(rng):
    a, b = _pair(rng, n=20)
    with pytest.raises(ValueError, match="ridges: expected a non-empty sequence"):
        ridge_path(a, b, [])
    with pytest.raises(ValueError, match="ridges: expected a non-empty sequence"):
        ridge_path(a, b, [-1.0])
    with pytest.raises(ValueError, match="folds: 5-fold cross-validation needs at least 2 rows in every fold"):
        ridge_path(a[:8], b[:8])
    with pytest.raises(ValueError, match="source and target must have the same number of samples"):
        ridge_path(a, b[:10])
    with pytest.raises(ValueError, match="ridge_units: expected one of"):
        ridge_path(a, b, ridge_units="absolute")


def test_translator_names_its_sides_and_keeps_positional_calls(rng):
    a, b = _pair(rng, n=30)
    by_name = LatentTranslator().fit(source=a, target=b)
    by_position = LatentTranslator().fit(a, b)
    np.testing.assert_array_equal(by_name.coef_, by_position.coef_)
    with pytest.raises(ValueError, match="source and target must have the same number of samples"):
        LatentTranslator().fit(a, b[:5])


@pytest.mark.parametrize("rows, features", [(80, 20), (30, 50)])
def test_leave_one_out_ridge_chooses_scikit_learns_ridgecv_alpha(rows, features):
    from sklearn.linear_model import RidgeCV

    from latentstitch.stitching import LeastSquaresLOO

    generator = np.random.default_rng(rows)
    a = generator.normal(size=(rows, features))
    b = a @ generator.normal(size=(features, 6)) * 0.2 + generator.normal(size=(rows, 6)) + 3.0
    alphas = np.logspace(-2, 3, 11)
    reference = RidgeCV(alphas=alphas).fit(a, b)  # the reference value: its leave-one-out alpha
    assert alphas[0] < reference.alpha_ < alphas[-1]  # chosen inside the grid, not at an edge
    ours = LeastSquaresLOO(alphas=alphas).fit(a, b)
    assert ours.alpha_ == reference.alpha_
    np.testing.assert_allclose(ours.transform(a), reference.predict(a), atol=1e-8)
    # torch inputs give the same map
    assert LeastSquaresLOO(alphas=alphas).fit(torch.as_tensor(a), torch.as_tensor(b)).alpha_ == reference.alpha_
