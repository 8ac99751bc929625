"""Stitching nulls: the same stitch fitted from a shuffled sender or from noise with the sender's covariance reaches
far less than the real one where the networks share a representation, and is evaluated like it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits
from torch import nn

from latentstitch.models import tiny10
from latentstitch.stitching import (
    LeastSquares,
    TaskLoss,
    fit_direct,
    fit_direct_null,
    stitch,
    stitch_metrics,
    stitch_nulls,
    sweep,
)
from latentstitch.stitching._nulls import SenderStatistics, null_sender


@pytest.fixture(autouse=True)
def single_threaded(one_thread):
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def trained_mlps():
    """Two MLPs trained from different seeds on 4 well-separated Gaussian classes (a shared task)."""
    rng = np.random.default_rng(0)
    centres = 3 * rng.standard_normal((4, 8))
    labels = torch.from_numpy(rng.integers(0, 4, 400))
    x = torch.from_numpy(centres[labels.numpy()] + rng.standard_normal((400, 8))).float()
    models = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # module scope runs before the one-thread fixture: a second thread spin-waits here
    for seed in (0, 1):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 4))
        optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
        with threadpool_limits(limits=1):
            for _ in range(60):
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(x), labels).backward()
                optimizer.step()
        assert (model(x).argmax(1) == labels).float().mean() > 0.95  # both learnt the task
        models.append(model.eval())
    torch.set_num_threads(threads)
    return models[0], models[1], x, labels


def test_real_stitch_beats_its_nulls(trained_mlps):
    model_a, model_b, x, labels = trained_mlps
    real = stitch(model_a, model_b, "3", "3", LeastSquares(), data=x)
    real_metrics = stitch_metrics(real, (x, labels))
    nulls = stitch_nulls(model_a, model_b, "3", "3", LeastSquares(), data=(x, labels), eval_data=(x, labels))
    assert real_metrics["relative_accuracy"] > 0.95
    for null in ("shuffled", "noise"):
        # an affine map fitted to unrelated pairs predicts about B's mean activation: near one class
        assert nulls[null]["relative_accuracy"] < 0.5, null
        assert set(nulls[null]) == set(real_metrics)


def test_shuffled_null_pairs_other_inputs(trained_mlps):
    model_a, model_b, x, _ = trained_mlps
    null = fit_direct_null(LeastSquares(), model_a, model_b, "3", "3", x, "shuffled", seed=3, batch_size=64)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        acts_a, acts_b = model_a[:4](x[order]), model_b[:4](x)
    expected = LeastSquares().fit(acts_a, acts_b)
    np.testing.assert_allclose(null.coef_, expected.coef_, atol=1e-4)  # same fit as on explicitly permuted pairs
    real = fit_direct(LeastSquares(), model_a, model_b, "3", "3", x)
    assert (real.coef_ - null.coef_).abs().max() > 0.1


def test_noise_null_has_the_senders_moments(trained_mlps):
    model_a, _, x, _ = trained_mlps
    statistics = SenderStatistics(model_a, "3", x, batch_size=100)
    with torch.no_grad():
        acts = model_a[:4](x)
    noise = statistics.noise_like(acts.repeat(20, 1), torch.Generator().manual_seed(0))
    np.testing.assert_allclose(noise.mean(0), acts.mean(0), atol=0.1 * acts.std(0).max())
    np.testing.assert_allclose(np.cov(noise.T.numpy()), np.cov(acts.T.numpy()), atol=0.1 * acts.var(0).max())


def test_null_sender_is_removed_after_training(trained_mlps):
    model_a, model_b, x, _ = trained_mlps
    stitched = stitch(model_a, model_b, "3", "3", LeastSquares(), data=x)
    real = stitched.activation_a(x[:5])
    with null_sender(stitched, "shuffled", seed=0):
        shuffled = stitched.activation_a(x[:5])
    assert not torch.equal(real, shuffled) and torch.equal(torch.sort(real, 0).values, torch.sort(shuffled, 0).values)
    assert torch.equal(stitched.activation_a(x[:5]), real)


def test_sweep_reports_nulls_beside_each_method():
    torch.manual_seed(0)
    model_a, model_b = tiny10(0.5).eval(), tiny10(0.5).eval()
    x = torch.rand(24, 1, 28, 28)
    labels = torch.randint(0, 10, (24,), generator=torch.Generator().manual_seed(1))
    result = sweep(
        model_a,
        model_b,
        ["bn3"],
        {"LS": LeastSquares(), "task loss": TaskLoss(epochs=1, batch_size=8)},
        data=(x, labels),
        eval_data=(x, labels),
        nulls=True,
        progress=False,
    )
    for row in result.rows:
        for null in ("shuffled", "noise"):
            assert 0 <= row[f"{null}_agreement"] <= 1 and f"{null}_relative_accuracy" in row
    assert "| bn3 |" in result.to_markdown("shuffled_agreement")
    with pytest.raises(TypeError, match="need the data in memory"):
        stitch_nulls(model_a, model_b, "bn3", "bn3", LeastSquares(), data=[x[:8]], eval_data=(x, labels))
