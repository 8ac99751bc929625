"""ae-stitching interrupted after a stage and resumed gives the errors and reconstructions of an uninterrupted run."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, replace

import pytest
import torch

from latentstitch.experiments._checkpoint import Checkpoint

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def setup():
    from threadpoolctl import threadpool_limits

    from latentstitch.experiments._image_tasks import load_image_task
    from latentstitch.experiments.ae_stitching import KINDS, Config
    from latentstitch.experiments.ae_stitching.training import mean_image_mse

    config = Config(seeds=(0, 1), batch_size=32, sizes={"mnist": (256, 64, 1)}, anchors=20, width=0.25, kinds=KINDS)
    tasks = {"mnist": load_image_task("mnist", n_train=256, n_test=64)}
    baselines = {"mnist": mean_image_mse(tasks["mnist"])}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-for-bit only at a fixed thread count, as reproduce runs (one thread)
    with threadpool_limits(limits=1):
        yield config, tasks, baselines
    torch.set_num_threads(threads)


def _same(first, second) -> None:
    (mse_a, samples_a), (mse_b, samples_b) = first, second
    assert json.dumps(mse_a, sort_keys=True) == json.dumps(mse_b, sort_keys=True)
    assert samples_a.keys() == samples_b.keys()
    for key in samples_a:
        assert samples_a[key].keys() == samples_b[key].keys()
        for name in samples_a[key]:
            assert torch.equal(samples_a[key][name], samples_b[key][name]), (key, name)


def test_resumed_run_equals_uninterrupted(setup, tmp_path):
    from latentstitch.experiments.ae_stitching import measure

    config, tasks, baselines = setup
    plain = measure(config, tasks, baselines, False)
    folder = tmp_path / "checkpoint"
    settings = {"reproduction": "ae-stitching", **asdict(config)}
    _same(plain, measure(config, tasks, baselines, False, Checkpoint(folder, settings, resume=False, log=print)))
    stages = [f"mnist_{kind}_{latent}" for kind, latent in config.kinds]
    for kept in (1, 3):
        copy = tmp_path / f"stopped_after_{kept}"
        shutil.copytree(folder, copy)
        for stage in stages[kept:]:  # the run "stopped" after its first `kept` stages
            (copy / f"{stage}.json").unlink()
            (copy / f"{stage}_reconstructions.safetensors").unlink()
        resumed = Checkpoint(copy, settings, resume=True, log=lambda _: None)
        _same(plain, measure(config, tasks, baselines, False, resumed))
        assert set(stages[:kept]) <= set(resumed.resumed)


def test_lost_reconstructions_named(setup, tmp_path):
    from latentstitch.experiments.ae_stitching import measure

    config, tasks, baselines = setup
    config = replace(config, kinds=config.kinds[:1])
    folder = tmp_path / "checkpoint"
    measure(config, tasks, baselines, False, Checkpoint(folder, asdict(config), resume=False, log=lambda _: None))
    (folder / "mnist_AE_absolute_reconstructions.safetensors").unlink()
    with pytest.raises(ValueError, match=r"^resume: .* lacks mnist_AE_absolute_reconstructions"):
        measure(config, tasks, baselines, False, Checkpoint(folder, asdict(config), resume=True, log=lambda _: None))
