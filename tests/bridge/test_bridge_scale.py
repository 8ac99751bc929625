"""Anchors of extreme magnitude (1e+200, 1e-200 in float64): a bridge and a residual adapter give the answer they give
at ordinary magnitudes, scaled, instead of overflowing into another route (or an inf, a NaN, a false 0)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from latentstitch.bridge import Bridge
from latentstitch.bridge._scale import check_scale
from latentstitch.stitching import ResidualAdapter

SCALES = [1e200, 1e-200]


def _pair(n=40, p=6, q=5, seed=2):
    rng = np.random.default_rng(seed)
    source = rng.normal(size=(n, p)) * np.linspace(0.5, 2.0, p) + 1.0
    target = source @ rng.normal(size=(p, q)) + 0.3 * rng.normal(size=(n, q))
    return source, target


@pytest.mark.parametrize("scale", SCALES)
def test_a_bridge_of_scaled_anchors_is_the_scaled_bridge(scale, tmp_path):
    source, target = _pair()
    plain = Bridge(cv=2).fit(source, target)
    scaled = Bridge(cv=2).fit(torch.tensor(source * scale), torch.tensor(target * scale))
    assert scaled.route_ == plain.route_ and scaled.family_ == "translation"
    assert [r.mrr[0] for r in scaled.routes_] == pytest.approx([r.mrr[0] for r in plain.routes_])
    assert scaled.source_scale_ != 1.0 and scaled.target_scale_ != 1.0
    assert (plain.source_scale_, plain.target_scale_) == (1.0, 1.0)
    out = scaled.transform(torch.tensor(source * scale)).numpy()
    np.testing.assert_allclose(out / scale, plain.transform(source), rtol=1e-9, atol=1e-9)
    scaled.save(tmp_path / "bridge.safetensors")
    loaded = Bridge.load(tmp_path / "bridge.safetensors")
    assert (loaded.source_scale_, loaded.target_scale_) == (scaled.source_scale_, scaled.target_scale_)
    np.testing.assert_array_equal(loaded.transform(torch.tensor(source * scale)).numpy(), out)


@pytest.mark.parametrize("scale", SCALES)
def test_a_relative_bridge_of_scaled_anchors_gives_the_same_relative_vectors(scale):
    source, target = _pair()
    plain = Bridge(routes=["relative"], cv=2).fit(source, target)
    scaled = Bridge(routes=["relative"], cv=2).fit(source * scale, target * scale)
    np.testing.assert_allclose(scaled.transform(source * scale), plain.transform(source), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        scaled.transform_target(target * scale), plain.transform_target(target), rtol=1e-9, atol=1e-12
    )


def test_a_head_reads_bridged_vectors_at_the_inputs_scale():
    source, target = _pair()
    seen = []

    def head(v):
        seen.append(float(np.abs(np.asarray(v)).max()))
        return np.asarray(v)[:, :3].argmax(axis=1)

    plain = Bridge(cv=2).fit(source, target, head=head)
    scaled = Bridge(cv=2).fit(source * 1e200, target * 1e200, head=head)
    assert min(seen[len(seen) // 2 :]) > 1e190  # the second fit's head calls: vectors at the input's scale
    assert scaled.route_ == plain.route_
    assert [r.agreement[0] for r in scaled.routes_] == pytest.approx([r.agreement[0] for r in plain.routes_])


SIDE_SCALES = [1e-30, 1e-10, 1e10, 1e30]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("side", ["source", "target"])
@pytest.mark.parametrize("scale", SIDE_SCALES)
def test_one_side_scaled_alone_gives_the_same_map_up_to_its_scale(scale, side, dtype):
    """Issue 41: a source scaled alone by 1e30 chose another route and bridged -0.29 where the unscaled fit gave
    -1.13 (one factor for both sides pushed the other side to 1e-31). Each side now has its own power of two."""
    source, target = _pair(n=60)
    new = source[:10] * 0.9 + 0.1
    source, target, new = source.astype(dtype), target.astype(dtype), new.astype(dtype)
    plain = Bridge(cv=3).fit(source, target)
    if side == "source":
        scaled = Bridge(cv=3).fit(source * dtype(scale), target)
        out = scaled.transform(new * dtype(scale))
    else:
        scaled = Bridge(cv=3).fit(source, target * dtype(scale))
        out = scaled.transform(new) / dtype(scale)
    assert scaled.route_ == plain.route_
    tolerance = 1e-9 if dtype is np.float64 else 1e-4
    np.testing.assert_allclose(out, plain.transform(new), rtol=tolerance, atol=tolerance * np.abs(target).max())


def test_sides_far_apart_are_each_rescaled_and_fitted():
    source, target = _pair()
    plain = Bridge(cv=2).fit(source, target)
    apart = Bridge(cv=2).fit(source * 1e200, target * 1e-200)
    assert apart.source_scale_ < 1.0 < apart.target_scale_
    assert apart.route_ == plain.route_
    np.testing.assert_allclose(apart.transform(source * 1e200) * 1e200, plain.transform(source), rtol=1e-9)


def test_a_bridge_saved_with_one_scale_for_both_sides_loads_with_it(tmp_path):
    source, target = _pair()
    target = target / np.abs(target).max() * np.abs(source).max()  # one power of two suits both sides
    scaled = Bridge(cv=2).fit(source * 1e200, target * 1e200)
    assert scaled.source_scale_ == scaled.target_scale_ != 1.0
    path = tmp_path / "bridge.safetensors"
    scaled.save(path)
    with safe_open(str(path), "pt") as handle:
        header = json.loads(handle.metadata()["latentstitch"])
    learned = header["learned"]
    learned["scale_"] = learned.pop("source_scale_")
    del learned["target_scale_"]
    old = tmp_path / "old.safetensors"
    save_file(load_file(str(path)), str(old), metadata={"latentstitch": json.dumps(header)})
    loaded = Bridge.load(old)
    assert loaded.source_scale_ == loaded.target_scale_ == scaled.source_scale_ and "scale_" not in vars(loaded)
    np.testing.assert_array_equal(loaded.transform(source * 1e200), scaled.transform(source * 1e200))


@pytest.mark.parametrize("value", [3.0, 0.0, -2.0, float("nan"), True, "1"])
def test_a_loaded_scale_must_be_a_positive_power_of_two(value):
    with pytest.raises(ValueError, match="scale_"):
        check_scale(value)


@pytest.mark.parametrize("scale", SCALES)
def test_a_residual_adapter_of_scaled_anchors_is_the_scaled_adapter(scale):
    source, target = _pair()
    plain = ResidualAdapter(hidden=8, epochs=5).fit(source, target)
    scaled = ResidualAdapter(hidden=8, epochs=5).fit(torch.tensor(source * scale), torch.tensor(target * scale))
    # the linear part is exact up to the float32 rounding of the training data
    np.testing.assert_allclose(scaled.coef_.numpy(), plain.coef_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(scaled.intercept_.numpy() / scale, plain.intercept_, rtol=1e-4, atol=1e-5)
    out = scaled.transform(torch.tensor(source * scale)).numpy() / scale
    reference = plain.transform(source)
    assert np.isfinite(out).all() and np.abs(out).min() > 0
    # the MLP part is Adam's fit to the rescaled targets: close to, not equal to, the unscaled fit
    assert np.abs(out - reference).max() < 0.1 * np.abs(reference).max()
