"""The training loop: seeding, accumulation, forward-only batches, logging and safetensors checkpoints."""

import json

import pytest
import torch
from torch import nn

from latentstitch.models import LatentClassifier
from latentstitch.training import (
    RandomBatchSampler,
    TensorBatches,
    classification_loss,
    fit,
    load_checkpoint,
    save_checkpoint,
)


def toy_data(n=96, seed=0):
    generator = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    x = torch.randn(n, 6, generator=generator) + 2 * nn.functional.one_hot(y, 6).float()
    return x, y


def make_model(seed, relative=True):
    torch.manual_seed(seed)
    x, _ = toy_data()
    encoder = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 8))
    return LatentClassifier(encoder, 8, 3, anchor_inputs=x[:10] if relative else None)


def run(seed, epochs=3, **options):
    x, y = toy_data()
    model = make_model(seed)
    batches = TensorBatches((x, y), RandomBatchSampler(len(x), 16, seed=seed))
    history = fit(model, classification_loss, batches, epochs=epochs, seed=seed, progress=False, **options)
    return model, history


@pytest.mark.usefixtures("one_thread")
def test_same_seed_gives_identical_losses_and_weights():
    model_a, history_a = run(0)
    model_b, history_b = run(0)
    _, history_c = run(1)
    assert [r["loss"] for r in history_a] == [r["loss"] for r in history_b]
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert [r["loss"] for r in history_a] != [r["loss"] for r in history_c]
    assert history_a[-1]["loss"] < history_a[0]["loss"]


def test_history_records_weighted_means_steps_and_evaluation(tmp_path):
    x, y = toy_data()
    log = tmp_path / "logs" / "metrics.jsonl"
    _, history = run(
        0, epochs=2, log_path=log, evaluate=lambda m: {"val_accuracy": (m(x).argmax(1) == y).float().mean()}
    )
    assert [r["epoch"] for r in history] == [0, 1]
    assert [r["step"] for r in history] == [6, 12]  # 96 samples / 16 per batch
    assert {"loss", "accuracy", "val_accuracy", "lr", "seconds"} <= set(history[0])
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert logged == history


def test_accumulated_gradients_equal_one_big_batch():
    x, y = toy_data(32)
    torch.manual_seed(0)
    model_a = nn.Linear(6, 3)
    model_b = nn.Linear(6, 3)
    model_b.load_state_dict(model_a.state_dict())
    halves = [(x[:16], y[:16]), (x[16:], y[16:])]
    fit(
        model_a,
        classification_loss,
        halves,
        epochs=1,
        accumulate=2,
        optimizer=torch.optim.SGD(model_a.parameters(), lr=0.5),
        progress=False,
    )
    fit(
        model_b,
        classification_loss,
        [(x, y)],
        epochs=1,
        optimizer=torch.optim.SGD(model_b.parameters(), lr=0.5),
        progress=False,
    )
    torch.testing.assert_close(model_a.weight, model_b.weight)
    torch.testing.assert_close(model_a.bias, model_b.bias)


def test_forward_only_batches_take_no_step_and_are_not_averaged():
    x, y = toy_data(32)
    model = nn.Linear(6, 3)
    before = model.weight.detach().clone()
    with torch.no_grad():
        first_loss = nn.functional.cross_entropy(model(x[:8]), y[:8]).item()
    seen = []

    def only_first(model, batch):
        seen.append(len(batch[0]))
        return classification_loss(model, batch) if len(seen) == 1 else None

    history = fit(model, only_first, [(x[:8], y[:8]), (x, y)], epochs=1, progress=False)
    assert history[0]["step"] == 1 and seen == [8, 32]
    assert history[0]["loss"] == pytest.approx(first_loss)  # the 32-sample forward-only batch is not averaged in
    assert not torch.equal(model.weight, before)
    history = fit(nn.Linear(6, 3), lambda m, b: None, [(x, y)], epochs=1, progress=False)
    assert history[0]["step"] == 0


def test_a_non_finite_loss_stops_training_with_its_position():
    x, _ = toy_data(8)
    with pytest.raises(FloatingPointError, match="loss is nan at epoch 0, batch 1"):
        fit(
            nn.Linear(6, 3),
            lambda m, b: m(b[0]).sum() * b[1],
            [(x, torch.tensor(1.0)), (x, torch.tensor(float("nan")))],
            epochs=1,
            progress=False,
        )


def test_checkpoint_round_trip_restores_identical_outputs_and_optimizer(tmp_path):
    x, _ = toy_data()
    model, history = run(0, epochs=2, checkpoint_dir=tmp_path / "ckpt")
    assert {p.name for p in (tmp_path / "ckpt").iterdir()} == {
        "model.safetensors",
        "optimizer.safetensors",
        "checkpoint.json",
    }
    restored = make_model(5)  # different initial weights
    optimizer = torch.optim.Adam(restored.parameters())
    metadata = load_checkpoint(tmp_path / "ckpt", restored, optimizer)
    assert metadata["epoch"] == 1 and metadata["history"] == history
    model.eval()
    restored.eval()
    with torch.no_grad():
        assert torch.equal(model(x), restored(x))
    # Continuing from the checkpoint continues Adam's state (step counts, moments), not a fresh optimiser.
    state = optimizer.state_dict()["state"]
    assert int(state[0]["step"]) == 12 and state[0]["exp_avg"].abs().sum() > 0


def test_checkpoint_files_are_safetensors_and_json(tmp_path):
    from safetensors.torch import load_file

    model = make_model(0)
    save_checkpoint(tmp_path, model, metadata={"note": "x"})
    tensors = load_file(tmp_path / "model.safetensors")
    assert set(tensors) == set(model.state_dict())  # anchors and batch-norm statistics included
    assert json.loads((tmp_path / "checkpoint.json").read_text())["metadata"] == {"note": "x"}
    with pytest.raises(ValueError, match="holds no optimiser state"):
        load_checkpoint(tmp_path, make_model(1), torch.optim.Adam(make_model(1).parameters()))
    with pytest.raises(ValueError, match="directory: no checkpoint folder"):
        load_checkpoint(tmp_path / "missing", model)
