"""Streaming indices equal their one-shot functions; accumulators merge and round-trip through tensors. The chunks
are tensors on the ``--device`` (and, with ``device=``, host chunks sent to it)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from safetensors.torch import load, save

from latentstitch import similarity as sim
from latentstitch.similarity.measures._cka_statistics import CKAStatistics, RowNormSums

pytestmark = pytest.mark.kernels  # a stream of chunks against one pass

STREAMS = [
    (lambda: sim.StreamingCKA(), sim.cka),
    (lambda: sim.StreamingCKA(debiased=True), lambda x, y: sim.cka(x, y, debiased=True)),
    (sim.StreamingR2, sim.r2_linear),
    (lambda: sim.StreamingCCA("mean"), sim.cca),
    (lambda: sim.StreamingCCA("r2"), lambda x, y: sim.cca(x, y, reduce="r2")),
    (sim.StreamingSVCCA, sim.svcca),
    (sim.StreamingPWCCA, sim.pwcca),
    (lambda: sim.StreamingProcrustes("procrustes"), sim.procrustes_distance),
    (lambda: sim.StreamingProcrustes("angular"), sim.shape_metric_angular),
    (sim.StreamingGULP, sim.gulp),
    (lambda: sim.StreamingGULP(ridge=0.1), lambda x, y: sim.gulp(x, y, ridge=0.1)),
    (sim.StreamingENSD, sim.ensd),
    (sim.StreamingEigenspaceOverlap, sim.eigenspace_overlap),
    (sim.StreamingCorrelationMatch, sim.correlation_match),
    (lambda: sim.StreamingCorrelationMatch(soft=True), lambda x, y: sim.correlation_match(x, y, soft=True)),
    (sim.StreamingPermutation, sim.permutation_metric),
    (lambda: sim.StreamingPermutation("euclidean"), lambda x, y: sim.permutation_metric(x, y, score="euclidean")),
]
IDS = ["cka", "debiased_cka", "r2", "cca", "r2_cca", "svcca", "pwcca", "procrustes", "angular"]
IDS += ["gulp", "gulp_ridge", "ensd", "eigenspace_overlap", "correlation_match", "soft_correlation_match"]
IDS += ["permutation", "permutation_euclidean"]


def drifting_data(n=300, p=12, q=9, seed=0):
    """Rows whose mean drifts far from the first chunk's, so the accumulators' shifts are really exercised."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, p)) * np.linspace(0.5, 3, p) + np.linspace(0, 40, n)[:, None]
    y = np.tanh(x @ rng.standard_normal((p, q)) / 30) * 5 + 0.3 * rng.standard_normal((n, q)) + 100.0
    return x, y


CHUNKS = [0, 7, 40, 41, 150, 300]  # uneven, including a one-row chunk


@pytest.mark.parametrize(("make", "one_shot"), STREAMS, ids=IDS)
def test_stream_equals_one_shot(make, one_shot, on):
    x, y = on(*drifting_data())
    stream = make()
    for start, stop in itertools.pairwise(CHUNKS):
        stream.update(x[start:stop], y[start:stop])
    assert stream.count == x.shape[0]
    assert stream.compute() == pytest.approx(float(one_shot(x, y)), abs=1e-10)


@pytest.mark.parametrize(("make", "one_shot"), STREAMS, ids=IDS)
def test_merge_equals_one_shot(make, one_shot, on):
    x, y = on(*drifting_data(seed=1))
    left, right = make(), make()
    left.update(x[:110], y[:110])
    right.update(x[110:], y[110:])
    assert left.merge(right).compute() == pytest.approx(float(one_shot(x, y)), abs=1e-10)
    assert right.merge(left).compute() == pytest.approx(float(one_shot(x, y)), abs=1e-10)
    assert left.count == 110  # merge leaves its operands unchanged


@pytest.mark.parametrize(("make", "one_shot"), STREAMS, ids=IDS)
def test_state_dict_round_trip_through_safetensors(make, one_shot):
    x, y = drifting_data(seed=2)
    stream = make().update(x[:200], y[:200])
    restored = make().load_state_dict(load(save(stream.state_dict())))
    restored.update(x[200:], y[200:])
    assert restored.compute() == pytest.approx(one_shot(x, y), abs=1e-10)


def test_float32_stream_matches_float64_one_shot(on):
    x, y = drifting_data(n=2000, p=20, q=16)
    stream = sim.StreamingCKA(debiased=True)
    for start in range(0, 2000, 500):
        stream.update(*on(x[start : start + 500].astype(np.float32), y[start : start + 500].astype(np.float32)))
    assert stream.compute() == pytest.approx(sim.cka(x, y, debiased=True), abs=1e-5)


@pytest.mark.parametrize("debiased", [False, True])
def test_host_chunks_sent_to_the_device_equal_one_shot(debiased, device):
    """``device=``: host chunks (pinned where a GPU is the target) are copied to it on a side stream."""
    x, y = drifting_data(n=900, p=12, q=9)
    stream = sim.StreamingCKA(debiased=debiased, device=device)
    for start in range(0, 900, 128):
        cx, cy = torch.from_numpy(x[start : start + 128]), torch.from_numpy(y[start : start + 128])
        if device.type == "cuda":
            cx, cy = cx.pin_memory(), cy.pin_memory()
        stream.update(cx, cy)
    assert stream.stats.moments.aa.device.type == device.type
    assert stream.compute() == pytest.approx(sim.cka(x, y, debiased=debiased), abs=1e-10)


def test_a_bad_chunk_is_reported_with_its_row_of_the_stream(on, monkeypatch):
    """On a GPU the NaN/inf check of each chunk is read when the result is asked for (forced here on any device):
    the error still names the first bad row, counted over the whole stream."""
    monkeypatch.setattr("latentstitch._core.device.DEFER_ON_CPU", True)
    x, y = drifting_data(n=120)
    y[75, 2] = np.nan
    x[101, 0] = np.inf
    stream = sim.StreamingCKA()
    for start in range(0, 120, 50):
        stream.update(*on(x[start : start + 50], y[start : start + 50]))  # no error yet: nothing waits
    with pytest.raises(ValueError, match=r"y: contains NaN or inf \(first at row 75\)"):
        stream.compute()


def test_row_norm_sums_move_exactly_to_a_new_shift():
    rng = np.random.default_rng(3)
    a, b = torch.from_numpy(rng.standard_normal((50, 4)) + 5), torch.from_numpy(rng.standard_normal((50, 3)) - 2)
    stats = CKAStatistics(debiased=True).update(a, b)
    delta_a, delta_b = torch.from_numpy(rng.standard_normal(4)), torch.from_numpy(rng.standard_normal(3))
    moved = stats.row_norms.moved(stats.moments, delta_a, delta_b).values
    direct = RowNormSums()
    direct.add(a - (stats.moments.shift_a + delta_a), b - (stats.moments.shift_b + delta_b))
    for key in RowNormSums.FIELDS:
        torch.testing.assert_close(moved[key], direct.values[key], rtol=1e-10, atol=1e-8)


def test_minibatch_stream_equals_function():
    x, y = drifting_data(n=100)
    stream = sim.StreamingMinibatchCKA()
    for start in range(0, 100, 25):
        stream.update(x[start : start + 25], y[start : start + 25])
    assert stream.compute() == pytest.approx(sim.minibatch_cka(x, y, batch_size=25), abs=1e-12)
    half = sim.StreamingMinibatchCKA().update(x[:25], y[:25]).update(x[25:50], y[25:50])
    other = sim.StreamingMinibatchCKA().update(x[50:75], y[50:75]).update(x[75:], y[75:])
    assert half.merge(other).compute() == pytest.approx(stream.compute(), abs=1e-12)
    restored = sim.StreamingMinibatchCKA().load_state_dict(load(save(stream.state_dict())))
    assert restored.compute() == stream.compute() and restored.batches == 4


def test_minibatch_merges_a_short_remainder():
    x, y = drifting_data(n=50)
    # 50 = 16 + 16 + 18: the 2-row remainder joins the last batch.
    stream = sim.StreamingMinibatchCKA().update(x[:16], y[:16]).update(x[16:32], y[16:32]).update(x[32:], y[32:])
    assert sim.minibatch_cka(x, y, batch_size=16) == pytest.approx(stream.compute(), abs=1e-12)


def test_streaming_errors_are_clear():
    with pytest.raises(ValueError, match="at least 4 samples; 3 seen"):
        sim.StreamingCKA(debiased=True).update(np.ones((3, 2)), np.ones((3, 2))).compute()
    stream = sim.StreamingCKA().update(np.random.default_rng(0).standard_normal((5, 3)), np.ones((5, 2)))
    with pytest.raises(sim.ZeroVarianceError, match="y: has zero variance"):
        stream.compute()
    with pytest.raises(ValueError, match="chunk widths"):
        stream.update(np.zeros((2, 4)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="per batch"):
        sim.StreamingMinibatchCKA().update(np.zeros((3, 2)), np.zeros((3, 2)))
    with pytest.raises(TypeError, match="StreamingCKA"):
        sim.StreamingCKA().merge(sim.StreamingR2())
