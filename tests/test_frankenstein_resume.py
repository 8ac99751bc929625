"""A frankenstein run interrupted after any stage and resumed gives the numbers of an uninterrupted run; a
checkpoint of other settings is refused; the folder is gone once the results are written."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch

from latentstitch.experiments._checkpoint import Checkpoint

pytestmark = pytest.mark.slow

STAGES = ["figure2", "experiment5", "experiment6", "figure5", "figure7", "figure8", "experiment2"]


@pytest.fixture(scope="module")
def tiny():
    from latentstitch.experiments.frankenstein.config import QUICK

    return dataclasses.replace(
        QUICK,
        n_train=600,
        n_test=200,
        n_stitch=256,
        n_direct=64,
        base_epochs=1,
        layers=("bn2", "bn7"),
        stitch_epochs=1,
        sweep_epochs=1,
        stitch_batch=64,
        track_every=2,
        l1=(0.0, 300.0),
        alphas=(0.0, 0.3),
        lambdas=(0.0, 0.5, 1.0),
        mode_threshold=0.0,  # every random-init run kept, so Experiment 6 interpolates (from the checkpoint)
        cka_penalty_sweep=(0.3, QUICK.cka_penalty, 10.0),  # two sweep runs and two ranks: stages kept one by one
        ranks=(2, 4),
        width_layers=("bn2", "bn7"),
    )


@pytest.fixture(scope="module")
def one_thread():
    """One torch and BLAS thread, as ``reproduce`` runs (the numbers are bit-for-bit only at a fixed count)."""
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def uninterrupted(tiny, one_thread):
    from latentstitch.experiments.frankenstein import measure

    return _numbers(measure(tiny, progress=False))


@pytest.fixture(scope="module")
def checkpointed(tiny, one_thread, tmp_path_factory):
    """A finished run's checkpoint folder, and the numbers that run returned."""
    from latentstitch.experiments.frankenstein import measure

    folder = tmp_path_factory.mktemp("run") / "checkpoint"
    numbers = measure(tiny, False, Checkpoint(folder, _settings(tiny), resume=False, log=lambda _: None))
    return folder, _numbers(numbers)


def _settings(config):
    return {"reproduction": "frankenstein", **dataclasses.asdict(config)}


def _numbers(value):
    """The run's numbers as results.json holds them, without the wall-clock times (which differ run to run)."""
    if isinstance(value, dict):
        return {key: _numbers(item) for key, item in value.items() if key != "seconds"}
    if isinstance(value, (list, tuple)):
        return [_numbers(item) for item in value]
    return value


def test_checkpointed_run_equals_plain_run(checkpointed, uninterrupted):
    assert json.dumps(checkpointed[1], sort_keys=True) == json.dumps(uninterrupted, sort_keys=True)


@pytest.mark.parametrize("kept", [0, 2, 6])
def test_resumed_run_equals_uninterrupted(tmp_path, tiny, checkpointed, uninterrupted, kept):
    from latentstitch.experiments.frankenstein import measure

    folder = tmp_path / "checkpoint"
    shutil.copytree(checkpointed[0], folder)
    for stage in STAGES[kept:]:  # the run "stopped" after its first `kept` stages
        (folder / f"{stage}.json").unlink()
    logged = []
    resumed = Checkpoint(folder, _settings(tiny), resume=True, log=logged.append)
    again = measure(tiny, False, resumed)
    assert json.dumps(_numbers(again), sort_keys=True) == json.dumps(uninterrupted, sort_keys=True)
    assert set(STAGES[:kept]) <= set(resumed.resumed)
    assert any(name.startswith("base_") for name in resumed.resumed)  # base networks not trained again
    assert logged[0].startswith("resuming from")


@pytest.mark.parametrize("parts", ["figure2_seed*", "figure5_sweep_weight*", "figure7_*", "experiment2_width*"])
def test_a_run_stopped_inside_a_long_stage_resumes_where_it_stopped(tmp_path, tiny, checkpointed, uninterrupted, parts):
    """Figure 2 keeps each (direction, layer) as a stage, the CKA-penalty sweep each weight, Figure 7 each (layer,
    rank), Experiment 2 each (width, layer): a run stopped after the first of them trains only the rest again and
    gives the uninterrupted numbers."""
    from latentstitch.experiments.frankenstein import measure

    folder = tmp_path / "checkpoint"
    shutil.copytree(checkpointed[0], folder)
    for stage in [*STAGES, "figure5_sweep"]:
        (folder / f"{stage}.json").unlink()
    kept = sorted(path.stem for path in folder.glob(f"{parts}.json"))
    assert len(kept) >= 2
    for name in kept[1:]:
        (folder / f"{name}.json").unlink()
    resumed = Checkpoint(folder, _settings(tiny), resume=True, log=lambda _: None)
    again = measure(tiny, False, resumed)
    assert json.dumps(_numbers(again), sort_keys=True) == json.dumps(uninterrupted, sort_keys=True)
    assert kept[0] in resumed.resumed and not set(kept[1:]) & set(resumed.resumed)


def test_other_settings_refused(tmp_path, tiny):
    folder = tmp_path / "checkpoint"
    Checkpoint(folder, _settings(tiny), resume=False, log=lambda _: None)
    other = dataclasses.replace(tiny, stitch_epochs=2)
    with pytest.raises(ValueError, match=r"^resume: .* settings \(stitch_epochs differ\); start over without resume="):
        Checkpoint(folder, _settings(other), resume=True, log=lambda _: None)


def test_start_over_removes_old_stages(tmp_path, tiny):
    folder = tmp_path / "checkpoint"
    Checkpoint(folder, _settings(tiny), resume=False, log=lambda _: None).numbers("figure2", lambda: {"a": 1})
    logged = []
    fresh = Checkpoint(folder, _settings(tiny), resume=False, log=logged.append)
    assert not (folder / "figure2.json").exists()
    assert fresh.numbers("figure2", lambda: {"a": 2}) == {"a": 2}
    assert "starting over" in logged[0]
    fresh.finish()
    assert not folder.exists()


def test_damaged_stage_named(tmp_path, tiny):
    folder = tmp_path / "checkpoint"
    Checkpoint(folder, _settings(tiny), resume=False, log=lambda _: None)
    (folder / "figure2.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"^resume: .*figure2.json.* not valid JSON"):
        Checkpoint(folder, _settings(tiny), resume=True, log=lambda _: None).numbers("figure2", dict)


def test_cli_resume_only_for_resumable(capsys):
    from latentstitch.cli import main

    assert main(["reproduce", "word-embeddings", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--resume: word-embeddings keeps no checkpoint" in err and "frankenstein" in err


def test_cli_device_only_for_the_long_trainings(capsys):
    """--device names the reproductions it applies to, and a device this machine lacks is a one-line error."""
    from latentstitch.cli import main

    assert main(["reproduce", "word-embeddings", "--device", "cuda"]) == 2
    assert "--device: word-embeddings runs on the CPU only" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main(["reproduce", "frankenstein", "--quick", "--device", "cuda"]) == 2
        assert capsys.readouterr().err.startswith("latentstitch reproduce: error: --device:")


def test_random_layers_round_trip(tiny, one_thread):
    """Experiment 6 interpolates Experiment 5's trained random-init layers, kept as tensors: the layers rebuilt
    from the checkpoint are exactly the trained ones."""
    from latentstitch.experiments.frankenstein import fig6_init
    from latentstitch.experiments.frankenstein.context import Context
    from latentstitch.stitching import stitch

    context = Context(tiny, lambda _: None)
    model_a, model_b = context.pair()
    trained = {
        layer: [
            stitch(model_a, model_b, layer, layer)
            .initialize("random", example=context.probe, seed=10 + run)
            .stitching_layer
            for run in range(tiny.init_runs)
        ]
        for layer in tiny.init_layers
    }
    rebuilt = fig6_init.layers_from_tensors(context, fig6_init.layer_tensors(trained))
    for layer, modules in trained.items():
        for original, copy in zip(modules, rebuilt[layer], strict=True):
            assert type(copy) is type(original)
            for (name, value), (name_copy, value_copy) in zip(
                original.state_dict().items(), copy.state_dict().items(), strict=True
            ):
                assert name == name_copy and torch.equal(value, value_copy)


def test_run_time_counts_the_interrupted_runs_work(tmp_path, tiny):
    import time

    folder = tmp_path / "checkpoint"
    first = Checkpoint(folder, _settings(tiny), resume=False, log=lambda _: None)
    first.numbers("figure2", lambda: time.sleep(0.2) or {"a": 1})
    resumed = Checkpoint(folder, _settings(tiny), resume=True, log=lambda _: None)
    assert resumed.seconds() >= 0.2  # the report's run time is the whole run's, not the last session's
    assert resumed.numbers("figure2", dict) == {"a": 1}


def test_a_saved_run_drawn_again_keeps_its_setting_and_draws_the_sweep(tmp_path, tiny, checkpointed):
    """``render_saved`` redraws a run of hours from its results.json: the thread count is the run's (not this
    process's), and the CKA-penalty sweep gets its trade-off figure."""
    from latentstitch.experiments.frankenstein import measure, render, render_saved

    folder = tmp_path / "checkpoint"
    shutil.copytree(checkpointed[0], folder)
    numbers = measure(tiny, False, Checkpoint(folder, _settings(tiny), resume=True, log=lambda _: None))
    render(numbers, tiny, tmp_path, quick=True, seconds=None).write(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        again = render_saved(tmp_path / "results.json", tmp_path / "again")
    finally:
        torch.set_num_threads(threads)
    assert again.setting["threads"] == numbers["threads"] == 1
    assert (tmp_path / "again" / "fig5_sweep.png").stat().st_size > 0
    assert "Experiment 4: sweep of the CKA-penalty weight" in again.figures
