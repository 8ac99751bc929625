"""The graph proxy's numbers: the per-run correlations, their bootstrap interval over runs, the grid's optimisers."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from latentstitch.experiments.latent_similarity_proxy_graph import correlations
from latentstitch.experiments.latent_similarity_proxy_graph.correlations import bootstrap_interval
from latentstitch.experiments.latent_similarity_proxy_graph.grid import grid, make_optimizer


def _run(optimizer, lr, accuracy, similarity):
    return {"config": {"optimizer": optimizer, "lr": lr}, "val_accuracy": accuracy, "similarity": similarity}


def test_correlations_per_run_across_runs_and_by_optimizer():
    rng = np.random.default_rng(0)
    runs = []
    for i in range(6):
        sim = np.sort(rng.random(8))
        runs.append(_run("sgd" if i % 2 else "adam", 0.01, list(0.2 + 0.7 * sim), list(sim)))  # r = 1 in each run
    runs.append(_run("sgd", 0.02, [0.5, 0.5, 0.5], [0.1, 0.2, 0.3]))  # constant accuracy: no per-run r
    found = correlations(runs, resamples=200)
    assert found["per_run"] == pytest.approx([1.0] * 6)
    assert sorted(found["by_optimizer"]) == ["adam 0.01", "sgd 0.01"]
    assert found["mean_per_run"] == pytest.approx(1.0)
    assert found["mean_per_run_interval"] == pytest.approx((1.0, 1.0))
    finals = np.array([[r["val_accuracy"][-1], r["similarity"][-1]] for r in runs])
    assert found["across_runs"] == pytest.approx(np.corrcoef(finals.T)[0, 1])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-1, 1), min_size=2, max_size=40), st.integers(0, 2**31))
def test_bootstrap_interval_holds_the_mean_within_the_range_of_the_values(values, seed):
    low, high = bootstrap_interval(values, 500, seed=seed)
    assert min(values) - 1e-12 <= low <= high <= max(values) + 1e-12
    # the mean of a resample of n values can always fall on either side of the sample mean: the interval of 500
    # resamples covers it unless the values are (nearly) all equal
    if np.ptp(values) > 1e-9:
        assert low <= np.mean(values) + 1e-12 and np.mean(values) - 1e-12 <= high


def test_bootstrap_interval_narrows_like_one_over_root_n():
    rng = np.random.default_rng(1)
    widths = [np.subtract(*bootstrap_interval(rng.normal(0.9, 0.1, n), 2000)[::-1]) for n in (25, 400)]
    # 2 * 1.96 * 0.1 / sqrt(n): 0.078 and 0.020; their ratio 4, within the sampling spread of the std and the draws
    assert widths[0] == pytest.approx(0.078, rel=0.3) and widths[1] == pytest.approx(0.020, rel=0.3)


def test_grid_is_every_combination_and_optimizers_are_the_papers():
    configs = grid({"optimizer": ("adam", "sgd"), "lr": (0.01, 0.02)})
    assert len(configs) == 4 and configs[0] == {"optimizer": "adam", "lr": 0.01}
    parameters = [torch.nn.Parameter(torch.zeros(2))]
    sgd = make_optimizer("sgd", 0.02, parameters)
    assert isinstance(sgd, torch.optim.SGD) and sgd.defaults["lr"] == 0.02 and sgd.defaults["momentum"] == 0
    assert make_optimizer("sgd", 0.01, parameters, momentum=0.9).defaults["momentum"] == 0.9  # the probe's variant
    assert isinstance(make_optimizer("adam", 0.01, parameters), torch.optim.Adam)
    with pytest.raises(ValueError, match="optimizer: expected 'adam' or 'sgd', got 'rmsprop'"):
        make_optimizer("rmsprop", 0.01, parameters)
