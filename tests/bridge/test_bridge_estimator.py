"""Bridge as an estimator: scikit-learn contract, numpy / torch / dask, save and load, the route registry, the
relative family's head, and the errors of bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.base import clone
from synthetic_pairs import angle_preserving_per_class, rotated_scaled_shifted

from latentstitch import Bridge
from latentstitch.bridge import ROUTES, LinearHead, RelativeRoute, get_route, register_route
from latentstitch.stitching import LatentTranslator, LeastSquares

FAST = ["procrustes", "relative_centered"]


def test_scikit_learn_contract():
    bridge = Bridge(routes=FAST, cv=4, seed=3, budget=(20,))
    assert clone(bridge).get_params() == bridge.get_params()
    source, target, _ = rotated_scaled_shifted(0, n=80)
    assert bridge.fit(source, target) is bridge
    assert bridge.route_ in FAST and len(bridge.routes_) == 2


@pytest.mark.parametrize("routes", [["procrustes"], ["relative_robust"]])
def test_save_and_load_give_the_same_bridge(tmp_path, routes):
    source, target, _ = rotated_scaled_shifted(1, n=80)
    bridge = Bridge(routes=routes, budget=(20,)).fit(source, target)
    bridge.save(tmp_path / "bridge.safetensors")
    again = Bridge.load(tmp_path / "bridge.safetensors")
    new = np.random.default_rng(5).normal(size=(7, source.shape[1])).astype(np.float32)
    np.testing.assert_array_equal(again.transform(new), bridge.transform(new))
    np.testing.assert_array_equal(again.transform_target(target[:7]), bridge.transform_target(target[:7]))
    assert again.routes_ == bridge.routes_ and again.budget_ == bridge.budget_ and again.notes_ == bridge.notes_
    assert (again.route_, again.family_, again.reliable_) == (bridge.route_, bridge.family_, bridge.reliable_)


def test_a_damaged_bridge_file_is_refused(tmp_path):
    source, target, _ = rotated_scaled_shifted(1, n=80)
    Bridge(routes=["procrustes"]).fit(source, target).save(tmp_path / "b.safetensors")
    LatentTranslator().fit(source, target).save(tmp_path / "t.safetensors")
    with pytest.raises(ValueError, match="holds a LatentTranslator, not a Bridge"):
        Bridge.load(tmp_path / "t.safetensors")
    (tmp_path / "x.safetensors").write_bytes((tmp_path / "b.safetensors").read_bytes()[:100])
    with pytest.raises(ValueError, match="is not a readable safetensors file"):
        Bridge.load(tmp_path / "x.safetensors")


def test_torch_in_torch_out_on_the_device(device):
    source, target, _ = rotated_scaled_shifted(2, n=80)
    s, t = torch.from_numpy(source).to(device), torch.from_numpy(target).to(device)
    bridge = Bridge(routes=FAST).fit(s, t)
    out = bridge.transform(s[:5])
    assert isinstance(out, torch.Tensor) and out.device.type == device.type
    np.testing.assert_allclose(
        out.cpu().numpy(), Bridge(routes=FAST).fit(source, target).transform(source[:5]), rtol=1e-4, atol=1e-4
    )


def test_dask_arrays_are_bridged_block_by_block():
    da = pytest.importorskip("dask.array", reason="needs pip install 'latentstitch[dask]'")
    source, target, _ = angle_preserving_per_class(0, n=100)
    for routes in (["procrustes"], ["relative"]):
        bridge = Bridge(routes=routes).fit(source, target)
        lazy = bridge.transform(da.from_array(source, chunks=30))
        np.testing.assert_allclose(lazy.compute(), bridge.transform(source), rtol=1e-5, atol=1e-4)
        lazy_target = bridge.transform_target(da.from_array(target, chunks=30))
        np.testing.assert_allclose(np.asarray(lazy_target), bridge.transform_target(target), rtol=1e-5, atol=1e-5)


def test_fit_head_trains_the_consumer_of_the_chosen_route():
    source, target, labels = angle_preserving_per_class(4, n=200)
    bridge = Bridge(routes=["relative"]).fit(source[:150], target[:150])
    head = bridge.fit_head(target[:150], labels[:150])
    assert isinstance(head, LinearHead)
    assert head.score(bridge.transform(source[150:]), labels[150:]) >= 0.9  # exact relative vectors: same as own
    assert head.score(bridge.transform_target(target[150:]), labels[150:]) >= 0.9


def test_registering_a_route_is_one_line():
    source, target, _ = rotated_scaled_shifted(3, n=80)
    register_route("strong_ridge", lambda: LatentTranslator(LeastSquares(ridge=0.5, ridge_units="relative")))
    try:
        bridge = Bridge(routes=["procrustes", "strong_ridge"]).fit(source, target)
        assert {row.route for row in bridge.routes_} == {"procrustes", "strong_ridge"}
        with pytest.raises(ValueError, match="already registered"):
            register_route("strong_ridge", LatentTranslator)
    finally:
        ROUTES.pop("strong_ridge")
    assert isinstance(get_route("relative_angular_centered").build(), RelativeRoute)
    assert get_route("relative_angular_centered").build().center


def test_a_route_that_cannot_be_fitted_is_reported_not_fatal():
    source, target, _ = rotated_scaled_shifted(3, n=80)
    register_route("broken", lambda: RelativeRoute(similarity="no-such-similarity"))
    try:
        bridge = Bridge(routes=["procrustes", "broken"]).fit(source, target)
    finally:
        ROUTES.pop("broken")
    broken = next(row for row in bridge.routes_ if row.route == "broken")
    assert "unknown similarity" in broken.error and bridge.route_ == "procrustes"
    assert any("broken could not be fitted" in note for note in bridge.notes_)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"cv": 1}, ValueError, "cv: expected an integer >= 2"),
        ({"cv": 20}, ValueError, "cv: 20-fold cross-validation needs at least 5 rows in every fold, so at least 100"),
        ({"routes": ["nope"]}, ValueError, "routes: unknown route 'nope'"),
        ({"routes": []}, ValueError, "routes: expected 'auto', a route name or a list"),
        ({"budget": 50}, TypeError, "budget: expected a sequence of anchor counts"),
    ],
)
def test_bad_parameters_are_named_at_fit(change, error, match):
    source, target, _ = rotated_scaled_shifted(0, n=60)
    with pytest.raises(error, match=match):
        Bridge(**{"routes": ["procrustes"], **change}).fit(source, target)


def test_bad_inputs_are_named(rng):
    source, target, _ = rotated_scaled_shifted(0, n=60)
    bridge = Bridge(routes=["procrustes"])
    with pytest.raises(ValueError, match="source and target must have the same number of samples"):
        bridge.fit(source, target[:50])
    bad = target.copy()
    bad[7, 3] = np.nan
    with pytest.raises(ValueError, match=r"target: contains NaN or inf \(first at row 7\)"):
        bridge.fit(source, bad)
    with pytest.raises(ValueError, match="head: expected one prediction per row"):
        bridge.fit(source, target, head=lambda x: np.zeros((3,)))
    with pytest.raises(ValueError, match="head: calling it on"):
        bridge.fit(source, target, head=lambda x: 1 / 0)
    bridge.fit(source, target)
    with pytest.raises(ValueError, match="source: has 5 features but the bridge was fitted on 24-feature source"):
        bridge.transform(source[:, :5])


def test_relative_route_describes_each_side_by_its_own_anchors(rng):
    from latentstitch import RobustRelativeProjection, relative_projection

    source, target = rng.normal(size=(30, 6)), rng.normal(size=(30, 9)) + 4
    x, y = rng.normal(size=(5, 6)), rng.normal(size=(5, 9)) + 4
    route = RelativeRoute("cosine", center=True).fit(source, target)
    np.testing.assert_allclose(route.transform(x), relative_projection(x, source, center=True))
    np.testing.assert_allclose(route.transform_target(y), relative_projection(y, target, center=True))
    robust = RelativeRoute(robust=True).fit(source, target)
    expected = RobustRelativeProjection(9, eps=0.0).fit(target).transform(y)
    np.testing.assert_allclose(robust.transform_target(y), expected)
    with pytest.raises(ValueError, match="x: has 9 features but the source anchors have 6"):
        route.transform(y)


def test_rows_can_be_matched_by_ids(rng):
    source, target, _ = rotated_scaled_shifted(2, n=60)
    ids = np.array([f"item{i}" for i in range(60)])
    order = rng.permutation(60)
    by_ids = Bridge(routes=["procrustes"]).fit(source, target[order], source_ids=ids, target_ids=ids[order])
    by_order = Bridge(routes=["procrustes"]).fit(source, target)
    np.testing.assert_allclose(by_ids.transform(source[:5]), by_order.transform(source[:5]), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"source_ids, target_ids: the ids do not match: 1 ids of the source"):
        Bridge(routes=["procrustes"]).fit(source, target, source_ids=ids, target_ids=np.r_[ids[:-1], ["other"]])
    with pytest.raises(ValueError, match="give both to match rows by id"):
        Bridge(routes=["procrustes"]).fit(source, target, source_ids=ids)
