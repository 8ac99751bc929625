"""Target features that never vary over the anchors are held at their anchor value by translation routes, so a
consumer that standard-scales each feature does not magnify a route's rounding noise there (``bridge/_dead.py``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from rounding import assert_close_to_rounding
from scipy.stats import ortho_group
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from latentstitch.bridge import Bridge

DEAD = (3, 7)  # the target's dead features: spreads 1e-33 and 1e-9 against ~1 for the others (MiniLM-L6 has both)


def _labelled_pair(seed: int, n: int = 400, p: int = 12):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=n)
    centres = rng.normal(size=(3, p)) * 2.0
    source = centres[labels] + rng.normal(size=(n, p))
    target = source @ ortho_group.rvs(p, random_state=seed) + 0.3 * rng.normal(size=(n, p))
    target[:, DEAD[0]] = 1e-33 * rng.normal(size=n) - 2e-33
    target[:, DEAD[1]] = 5e-9 * rng.normal(size=n) + 0.25
    return source, target, labels


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("route", ["procrustes_scaled", "procrustes", "low_rank"])
def test_a_standard_scaling_head_keeps_its_accuracy_on_bridged_vectors_with_dead_target_features(seed, route):
    source, target, labels = _labelled_pair(seed)
    anchors, test = np.arange(200), np.arange(200, 400)
    head = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(target[anchors], labels[anchors])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = Bridge(routes=[route]).fit(source[anchors], target[anchors])
    assert bridge.dead_features_ == list(DEAD)
    bridged = bridge.transform(source[test])
    held = np.tile(target[anchors][:, list(DEAD)].mean(0), (200, 1))
    np.testing.assert_allclose(bridged[:, list(DEAD)], held, rtol=1e-12, atol=0)
    own = head.score(target[test], labels[test])
    assert head.score(bridged, labels[test]) >= own - 0.1
    # the same map without holding them: the route's rounding noise, divided by spreads of 1e-33 and 1e-9
    raw = bridge.estimator_.transform(source[test])
    assert np.abs(raw[:, list(DEAD)] - bridged[:, list(DEAD)]).max() > 1e-12


@pytest.mark.kernels
def test_held_features_survive_save_and_load_and_every_input_type(tmp_path):
    source, target, _ = _labelled_pair(0)
    bridge = Bridge(routes=["procrustes_scaled"]).fit(source, target)
    bridge.save(tmp_path / "b.safetensors")
    loaded = Bridge.load(tmp_path / "b.safetensors")
    assert loaded.dead_features_ == list(DEAD) and loaded.dead_values_ == bridge.dead_values_
    assert any("at their anchor mean (dead_features_)" in note for note in bridge.notes_)
    expected = bridge.transform(source[:20])
    np.testing.assert_array_equal(loaded.transform(source[:20]), expected)
    as_tensor = loaded.transform(torch.tensor(source[:20]))
    assert isinstance(as_tensor, torch.Tensor)
    np.testing.assert_array_equal(as_tensor.numpy(), expected)
    dask_array = pytest.importorskip("dask.array")
    lazy = loaded.transform(dask_array.from_array(source[:20], chunks=(7, 12))).compute()
    # each Dask chunk is the eager transform of its rows, byte for byte (the same rows through the same kernel) ...
    chunks = [loaded.transform(source[start : min(start + 7, 20)]) for start in range(0, 20, 7)]
    np.testing.assert_array_equal(lazy, np.concatenate(chunks))
    # ... while products of 7 rows and of 20 may add in another order (9 of 240 entries by 8.9e-16 on an AMD EPYC)
    assert_close_to_rounding(lazy, expected, terms=source.shape[1])
    np.testing.assert_array_equal(lazy[:, list(DEAD)], expected[:, list(DEAD)])  # held values: no product at all


def test_live_features_are_never_held_and_relative_routes_are_unchanged():
    source, target, _ = _labelled_pair(1)
    target[:, DEAD[1]] = 1e-5 * np.random.default_rng(3).normal(size=len(target))  # small but above 1e-6 of ~1
    bridge = Bridge(routes=["relative_centered"]).fit(source, target)
    assert bridge.dead_features_ == [DEAD[0]]
    np.testing.assert_array_equal(bridge.transform(source[:5]), bridge.estimator_.transform(source[:5]))
