"""Inputs of the similarity API that used to give raw errors or warnings (issue 27): compare's measure options,
restored stream states, bootstrap_ci's seed / level / jackknife, resamples with a constant side, and read-only
inputs (memory maps, DataFrames) viewed without torch's non-writable warning and without a copy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from latentstitch import similarity as sim
from latentstitch._core.arrays import as_float_tensor


def _pair(n=30, p=5, q=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, p)), rng.normal(size=(n, q))


@pytest.mark.parametrize(
    "measures, error, message",
    [
        ({"linear_cka": 3}, TypeError, r"measures\['linear_cka'\]: expected a dict of keyword arguments"),
        ({"linear_cka": "k"}, TypeError, r"measures\['linear_cka'\]: expected a dict"),
        ({"mutual_knn": {"foo": 1}}, TypeError, r"foo: unexpected keyword argument for measure 'mutual_knn' .*\bk\b"),
        ("linear_cka", TypeError, r"measures: expected a list of measure names"),
        (["no_such"], ValueError, r"measure: unknown measure 'no_such'"),
    ],
)
def test_compare_names_the_measure_and_what_was_expected(measures, error, message):
    x, y = _pair()
    with pytest.raises(error, match=message):
        sim.compare(x, y, measures)


def test_compare_still_takes_names_and_options():
    x, y = _pair()
    result = sim.compare(x, y, {"mutual_knn": {"k": 5}, "linear_cka": {}})
    assert result["mutual_knn"] == pytest.approx(sim.mutual_knn(x, y, k=5))
    assert set(sim.compare(x, y, ("linear_cka", "rsa"))) == {"linear_cka", "rsa"}


@pytest.mark.parametrize(
    "stream",
    [sim.StreamingCKA(), sim.StreamingCKA(debiased=True), sim.StreamingR2(), sim.StreamingMinibatchCKA()],
    ids=["cka", "debiased", "r2", "minibatch"],
)
def test_a_restored_state_is_checked_and_round_trips(stream):
    x, y = _pair(40)
    stream.update(x, y)
    fresh = type(stream)(**({"debiased": True} if getattr(stream, "debiased", False) else {}))
    assert fresh.load_state_dict(stream.state_dict()).compute() == pytest.approx(stream.compute())
    with pytest.raises(ValueError, match=r"^state: missing key\(s\) .*; expected what state_dict\(\) returns"):
        type(stream)().load_state_dict({})
    with pytest.raises(ValueError, match=r"unknown key\(s\) bogus"):
        type(stream)().load_state_dict({**stream.state_dict(), "bogus": torch.zeros(1)})
    with pytest.raises(TypeError, match=r"^state: expected a dict of tensors"):
        type(stream)().load_state_dict([1, 2])


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"seed": -1}, ValueError, r"^seed: expected an integer >= 0"),
        ({"seed": 2**40}, ValueError, r"^seed: expected an integer <= 4294967295"),
        ({"seed": 1.5}, TypeError, r"^seed: expected an integer"),
        ({"level": "0.9"}, TypeError, r"^level: expected a number"),
        ({"level": 1.0}, ValueError, r"^level: expected a finite number in \(0, 1\)"),
        ({"interval": "bca", "jackknife": 0}, ValueError, r"^jackknife: expected an integer >= 2"),
        ({"interval": "bca", "jackknife": 1}, ValueError, r"^jackknife: expected an integer >= 2"),
    ],
)
def test_bootstrap_ci_names_a_bad_argument(options, error, message):
    x, y = _pair()
    with pytest.raises(error, match=message):
        sim.bootstrap_ci(x, y, n_boot=5, **options)


def test_resamples_with_a_constant_side_are_left_out_and_said():
    # 5 samples: about 1 resample in 600 draws the same row 5 times
    x, y = _pair(5, 3, 3)
    with pytest.warns(sim.SmallSampleWarning, match=r"x, y: \d+ of 3000 bootstrap resamples drew rows that are all"):
        result = sim.bootstrap_ci(x, y, n_boot=3000, seed=1)
    assert np.isfinite(result.replicates).all() and 0 < len(result.replicates) < 3000
    assert np.isfinite([result.low, result.high]).all()


def test_deconfounded_cka_needs_three_samples_not_a_confounder_excuse():
    x, y = _pair(2)
    with pytest.raises(ValueError, match=r"^x, y: deconfounded CKA needs at least 3 samples"):
        sim.deconfounded_cka(x, y, confounder=np.ones((2, 1)) * [[1.0], [2.0]])


# --- read-only inputs -----------------------------------------------------------------------------------------------


def test_a_read_only_memmap_is_viewed_not_copied_and_no_warning(tmp_path):
    data = np.random.default_rng(0).normal(size=(50, 4))
    np.save(tmp_path / "x.npy", data)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    assert not mapped.flags.writeable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = as_float_tensor(mapped, "x")
        value = sim.cka(mapped, data)
    assert tensor.data_ptr() == mapped.ctypes.data  # the file's pages, not a copy
    assert value == pytest.approx(1.0)


def test_a_locked_array_and_a_dataframe_give_no_warning():
    pandas = pytest.importorskip("pandas")
    x, y = _pair()
    locked = x.copy()
    locked.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sim.cka(locked, y) == pytest.approx(sim.cka(x, y))
        assert sim.cka(pandas.DataFrame(x), y) == pytest.approx(sim.cka(x, y))
    assert as_float_tensor(locked, "x").data_ptr() == locked.ctypes.data
