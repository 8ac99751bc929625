"""Each stitcher against known maps and reference implementations (numpy, scipy, scikit-learn), and its errors."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Lasso, Ridge

from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch._core.persist import load
from latentstitch.invariance import INVERTIBLE_LINEAR, ORTHOGONAL, TRANSLATION, random_transform
from latentstitch.stitching import (
    SPARSITY_THRESHOLD,
    LatentTranslator,
    LeastSquares,
    Procrustes,
    ReducedRank,
    SparseLasso,
)


def gaussian(n, p, seed):
    return np.random.default_rng(seed).standard_normal((n, p))


def orthogonal(d, seed):
    return random_transform(ORTHOGONAL, d, seed).matrix


def relative_error(x, reference):
    return np.linalg.norm(np.asarray(x) - reference) / np.linalg.norm(reference)


# --- LeastSquares ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
def test_least_squares_agrees_with_numpy_lstsq(bias, on):
    a = gaussian(500, 12, 0) * np.linspace(0.1, 10, 12) + 5.0
    b = np.tanh(a @ gaussian(12, 7, 1)) + gaussian(500, 7, 2)
    design = np.hstack([a, np.ones((500, 1))]) if bias else a
    solution = np.linalg.lstsq(design, b, rcond=None)[0]
    fitted = LeastSquares(bias=bias).fit(*on(a, b))
    np.testing.assert_allclose(fitted.coef_.cpu().numpy(), solution[:12], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fitted.intercept_.cpu().numpy(), solution[12] if bias else np.zeros(7), atol=1e-9)
    assert fitted.rank_ == 12


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_least_squares_predictions_are_invariant_to_invertible_affine_maps_of_the_source(seed):
    a, b = gaussian(80, 6, seed), gaussian(80, 4, seed + 1)
    linear, shift = random_transform(INVERTIBLE_LINEAR, 6, seed), random_transform(TRANSLATION, 6, seed)
    moved = shift(linear(a))
    np.testing.assert_allclose(
        LeastSquares().fit(moved, b).transform(moved), LeastSquares().fit(a, b).transform(a), atol=1e-9
    )


def test_ridge_agrees_with_scikit_learn_ridge():
    a, b = gaussian(200, 10, 0) + 2.0, gaussian(200, 4, 1)
    reference = Ridge(alpha=30.0).fit(a, b)
    fitted = LeastSquares(ridge=30.0).fit(a, b)
    np.testing.assert_allclose(fitted.coef_, reference.coef_.T, rtol=1e-9)
    np.testing.assert_allclose(fitted.intercept_, reference.intercept_, rtol=1e-9)


@pytest.mark.kernels
def test_least_squares_streams_float32_chunks_exactly(on):
    a = gaussian(3000, 16, 0).astype(np.float32)
    b = (a @ gaussian(16, 5, 1) + gaussian(3000, 5, 2)).astype(np.float32)
    one_shot = LeastSquares().fit(*on(a, b))
    streamed = LeastSquares()
    for chunk in np.array_split(np.arange(3000), 9):
        streamed.partial_fit(*on(a[chunk], b[chunk]))
    coef = one_shot.coef_.cpu().numpy()
    assert relative_error(streamed.coef_.cpu().numpy(), coef) < 1e-6
    reference = np.linalg.lstsq(np.hstack([a.astype(np.float64), np.ones((3000, 1))]), b, rcond=None)[0][:16]
    assert relative_error(coef, reference) < 1e-10  # float64-exact although the inputs are float32


def test_fewer_samples_than_features_warns_naming_the_rank_and_returns_the_minimum_norm_map():
    a, b = gaussian(10, 30, 0), gaussian(10, 3, 1)
    with pytest.warns(RankDeficiencyWarning, match="numerical rank 9 < 30 features over 10 samples"):
        fitted = LeastSquares().fit(a, b)
    assert fitted.rank_ == 9
    centered = a - a.mean(0)
    np.testing.assert_allclose(fitted.coef_, np.linalg.pinv(centered) @ (b - b.mean(0)), atol=1e-10)
    np.testing.assert_allclose(fitted.transform(a), b, atol=1e-9)  # interpolates, as the minimum-norm solution
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LeastSquares(ridge=1.0).fit(a, b)  # ridge makes the problem well-posed: no warning


def test_duplicated_feature_warns_instead_of_dropping_it_silently():
    a = gaussian(1000, 5, 0)
    a = np.hstack([a, a[:, :1]])
    b = a[:, :1] * 2.0 + a[:, 1:2]
    with pytest.warns(RankDeficiencyWarning, match="numerical rank 5 < 6"):
        fitted = LeastSquares().fit(a, b)
    np.testing.assert_allclose(fitted.coef_[[0, 5], 0], [1.0, 1.0], atol=1e-9)  # minimum norm splits the weight
    assert fitted.score(a, b) == pytest.approx(1.0, abs=1e-12)


# --- Procrustes ------------------------------------------------------------------------------------------------
def test_procrustes_recovers_an_orthogonal_map_to_the_noise_level():
    n, d, noise = 4000, 16, 0.01
    a, q = gaussian(n, d, 0), orthogonal(d, 1)
    b = a @ q + noise * gaussian(n, d, 2)
    fitted = Procrustes().fit(a.astype(np.float32), b.astype(np.float32))
    residual = np.sqrt(np.mean((a @ fitted.coef_ - b) ** 2))
    assert 0.9 * noise < residual < 1.01 * noise  # what remains is the noise, not a misfit
    # each entry of the estimate is off by about noise / sqrt(n): Frobenius error about noise * d / sqrt(n)
    assert np.linalg.norm(fitted.coef_ - q) < 3 * noise * d / np.sqrt(n)
    np.testing.assert_allclose(fitted.coef_.T @ fitted.coef_, np.eye(d), atol=1e-12)


def test_procrustes_agrees_with_scipy(on):
    a, b = gaussian(300, 9, 0), gaussian(300, 9, 1) + np.linspace(-3, 3, 9)
    rotation, singular_sum = scipy.linalg.orthogonal_procrustes(a, b)
    np.testing.assert_allclose(Procrustes().fit(*on(a, b)).coef_.cpu().numpy(), rotation, atol=1e-12)
    scaled = Procrustes(scale=True).fit(*on(a, b))
    assert scaled.scale_ == pytest.approx(singular_sum / np.sum(a**2), rel=1e-12)
    np.testing.assert_allclose(scaled.coef_.cpu().numpy(), scaled.scale_ * rotation, atol=1e-12)
    centered = Procrustes(center=True).fit(*on(a, b))
    rotation, _ = scipy.linalg.orthogonal_procrustes(a - a.mean(0), b - b.mean(0))
    np.testing.assert_allclose(centered.coef_.cpu().numpy(), rotation, atol=1e-12)
    expected = b.mean(0) - a.mean(0) @ rotation
    np.testing.assert_allclose(centered.intercept_.cpu().numpy(), expected, atol=1e-12)


@pytest.mark.parametrize(("p", "q"), [(5, 9), (9, 5)])
def test_procrustes_of_different_widths_is_zero_padding(p, q):
    a, b = gaussian(200, p, 0), gaussian(200, q, 1)
    width = max(p, q)
    padded, _ = scipy.linalg.orthogonal_procrustes(
        np.pad(a, ((0, 0), (0, width - p))), np.pad(b, ((0, 0), (0, width - q)))
    )
    coef = Procrustes().fit(a, b).coef_
    np.testing.assert_allclose(a @ coef, (np.pad(a, ((0, 0), (0, width - p))) @ padded)[:, :q], atol=1e-10)
    small = min(p, q)
    gram = coef @ coef.T if p < q else coef.T @ coef  # orthonormal rows (p < q) or columns (p > q)
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_centered_scaled_procrustes_predictions_are_invariant_to_similarity_transforms(seed):
    a, b = gaussian(100, 6, seed), gaussian(100, 6, seed + 1)
    rotate, shift = random_transform(ORTHOGONAL, 6, seed), random_transform(TRANSLATION, 6, seed)
    moved = shift(rotate(a)) * 3.0
    estimator = Procrustes(center=True, scale=True)
    np.testing.assert_allclose(estimator.fit(moved, b).transform(moved), estimator.fit(a, b).transform(a), atol=1e-9)


def test_procrustes_on_fewer_samples_than_features_warns_naming_the_rank():
    a, b = gaussian(5, 10, 0), gaussian(5, 10, 1)
    with pytest.warns(RankDeficiencyWarning, match=r"numerical rank 5 < 10: there are fewer samples \(5\) than"):
        assert Procrustes().fit(a, b).rank_ == 5
    with pytest.warns(RankDeficiencyWarning, match=r"\(centred\) has numerical rank 4 < 10: there are fewer samples"):
        Procrustes(center=True).fit(a.astype(np.float32), b.astype(np.float32))


@pytest.mark.parametrize("center, scale", [(False, False), (True, True)])
def test_procrustes_unspanned_zero_is_the_minimum_norm_optimum_on_fewer_samples_than_features(center, scale):
    """With fewer samples than features the orthogonal map is not unique; ``unspanned="zero"`` returns the partial
    isometry over the spanned directions: the same predictions on the fitted rows as the orthogonal completion, zero
    for a point's component that no sample spans, a smaller norm, and no warning (it is unique)."""
    a, b = gaussian(8, 12, 0), gaussian(8, 12, 1)
    with pytest.warns(RankDeficiencyWarning):
        complete = Procrustes(center=center, scale=scale).fit(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zero = Procrustes(center=center, scale=scale, unspanned="zero").fit(a, b)
    np.testing.assert_allclose(zero.transform(a), complete.transform(a), atol=1e-10)
    rows = a - a.mean(0) if center else a
    outside = np.linalg.svd(rows)[2][-1]  # orthogonal to every (centred) sample
    np.testing.assert_allclose(zero.transform(outside[None]) - zero.intercept_, 0.0, atol=1e-10)
    assert np.linalg.norm(complete.transform(outside[None]) - complete.intercept_) > 0.1
    assert np.linalg.norm(zero.coef_) < np.linalg.norm(complete.coef_)


def test_procrustes_unspanned_makes_no_difference_at_full_rank():
    a, b = gaussian(50, 6, 0), gaussian(50, 6, 1)
    full = Procrustes(center=True).fit(a, b).coef_
    np.testing.assert_allclose(Procrustes(center=True, unspanned="zero").fit(a, b).coef_, full, atol=1e-12)
    with pytest.raises(ValueError, match="unspanned: expected one of 'complete', 'zero'; got 'none'"):
        Procrustes(unspanned="none").fit(a, b)


def test_procrustes_warns_when_float32_products_cannot_resolve_the_weakest_directions():
    a = gaussian(2000, 6, 0) * np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1e-6])  # one direction 1e-6 as strong
    with pytest.warns(RankDeficiencyWarning, match="numerical rank 5 < 6: its weakest directions are below"):
        Procrustes().fit(a.astype(np.float32), a.astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(Procrustes().fit(a, a).coef_, np.eye(6), atol=1e-9)  # float64 resolves it


# --- ReducedRank -----------------------------------------------------------------------------------------------
def test_reduced_rank_recovers_an_exact_rank_k_map():
    a = gaussian(500, 12, 0)
    low_rank = gaussian(12, 3, 1) @ gaussian(3, 10, 2)
    b = a @ low_rank + 4.0
    fitted = ReducedRank(3).fit(a, b)
    np.testing.assert_allclose(fitted.coef_, low_rank, atol=1e-10)
    np.testing.assert_allclose(fitted.intercept_, np.full(10, 4.0), atol=1e-10)
    assert np.linalg.matrix_rank(fitted.coef_, tol=1e-8) == 3
    # singular values come from the q x q Gram matrix of the fitted values: resolved to sqrt(eps64) ~ 1.5e-8
    assert fitted.singular_values_[3:].max() < 1e-7 * fitted.singular_values_[0]


def test_reduced_rank_matches_the_papers_formula_without_bias():
    a, b = gaussian(400, 10, 0), gaussian(400, 8, 1) + gaussian(400, 10, 2) @ gaussian(10, 8, 3)
    # Dr. Frankenstein's ls_sum: B_hat = pinv(A) B; U S V^T = svd(A B_hat); W_r = B_hat V_r V_r^T
    b_hat = np.linalg.pinv(a) @ b
    v = np.linalg.svd(a @ b_hat)[2].T
    for rank in (1, 4, 8):
        expected = b_hat @ v[:, :rank] @ v[:, :rank].T
        np.testing.assert_allclose(ReducedRank(rank, bias=False).fit(a, b).coef_, expected, atol=1e-10)


def test_rank_sweep_reuses_one_fit():
    a, b = gaussian(400, 10, 0), gaussian(400, 10, 1) + gaussian(400, 10, 2) @ gaussian(10, 10, 3)
    full = ReducedRank(None).fit(a, b)
    np.testing.assert_allclose(full.coef_, LeastSquares().fit(a, b).coef_, atol=1e-10)
    scores = []
    for rank in (1, 2, 4, 8, None):
        swept = full.with_rank(rank)
        refit = ReducedRank(rank).fit(a, b)
        np.testing.assert_allclose(swept.coef_, refit.coef_, atol=1e-12)
        np.testing.assert_allclose(swept.intercept_, refit.intercept_, atol=1e-12)
        assert swept.n_components_ == (rank or 10) and swept.rank == rank
        scores.append(swept.score(a, b))
    assert scores == sorted(scores)  # training R^2 grows with the rank
    assert full.rank is None and full.n_components_ == 10  # the original is untouched


def test_rank_above_the_smaller_width_is_an_error_naming_rank():
    a, b = gaussian(50, 6, 0), gaussian(50, 4, 1)
    with pytest.raises(ValueError, match=r"rank: expected at most min\(p, q\) = min\(6, 4\) = 4, got 5"):
        ReducedRank(5).fit(a, b)
    with pytest.raises(ValueError, match="rank: expected an integer >= 1, got 0"):
        ReducedRank(0).fit(a, b)
    with pytest.raises(ValueError, match="rank: expected at most"):
        ReducedRank(2).fit(a, b).with_rank(7)


# --- SparseLasso -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
def test_lasso_agrees_with_scikit_learn(bias):
    a = gaussian(300, 15, 0) + 1.0
    b = a[:, :4] @ gaussian(4, 3, 1) + 0.5 * gaussian(300, 3, 2)
    reference = Lasso(alpha=0.1, fit_intercept=bias, tol=1e-12, max_iter=100_000).fit(a, b)
    fitted = SparseLasso(alpha=0.1, bias=bias, tol=1e-12, max_iter=100_000).fit(a, b)
    np.testing.assert_allclose(fitted.coef_, reference.coef_.T, atol=1e-8)
    np.testing.assert_allclose(fitted.intercept_, reference.intercept_, atol=1e-8)
    assert fitted.sparsity_ == np.mean(np.abs(fitted.coef_) < SPARSITY_THRESHOLD) > 0.5


def test_lasso_sparsity_grows_with_alpha_up_to_the_zero_map():
    a, b = gaussian(300, 10, 0), gaussian(300, 10, 1) + gaussian(300, 10, 2)
    sparsities = [SparseLasso(alpha=alpha).fit(a, b).sparsity_ for alpha in (0.0, 0.05, 0.2, 10.0)]
    assert sparsities == sorted(sparsities) and sparsities[0] == 0.0 and sparsities[-1] == 1.0
    zero = SparseLasso(alpha=10.0).fit(a, b)
    np.testing.assert_allclose(zero.intercept_, b.mean(0))  # nothing left but the mean
    np.testing.assert_allclose(
        SparseLasso(alpha=0.0, tol=1e-12).fit(a, b).coef_, LeastSquares().fit(a, b).coef_, atol=1e-8
    )


def test_lasso_that_runs_out_of_sweeps_warns():
    a, b = gaussian(300, 10, 0), gaussian(300, 10, 1) @ gaussian(10, 10, 2)
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=1 sweeps"):
        assert SparseLasso(alpha=0.01, max_iter=1, tol=1e-12).fit(a, b).n_iter_ == 1


def test_bad_parameters_are_errors_at_fit_naming_them():
    a, b = gaussian(20, 3, 0), gaussian(20, 3, 1)
    for estimator, message in [
        (LeastSquares(ridge=-1.0), "ridge: expected a finite number >= 0"),
        (LeastSquares(bias="yes"), "bias: expected True or False"),
        (SparseLasso(alpha=float("nan")), "alpha: expected a finite number >= 0"),
        (SparseLasso(max_iter=0), "max_iter: expected an integer >= 1"),
        (Procrustes(center=1), "center: expected True or False"),
        (LatentTranslator(stitcher="procrustes"), "stitcher: expected a stitcher"),
    ]:
        with pytest.raises((ValueError, TypeError), match=message):
            estimator.fit(a, b)


# --- layouts and persistence -----------------------------------------------------------------------------------
def test_layout_mismatch_is_an_error():
    a, b = gaussian(20 * 6, 3, 0).reshape(20, 3, 3, 2), gaussian(20 * 6, 4, 1).reshape(20, 4, 2, 3)
    with pytest.raises(ValueError, match="a and b must have the same layout"):
        LeastSquares().fit(a, b)
    with pytest.raises(ValueError, match=r"expected a 2-D or 3-D or 4-D array"):
        LeastSquares().fit(a[..., None], b[..., None])
    sequences = LeastSquares().fit(gaussian(120, 3, 0).reshape(20, 6, 3), gaussian(120, 4, 1).reshape(20, 6, 4))
    assert sequences.ndim_in_ == 3 and isinstance(sequences.to_torch(), torch.nn.Linear)
    with pytest.raises(ValueError, match=r"a: \(N, T, D\) activations, but earlier chunks were \(N, D\)"):
        LeastSquares().fit(gaussian(20, 3, 0), gaussian(20, 4, 1)).partial_fit(
            a.reshape(20, 3, 6).mT, b.reshape(20, 4, 6).mT
        )


def test_load_refuses_files_it_did_not_write(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"coef_": torch.zeros(2, 2)}, str(path))
    with pytest.raises(ValueError, match="was not written by latentstitch"):
        load(path)
    LeastSquares().fit(gaussian(10, 2, 0), gaussian(10, 2, 1)).save(path)
    with pytest.raises(ValueError, match="holds a LeastSquares, not a Procrustes"):
        Procrustes.load(path)
    header = {"format": "latentstitch.stitching/1", "class": "Popen", "params": {}, "learned": {}}
    save_file({"x": torch.zeros(1)}, str(path), metadata={"latentstitch": json.dumps(header)})
    with pytest.raises(ValueError, match="unknown class 'Popen'"):
        load(path)


def test_saved_file_is_plain_safetensors_with_a_json_header(tmp_path):
    from safetensors import safe_open

    path = tmp_path / "translator.safetensors"
    LatentTranslator(ReducedRank(2)).fit(gaussian(50, 4, 0), gaussian(50, 3, 1)).save(path)
    with safe_open(str(path), framework="pt") as handle:
        header = json.loads(handle.metadata()["latentstitch"])
        keys = set(handle.keys())
    assert header["class"] == "LatentTranslator"
    assert header["params"]["stitcher"] == {
        "estimator": "ReducedRank",
        "params": {k: {"value": v} for k, v in [("bias", True), ("rank", 2), ("ridge", 0.0), ("ridge_units", "gram")]},
    }
    assert {"coef_", "intercept_", "stitcher_.coef_", "stitcher_.moments_.ab", "source_scaler_.mean_"} <= keys


@pytest.mark.parametrize("widths", [(6, 6), (5, 8), (8, 5)])
def test_procrustes_norm_scale_is_generalised_procrustes_between_two_spaces(widths):
    """``scale="norm"`` keeps the target's spread: for two spaces it is generalised Procrustes's translation (a
    separate implementation: block coordinate ascent over both maps), and its scale is ||B|| / ||A|| of the centred
    sides, where ``scale=True``'s least-squares scale is smaller by the fit's shortfall."""
    from latentstitch.alignment import GeneralizedProcrustes

    rng = np.random.default_rng(3)
    p, q = widths
    a = rng.normal(size=(200, p)) * np.linspace(2.0, 0.5, p) + 1.0
    b = a @ rng.normal(size=(p, q)) + 0.5 * rng.normal(size=(200, q)) - 2.0
    norm = Procrustes(center=True, scale="norm").fit(a, b)
    least = Procrustes(center=True, scale=True).fit(a, b)
    gpa = GeneralizedProcrustes().fit(a, b)
    new = rng.normal(size=(20, p))
    np.testing.assert_allclose(norm.transform(new), gpa.transform(new), rtol=1e-7, atol=1e-8)
    ac, bc = a - a.mean(0), b - b.mean(0)
    assert norm.scale_ == pytest.approx(np.linalg.norm(bc) / np.linalg.norm(ac), rel=1e-10)
    assert least.scale_ < norm.scale_


def test_procrustes_scale_names_what_it_accepts():
    with pytest.raises(ValueError, match=r"scale: expected True, False or 'norm', got 'spread'"):
        Procrustes(scale="spread").fit(np.ones((4, 2)), np.ones((4, 2)))


def test_reduced_rank_names_a_too_large_rank_before_counting_samples():
    """A rank above min(p, q) is the user's mistake whatever the sample count: the error names ``rank`` even when a
    single sample would also be too few (hypothesis found the sample-count error masking it)."""
    from latentstitch.stitching import ReducedRank

    with pytest.raises(ValueError, match=r"^rank: expected at most min\(p, q\)"):
        ReducedRank(rank=99).fit(np.ones((1, 5)), np.ones((1, 5)))
