"""The contract every stitcher keeps (our check_estimator): run over every estimator of latentstitch.stitching."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import r2_score

from latentstitch._core.arrays import channels_as_rows
from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch._core.persist import load
from latentstitch.stitching import LatentTranslator, LeastSquares, Procrustes, ReducedRank, SparseLasso

ESTIMATORS = [
    LeastSquares(),
    LeastSquares(bias=False, ridge=0.5),
    Procrustes(),
    Procrustes(center=True, scale=True),
    ReducedRank(3),
    ReducedRank(None, bias=False),
    SparseLasso(alpha=0.01, tol=1e-12, max_iter=10_000),
    LatentTranslator(),
    LatentTranslator(LeastSquares(), standardize=False),
]
STREAMING = [e for e in ESTIMATORS if hasattr(e, "partial_fit")]
CONVOLUTIONAL = STREAMING  # the translator takes 2-D embeddings only


def _ids(estimator):
    return repr(estimator).replace(" ", "")


def _fit_names(estimator) -> tuple[str, str]:
    """The names ``fit`` gives its two arguments (the translator names them the way users think of them)."""
    return ("source", "target") if isinstance(estimator, LatentTranslator) else ("a", "b")


def make_pair(n=300, p=8, q=6, seed=0, dtype=np.float64, layout=()):
    """Source activations and a noisy affine function of them; ``layout`` = extra positions, e.g. (3, 2) for H, W."""
    rng = np.random.default_rng(seed)
    rows = n * int(np.prod(layout, dtype=int))
    a = rng.standard_normal((rows, p)) * rng.uniform(0.5, 2.0, p) + rng.normal(size=p)
    b = a @ rng.standard_normal((p, q)) + 0.1 * rng.standard_normal((rows, q)) + 1.0
    if layout:  # rows are (N*H*W); lay them out as (N, C, H, W)
        a = a.reshape(n, *layout, p).transpose(0, 3, 1, 2)
        b = b.reshape(n, *layout, q).transpose(0, 3, 1, 2)
    return np.ascontiguousarray(a, dtype=dtype), np.ascontiguousarray(b, dtype=dtype)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_params_are_stored_unchanged_and_clone_round_trips(estimator):
    params = estimator.get_params(deep=False)
    copy = clone(estimator)
    assert type(copy) is type(estimator)
    for name, value in copy.get_params(deep=False).items():
        if hasattr(value, "get_params"):
            assert value.get_params() == params[name].get_params() and value is not params[name]
        else:
            assert value == params[name]
    assert not [k for k in vars(copy) if k.endswith("_")], "an unfitted estimator holds no learned state"
    name, value = next(iter(params.items()))
    assert copy.set_params(**{name: value}) is copy


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_in_numpy_out_and_torch_in_torch_out(estimator, dtype):
    a, b = make_pair(dtype=dtype)
    fitted = clone(estimator)
    assert fitted.fit(a, b) is fitted
    out = fitted.transform(a)
    assert isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == b.shape
    assert isinstance(fitted.coef_, np.ndarray) and fitted.coef_.shape == (8, 6)

    torch_fitted = clone(estimator).fit(torch.from_numpy(a), torch.from_numpy(b))
    assert isinstance(torch_fitted.coef_, torch.Tensor)
    torch_out = torch_fitted.transform(torch.from_numpy(a))
    assert isinstance(torch_out, torch.Tensor) and torch_out.dtype == torch.from_numpy(a).dtype
    # the same map whatever the container (also across: a numpy-fitted map applied to a tensor)
    np.testing.assert_allclose(torch_out.numpy(), out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fitted.transform(torch.from_numpy(a)).numpy(), out, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_score_is_variance_weighted_r2_of_transform(estimator):
    a, b = make_pair()
    test_a, test_b = make_pair(seed=1)
    fitted = clone(estimator).fit(a, b)
    expected = r2_score(test_b, fitted.transform(test_a), multioutput="variance_weighted")
    assert fitted.score(test_a, test_b) == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("estimator", STREAMING, ids=_ids)
@pytest.mark.kernels
def test_partial_fit_over_chunks_equals_fit(estimator, on):
    a, b = on(*make_pair(n=400))  # on the --device
    one_shot = clone(estimator).fit(a, b)
    streamed = clone(estimator)
    with warnings.catch_warnings():  # the 7-sample first chunk is rank-deficient on purpose
        warnings.simplefilter("ignore", RankDeficiencyWarning)
        for chunk in np.split(np.arange(400), [7, 100, 250]):
            assert streamed.partial_fit(a[chunk], b[chunk]) is streamed
    # closed form: float64 rounding; the Lasso: its solver tolerance (1e-12 of the target's sum of squares)
    torch.testing.assert_close(streamed.coef_, one_shot.coef_, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(streamed.intercept_, one_shot.intercept_, rtol=1e-9, atol=1e-9)
    assert streamed.moments_.count == 400


@pytest.mark.parametrize("estimator", STREAMING, ids=_ids)
def test_fit_forgets_and_partial_fit_accumulates(estimator):
    a, b = make_pair()
    c, d = make_pair(seed=2)
    refit = clone(estimator).fit(c, d).fit(a, b)
    np.testing.assert_allclose(refit.coef_, clone(estimator).fit(a, b).coef_, rtol=1e-9, atol=1e-12)
    both = clone(estimator).fit(np.concatenate([a, c]), np.concatenate([b, d]))
    resumed = clone(estimator).fit(a, b).partial_fit(c, d)
    np.testing.assert_allclose(resumed.coef_, both.coef_, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
@pytest.mark.parametrize("container", ["numpy", "torch"])
def test_save_load_round_trip(estimator, container, tmp_path):
    a, b = make_pair()
    if container == "torch":
        a, b = torch.from_numpy(a), torch.from_numpy(b)
    fitted = clone(estimator).fit(a, b)
    path = tmp_path / "stitcher.safetensors"
    fitted.save(path)
    loaded = type(estimator).load(path)
    assert type(loaded) is type(fitted)
    assert repr(loaded) == repr(fitted)
    assert type(loaded.coef_) is type(fitted.coef_)
    for name in [k for k in vars(fitted) if k.endswith("_") and not k.startswith("_")]:
        assert hasattr(loaded, name), name
    np.testing.assert_array_equal(np.asarray(loaded.transform(a)), np.asarray(fitted.transform(a)))
    assert load(path).get_params(deep=False).keys() == fitted.get_params(deep=False).keys()
    if hasattr(fitted, "partial_fit"):  # the moments are saved: a stream resumes after loading
        c, d = make_pair(seed=3)
        np.testing.assert_allclose(loaded.partial_fit(c, d).coef_, fitted.partial_fit(c, d).coef_, rtol=1e-12)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_to_torch_reproduces_transform(estimator):
    a, b = make_pair(dtype=np.float32)
    fitted = clone(estimator).fit(a, b)
    layer = fitted.to_torch()
    assert isinstance(layer, torch.nn.Linear) and layer.weight.dtype == torch.float32
    with torch.no_grad():
        np.testing.assert_allclose(layer(torch.from_numpy(a)).numpy(), fitted.transform(a), rtol=1e-5, atol=1e-5)
    assert fitted.to_torch(torch.float64).weight.dtype == torch.float64


@pytest.mark.parametrize("estimator", CONVOLUTIONAL, ids=_ids)
def test_feature_maps_are_matched_per_channel_and_give_a_1x1_conv(estimator):
    a, b = make_pair(n=60, layout=(3, 2))  # (60, 8, 3, 2) -> (60, 6, 3, 2)
    fitted = clone(estimator).fit(a, b)
    rows = clone(estimator).fit(channels_as_rows(torch.from_numpy(a), "a"), channels_as_rows(torch.from_numpy(b), "b"))
    np.testing.assert_allclose(fitted.coef_, rows.coef_.numpy(), rtol=1e-9, atol=1e-9)
    out = fitted.transform(a)
    assert out.shape == b.shape and out.flags.c_contiguous
    layer = fitted.to_torch(torch.float64)
    assert isinstance(layer, torch.nn.Conv2d) and layer.kernel_size == (1, 1)
    with torch.no_grad():
        np.testing.assert_allclose(layer(torch.from_numpy(a)).numpy(), out, rtol=1e-12, atol=1e-12)
    # sequences (N, T, D) are matched per token, and a 2-D fit applies to them
    seq = fitted.transform(np.ascontiguousarray(a.transpose(0, 2, 3, 1).reshape(60, 6, 8)))
    np.testing.assert_allclose(seq, out.transpose(0, 2, 3, 1).reshape(60, 6, 6), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_non_finite_values_are_rejected_naming_the_argument(estimator):
    a, b = make_pair()
    first, second = _fit_names(estimator)
    for name, bad_a, bad_b in [(first, a.copy(), b), (second, a, b.copy())]:
        (bad_a if name == first else bad_b)[5, 2] = np.nan if name == first else np.inf
        with pytest.raises(ValueError, match=rf"{name}: contains NaN or inf"):
            clone(estimator).fit(bad_a, bad_b)
    fitted = clone(estimator).fit(a, b)
    bad = a.copy()
    bad[3, 0] = np.nan
    with pytest.raises(ValueError, match=r"x: contains NaN or inf \(first at row 3\)"):
        fitted.transform(bad)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_shape_errors_name_the_arguments(estimator):
    a, b = make_pair()
    first, second = _fit_names(estimator)
    with pytest.raises(ValueError, match=f"{first} and {second} must have the same number of samples"):
        clone(estimator).fit(a, b[:-1])
    with pytest.raises(TypeError, match=f"{first}: expected a floating-point array"):
        clone(estimator).fit(a.astype(np.int64), b)
    fitted = clone(estimator).fit(a, b)
    with pytest.raises(ValueError, match=r"x: has 7 features but \w+ was fitted on 8"):
        fitted.transform(a[:, :7])
    with pytest.raises(ValueError, match="a and b must have the same number of samples"):
        fitted.score(a, b[:-1])


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_use_before_fit_raises_not_fitted(estimator, tmp_path):
    a, b = make_pair()
    unfitted = clone(estimator)
    for use in (
        lambda: unfitted.transform(a),
        lambda: unfitted.score(a, b),
        unfitted.to_torch,
        lambda: unfitted.save(tmp_path / "x.safetensors"),
    ):
        with pytest.raises(NotFittedError):
            use()


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_gradients_flow_through_transform(estimator):
    a, b = make_pair()
    fitted = clone(estimator).fit(a, b)
    x = torch.from_numpy(a[:5]).requires_grad_()
    fitted.transform(x).sum().backward()
    coef = np.asarray(fitted.coef_)
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(coef.sum(axis=1), (5, 8)), rtol=1e-12)


def test_a_fit_raises_no_warning_on_well_posed_data():
    a, b = make_pair()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for estimator in ESTIMATORS:
            clone(estimator).fit(a, b)
