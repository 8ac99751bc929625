"""latentstitch.alignment's estimators are Bridge routes: named, cross-validated like the others, saved and loaded."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic_pairs import rotated_scaled_shifted

from latentstitch.bridge import ROUTES, Bridge

PAIRED = ("inverse_relative", "generalized_procrustes", "functional_map")


def _spec(name):
    return ROUTES[name].family, ROUTES[name].description, ROUTES[name].auto


def _route(bridge, name):
    return next(row for row in bridge.routes_ if row.route == name)


def test_the_alignment_routes_are_registered_and_not_tried_by_auto():
    for name in (*PAIRED, "unpaired"):
        assert ROUTES[name].family == "translation" and not ROUTES[name].auto


@pytest.mark.parametrize("seed", (0, 1, 2))
def test_paired_alignment_routes_find_every_partner_of_a_rotated_scaled_shifted_space(seed):
    source, target, image = rotated_scaled_shifted(seed)
    bridge = Bridge(routes=list(PAIRED)).fit(source, target)
    for name in PAIRED:
        row = _route(bridge, name)
        assert row.error is None, row.error
        # every one of these maps contains the truth (rotation + scale + shift): held-out partners are found
        assert row.top1[0] >= 0.95 and row.clearly_better, (name, row.top1)
    new = np.random.default_rng(seed + 100).normal(size=(20, source.shape[1])).astype(np.float32)
    error = np.linalg.norm(bridge.transform(new) - image(new), axis=1) / np.linalg.norm(image(new), axis=1)
    assert error.mean() < 0.1


@pytest.mark.parametrize("name", (*PAIRED, "unpaired"))
def test_a_bridge_through_an_alignment_route_saves_and_loads(name, tmp_path):
    source, target, _ = rotated_scaled_shifted(0)
    bridge = Bridge(routes=[name], cv=3).fit(source, target)
    bridge.save(tmp_path / "bridge.safetensors")
    loaded = Bridge.load(tmp_path / "bridge.safetensors")
    new = np.random.default_rng(5).normal(size=(7, source.shape[1])).astype(np.float32)
    np.testing.assert_array_equal(loaded.transform(new), bridge.transform(new))
    assert loaded.route_ == name
    assert loaded.get_params() == bridge.get_params()
