"""The cross-validation's shared decompositions give what each route's own estimator gives when fitted on the fold's
training rows, and the new routes recover maps of their own kind."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch.bridge import Bridge, QualityEstimate, StackedRoute, get_route
from latentstitch.bridge._crossval import Anchors
from latentstitch.stitching import ResidualAdapter

_PARAMS = {"ridge": {"ridge": 0.1}, "ridge_raw": {"ridge": 0.01}, "low_rank": {"rank": 4}}


def _pair(seed, n, p, q):
    rng = np.random.default_rng(seed)
    source = (rng.normal(size=(n, p)) * np.geomspace(3.0, 0.1, p) + 2.0).astype(np.float64)
    target = source @ rng.normal(size=(p, q)) / np.sqrt(p) + 0.3 * rng.normal(size=(n, q)) - 1.0
    return source, target


@pytest.mark.parametrize("shape", [(120, 10, 14), (40, 60, 50)])  # more anchors than features, and fewer
@pytest.mark.parametrize(
    "name", ["ridge", "ridge_raw", "low_rank", "procrustes_scaled", "procrustes_norm", "procrustes"]
)
@pytest.mark.kernels
def test_a_fast_path_bridges_held_out_anchors_as_the_estimator_fitted_on_the_fold(name, shape):
    source, target = _pair(0, *shape)
    anchors = Anchors(source, target, np.array_split(np.random.default_rng(1).permutation(shape[0]), 4), 0)
    fold = anchors.fold(1, np.concatenate([anchors.parts[j] for j in (0, 2, 3)]))
    spec = get_route(name)
    # with fewer anchors than features (the second shape) Procrustes is not unique: the polar factor and the
    # routes' estimator (unspanned="zero") both map the directions no training anchor spans to zero
    candidates = dict((repr(sorted(params.items())), out) for params, out in spec.path(fold))
    params = _PARAMS.get(name, {})
    fast = candidates[repr(sorted(params.items()))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RankDeficiencyWarning)  # expected with fewer anchors than features
        estimator = spec.build(**params).fit(source[fold.train], target[fold.train])
    slow = torch.as_tensor(estimator.transform(source[fold.queries]))
    torch.testing.assert_close(fast, slow, rtol=1e-6, atol=1e-6)


def test_the_relative_fast_path_gives_the_cosines_of_the_relative_estimator_fitted_on_the_fold():
    source, target = _pair(2, 60, 12, 9)
    anchors = Anchors(source, target, np.array_split(np.random.default_rng(1).permutation(60), 5), 0)
    fold = anchors.fold(2, np.concatenate([anchors.parts[j] for j in (0, 1, 3, 4)]))
    ((_, fast),) = get_route("relative").path(fold)
    route = get_route("relative").build().fit(source[fold.train], target[fold.train])
    left = torch.nn.functional.normalize(torch.as_tensor(route.transform(source[fold.queries])), dim=1)
    right = torch.nn.functional.normalize(torch.as_tensor(route.transform_target(target)), dim=1)
    torch.testing.assert_close(fast.double(), left @ right.T, rtol=1e-5, atol=1e-5)


def test_low_rank_recovers_an_exact_low_rank_affine_map(rng):
    source = rng.normal(size=(300, 20))
    left, right = rng.normal(size=(20, 3)), rng.normal(size=(3, 16))
    target = source @ left @ right + rng.normal(size=16)
    bridge = Bridge(routes=["low_rank"]).fit(source, target)
    estimator = bridge.estimator_
    assert bridge.routes_[0].params["rank"] == 4  # the smallest rank tried that holds the map (4 >= 3)
    assert np.linalg.matrix_rank(np.asarray(estimator.coef_), tol=1e-6) == 3
    new = rng.normal(size=(10, 20))
    truth = new @ left @ right + (target - source @ left @ right)[0]
    np.testing.assert_allclose(bridge.transform(new), truth, rtol=1e-2, atol=1e-2)  # its light ridge shrinks 0.1%


def test_ridge_raw_recovers_an_exact_affine_map_with_a_light_penalty(rng):
    source = rng.normal(size=(400, 12)) * np.geomspace(5.0, 0.5, 12)
    coef, shift = rng.normal(size=(12, 9)), rng.normal(size=9)
    bridge = Bridge(routes=["ridge_raw"]).fit(source, source @ coef + shift)
    assert bridge.routes_[0].params["ridge"] <= 1e-3 and bridge.routes_[0].r2[0] > 0.9999
    new = rng.normal(size=(5, 12))
    np.testing.assert_allclose(bridge.transform(new), new @ coef + shift, rtol=1e-2, atol=1e-2)


def _nonlinear(seed, n=768, d=16, test=0):
    """y = x W + 3 relu(x . v) u: a known small nonlinearity (one ReLU ridge) on top of a linear map; ``test`` more
    rows of the same map."""
    rng = np.random.default_rng(seed)
    w, v, u = rng.normal(size=(d, d)) / np.sqrt(d), rng.normal(size=d) / np.sqrt(d), rng.normal(size=d)
    x = rng.normal(size=(n + test, d))
    y = x @ w + 3 * np.maximum(x @ v, 0)[:, None] * u
    return x[:n].astype(np.float32), y[:n].astype(np.float32), x[n:].astype(np.float32), y[n:].astype(np.float32)


def test_the_residual_adapter_learns_a_known_nonlinearity_the_linear_map_misses_and_is_deterministic():
    x, y, test_x, test_y = _nonlinear(0, test=300)
    adapter = ResidualAdapter().fit(x, y)
    again = ResidualAdapter().fit(x, y)
    np.testing.assert_array_equal(adapter.transform(test_x), again.transform(test_x))
    linear = np.asarray(test_x @ np.asarray(adapter.coef_, dtype=np.float32) + np.asarray(adapter.intercept_))

    def r2(pred):
        return 1 - ((test_y - pred) ** 2).sum() / ((test_y - test_y.mean(0)) ** 2).sum()

    # measured: R^2 0.79 for the linear part, 0.98 with the adapter (seed 0)
    assert adapter.best_epoch_ > 0 and r2(adapter.transform(test_x)) > r2(linear) + 0.1


def test_the_adapter_keeps_the_linear_map_when_the_relation_is_linear(rng):
    x = rng.normal(size=(200, 8)).astype(np.float32)
    y = x @ rng.normal(size=(8, 6)).astype(np.float32)
    adapter = ResidualAdapter(epochs=50).fit(x, y)
    assert adapter.validation_loss_[1] <= adapter.validation_loss_[0]


@pytest.mark.parametrize("route", ["mlp_adapter", "ensemble", "low_rank", "ridge_raw"])
def test_new_routes_save_and_load(route, tmp_path):
    x, y, _, _ = _nonlinear(1, n=200)
    routes = [route] if route != "ensemble" else ["ridge_raw", "low_rank", "procrustes_scaled", "ensemble"]
    bridge = Bridge(routes=routes, seed=3).fit(x, y)
    if route == "ensemble":
        bridge.route_ = "ensemble"
        row = next(r for r in bridge.routes_ if r.route == "ensemble")
        bridge.estimator_ = StackedRoute(**row.params).fit(x, y)
        for r in bridge.routes_:
            r.chosen = r is row
        ranks, i = bridge.cv_results_["rank_test_score"], bridge.cv_results_["route"].index("ensemble")
        bridge.cv_results_["rank_test_score"] = [1 if j == i else r + (r < ranks[i]) for j, r in enumerate(ranks)]
    bridge.save(tmp_path / "b.safetensors")
    loaded = Bridge.load(tmp_path / "b.safetensors")
    np.testing.assert_allclose(loaded.transform(x[:7]), bridge.transform(x[:7]), rtol=1e-5, atol=1e-5)
    assert isinstance(loaded.estimate_, QualityEstimate) and loaded.estimate_ == bridge.estimate_


def test_the_ensemble_blends_with_nonnegative_weights_fitted_on_held_out_predictions():
    x, y, _, _ = _nonlinear(2, n=300)
    bridge = Bridge(routes=["ridge_raw", "procrustes_scaled", "low_rank", "ensemble"]).fit(x, y)
    row = next(r for r in bridge.routes_ if r.route == "ensemble")
    assert len(row.params["routes"]) == 3 and all(w >= 0 for w in row.params["weights"])
    best_member = max(r.r2[0] for r in bridge.routes_ if r.route in row.params["routes"])
    # cross-fitted weights: the blend is about as good as its best member (measured 0.694 vs 0.710 here)
    assert row.r2[0] >= best_member - 0.03


def test_the_quality_estimate_is_held_out_recall_with_an_interval_that_brackets_it(rng):
    x, y, _, _ = _nonlinear(3, n=400)
    bridge = Bridge().fit(x, y)
    estimate = bridge.estimate_
    chosen = next(r for r in bridge.routes_ if r.chosen)
    assert estimate.metric == "recall@10" and estimate.pool == 400 and estimate.route == bridge.route_
    assert estimate.low <= estimate.value <= estimate.high
    # the winner's curse of choosing on MRR of the same held-out items is removed: at most the held-out figure
    assert chosen.recall_at_k[0] - 0.05 <= estimate.value <= chosen.recall_at_k[0] + 1e-12
    assert estimate.to_dict()["level"] == 0.9 and "Expected quality" in estimate.sentence()


def test_near_dead_target_features_are_named_and_r2_scaled_shows_what_a_standard_scaling_head_reads(rng):
    source = rng.normal(size=(300, 12))  # 12 features, 8 of which the target keeps
    rotation = np.linalg.qr(rng.normal(size=(8, 8)))[0]
    target = np.hstack([source[:, :8] @ rotation, 1e-5 * rng.normal(size=(300, 4))])  # and 4 near-dead features
    bridge = Bridge(routes=["ridge_raw", "procrustes_scaled"]).fit(source, target)
    rows = {row.route: row for row in bridge.routes_}
    # both find partners; the square rotation sends the 4 source features the target lacks into its near-dead ones,
    # which a standard-scaling head blows up
    assert rows["procrustes_scaled"].mrr[0] > 0.9 and rows["ridge_raw"].mrr[0] > 0.9
    assert rows["ridge_raw"].r2_scaled[0] > rows["procrustes_scaled"].r2_scaled[0] + 0.5
    assert any("4 near-dead of its 12 features" in note for note in bridge.notes_)


@pytest.mark.parametrize("shape", [(120, 10, 14), (40, 60, 50)])
@pytest.mark.parametrize(
    "name", ["ridge", "ridge_raw", "low_rank", "procrustes_scaled", "procrustes_norm", "procrustes"]
)
def test_float32_anchors_take_the_fast_path_in_float32_within_float32_rounding(name, shape):
    """float32 anchors are decomposed in float32: the bridged held-out anchors stay within float32 rounding (relative
    to the target's spread) of the route's estimator fitted on the fold, and come out in float32."""
    source, target = (x.astype(np.float32) for x in _pair(3, *shape))
    anchors = Anchors(source, target, np.array_split(np.random.default_rng(1).permutation(shape[0]), 4), 0)
    fold = anchors.fold(1, np.concatenate([anchors.parts[j] for j in (0, 2, 3)]))
    spec = get_route(name)
    params = _PARAMS.get(name, {})
    fast = dict((repr(sorted(p.items())), o) for p, o in spec.path(fold))[repr(sorted(params.items()))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RankDeficiencyWarning)
        estimator = spec.build(**params).fit(source[fold.train], target[fold.train])
    slow = torch.as_tensor(estimator.transform(source[fold.queries])).double()
    assert fast.dtype == torch.float32
    spread = float(slow.std())
    torch.testing.assert_close(fast.double(), slow, rtol=0, atol=1e-4 * spread)
