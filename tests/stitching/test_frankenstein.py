"""Frankenstein networks: stitching real torch models at named layers (hooks), direct-matching and task-loss
stitching layers, metrics, activations capture, saving."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from threadpoolctl import threadpool_limits
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from latentstitch.models import tiny10, tiny_resnet
from latentstitch.similarity import cka
from latentstitch.stitching import (
    ActivationStore,
    LeastSquares,
    LowRankStitch,
    ReducedRank,
    TaskLoss,
    affine_map,
    fit_direct,
    fit_task_loss,
    get_activations,
    interpolate_layers,
    layer_shapes,
    load_stitching_layer,
    save_stitching_layer,
    soft_cross_entropy,
    sparsify_layer,
    sparsity_sweep,
    stitch,
    stitch_metrics,
    sweep,
)


@pytest.fixture(autouse=True)
def single_threaded(one_thread):
    """One torch thread and one BLAS thread: on a busy 2-core machine a second thread of either spin-waits, and
    numpy's BLAS (direct matching) then takes 100x longer on these small products."""
    with threadpool_limits(limits=1):
        yield


def _settled(model: nn.Module, x: torch.Tensor, seed: int = 0) -> nn.Module:
    """A model whose batch-norm running statistics are not the trivial (0, 1): a few train-mode passes."""
    torch.manual_seed(seed)
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(x + 0.1 * torch.randn_like(x))
    return model.eval()


class TokenClassifier(nn.Module):
    """A tiny transformer encoder over token ids: embedding, 2 encoder layers (batch first), mean, linear."""

    def __init__(self, vocabulary: int = 20, width: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        layer = nn.TransformerEncoderLayer(width, nhead=2, dim_feedforward=32, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(width, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def _mlp() -> nn.Sequential:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(28 * 28, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 10)
    )


IMAGES = torch.rand(24, 1, 28, 28, generator=torch.Generator().manual_seed(0))
TOKENS = torch.randint(0, 20, (24, 7), generator=torch.Generator().manual_seed(0))
CASES = [
    ("tiny10", "conv1"),
    ("tiny10", "bn4"),
    ("tiny10", "pool"),
    ("tiny_resnet", "layer1.0"),
    ("tiny_resnet", "layer2.0"),
    ("tiny_resnet", "layer2.0.bn1"),
    ("mlp", "3"),
    ("transformer", "encoder.layers.0"),
]


def _model(kind: str, seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(seed)
    if kind == "tiny10":
        return _settled(tiny10(0.5), IMAGES, seed), IMAGES
    if kind == "tiny_resnet":
        return _settled(tiny_resnet(0.5), IMAGES, seed), IMAGES
    if kind == "mlp":
        return _mlp().eval(), IMAGES
    return TokenClassifier().eval(), TOKENS


# --- the stitched network -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "layer"), CASES)
def test_a_model_stitched_to_itself_with_identity_reproduces_its_outputs_exactly(kind, layer):
    model, x = _model(kind)
    with torch.no_grad():
        expected = model(x)
        stitched = stitch(model, model, layer, layer, "identity", example=x)
        assert torch.equal(stitched(x), expected)
        stitched.keep_activations = True  # the hook path (B's full forward pass) too
        assert torch.equal(stitched(x), expected)


@pytest.mark.parametrize(("kind", "layer"), CASES)
def test_the_stitching_layer_acts_per_feature(kind, layer):
    model, x = _model(kind)
    stitched = stitch(model, model, layer, layer, "random", example=x)
    acts = get_activations(model, x, layer)
    expected_type = nn.Conv2d if acts.ndim == 4 else nn.Linear
    assert type(stitched.stitching_layer) is expected_type
    with torch.no_grad():
        out = stitched.stitching_layer(acts)
    assert out.shape == acts.shape


def test_stitching_two_models_runs_a_then_b_after_the_layer():
    model_a, x = _model("tiny_resnet", 0)
    model_b, _ = _model("tiny_resnet", 1)
    layer = nn.Conv2d(8, 8, 1)
    stitched = stitch(model_a, model_b, "layer1.0", "layer1.0", layer)
    with torch.no_grad():
        mid = layer(get_activations(model_a, x, "layer1.0"))
        expected = model_b.fc(model_b.pool(model_b.layer2(mid)))
        assert torch.allclose(stitched(x), expected, atol=1e-6)


def test_skipping_b_before_the_layer_equals_running_b_with_a_replacing_hook():
    model_a, x = _model("tiny10", 0)
    model_b, _ = _model("tiny10", 1)
    stitched = stitch(model_a, model_b, "bn5", "bn5", "random", example=x, seed=3)
    with torch.no_grad():
        tail = stitched(x)
        stitched.keep_activations = True
        hooked = stitched(x)
    assert torch.equal(tail, hooked)
    assert torch.equal(stitched.last_activation_b, get_activations(model_b, x, "bn5"))


def test_both_networks_are_frozen_and_stay_in_eval_mode():
    model_a, x = _model("tiny10", 0)
    model_b, _ = _model("tiny10", 1)
    stitched = stitch(model_a, model_b, "bn3", "bn3", "random", example=x)
    stitched.train()
    assert stitched.stitching_layer.training
    assert not any(m.training for m in model_a.modules()) and not any(m.training for m in model_b.modules())
    assert not any(p.requires_grad for p in model_a.parameters())
    assert [p for p in stitched.parameters() if p.requires_grad] == list(stitched.stitching_layer.parameters())


def test_unknown_layer_names_are_listed():
    model, _ = _model("tiny10")
    with pytest.raises(ValueError, match=r"layer_a: Sequential has no layer named 'bn9'; valid names: conv1, bn1"):
        stitch(model, model, "bn9", "bn3")
    with pytest.raises(ValueError, match=r"layer_b: .*'layer3'.*valid names: stem, stem\.0"):
        stitch(model, tiny_resnet(), "bn3", "layer3")
    with pytest.raises(ValueError, match=r"layers: .*no layer named 'nope'"):
        get_activations(model, IMAGES, ["bn1", "nope"])


def test_incompatible_shapes_are_an_error_listing_the_shapes_found():
    model, x = _model("tiny10")
    stitched = stitch(model, model, "bn3", "bn5", "identity", example=x)  # same width, different spatial size
    with pytest.raises(ValueError, match=r"outputs \(24, 16, 11, 11\) but model_b's 'bn5' outputs \(24, 16, 7, 7\)"):
        stitched(x)
    with pytest.raises(ValueError, match=r"model_b: conv1 \(1, 8, 26, 26\), bn1 \(1, 8, 26, 26\)"):
        stitched(x)
    wide = stitch(model, model, "bn3", "bn6", nn.Conv2d(16, 16, 1))  # 16 channels into a 32-channel layer
    with pytest.raises(ValueError, match=r"bn6' outputs \(24, 32, 3, 3\)"):
        wide(x)
    flat = stitch(model, model, "bn3", "bn3", nn.Linear(16, 16))  # a Linear would act on the width axis
    with pytest.raises(ValueError, match=r"outputs \(24, 16, 11, 11\), which the Linear"):
        flat(x)
    with pytest.raises(RuntimeError, match="not initialised yet"):
        stitch(model, model, "bn3", "bn3")(x)


def test_layer_shapes_lists_every_named_layer_in_call_order():
    model, x = _model("tiny10")
    shapes = layer_shapes(model, x[:2])
    assert list(shapes)[:3] == ["conv1", "bn1", "relu1"]
    assert shapes["bn3"] == (2, 16, 11, 11) and shapes["fc"] == (2, 10)


# --- direct-matching initialisation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "layer"), [("tiny10", "bn4"), ("mlp", "3"), ("transformer", "encoder.layers.0")])
def test_direct_matching_initialisation_applies_the_fitted_map(kind, layer):
    model_a, x = _model(kind, 0)
    model_b, _ = _model(kind, 1)
    acts_a, acts_b = get_activations(model_a, x, layer), get_activations(model_b, x, layer)
    estimator = LeastSquares(ridge=1e-3).fit(acts_a, acts_b)
    stitched = stitch(model_a, model_b, layer, layer, estimator)
    with torch.no_grad():
        mapped = stitched.stitching_layer(acts_a)
    assert torch.allclose(mapped, estimator.transform(acts_a), atol=1e-4)
    assert stitched.direct_stitcher is estimator


def test_an_unfitted_estimator_is_fitted_on_the_data_by_streaming():
    model_a, x = _model("tiny10", 0)
    model_b, _ = _model("tiny10", 1)
    stitched = stitch(model_a, model_b, "bn3", "bn3", LeastSquares(), data=x, batch_size=5)
    one_shot = LeastSquares().fit(get_activations(model_a, x, "bn3"), get_activations(model_b, x, "bn3"))
    coef, _ = affine_map(stitched.stitching_layer)
    assert torch.allclose(coef.double(), one_shot.coef_, atol=1e-5)


@pytest.mark.kernels
def test_fit_direct_over_chunks_equals_the_one_shot_fit():
    model_a, x = _model("tiny10", 0)
    model_b, _ = _model("tiny10", 1)
    streamed = fit_direct(LeastSquares(), model_a, model_b, "bn2", "bn2", x, batch_size=4, chunk_elements=10_000)
    one_shot = LeastSquares().fit(get_activations(model_a, x, "bn2"), get_activations(model_b, x, "bn2"))
    assert torch.allclose(streamed.coef_, one_shot.coef_, atol=1e-9)
    assert torch.allclose(streamed.intercept_, one_shot.intercept_, atol=1e-9)


def test_low_rank_layer_from_reduced_rank_reproduces_it():
    model_a, x = _model("tiny10", 0)
    model_b, _ = _model("tiny10", 1)
    acts_a, acts_b = get_activations(model_a, x, "bn4"), get_activations(model_b, x, "bn4")
    rrr = ReducedRank(3).fit(acts_a, acts_b)
    stitched = stitch(model_a, model_b, "bn4", "bn4", rrr, rank=3)
    layer = stitched.stitching_layer
    assert isinstance(layer, LowRankStitch) and layer.w1.shape == (16, 3) and layer.w2.shape == (3, 16)
    with torch.no_grad():
        assert torch.allclose(layer(acts_a), rrr.transform(acts_a), atol=1e-4)
    assert torch.linalg.matrix_rank(affine_map(layer)[0].detach()) == 3


def test_identity_and_random_initialisations():
    model, x = _model("tiny10")
    identity = stitch(model, model, "bn2", "bn2", "identity", example=x).stitching_layer
    coef, intercept = affine_map(identity)
    assert torch.equal(coef, torch.eye(8)) and torch.equal(intercept, torch.zeros(8))
    first = stitch(model, model, "bn2", "bn2", "random", example=x, seed=1).stitching_layer
    again = stitch(model, model, "bn2", "bn2", "random", example=x, seed=1).stitching_layer
    other = stitch(model, model, "bn2", "bn2", "random", example=x, seed=2).stitching_layer
    assert torch.equal(first.weight, again.weight) and not torch.equal(first.weight, other.weight)
    with pytest.raises(ValueError, match="example: an input batch"):
        stitch(model, model, "bn2", "bn2", "random")
    with pytest.raises(ValueError, match="data: needed to fit the unfitted LeastSquares"):
        stitch(model, model, "bn2", "bn2", LeastSquares())


# --- metrics and losses ---------------------------------------------------------------------------------------------


def test_soft_cross_entropy_matches_its_formula_and_is_stationary_at_the_target():
    gen = torch.Generator().manual_seed(0)
    logits, target = torch.randn(6, 4, generator=gen), torch.randn(6, 4, generator=gen)
    for temperature in (1.0, 2.5):
        p = torch.softmax(target / temperature, 1)
        by_hand = -(p * torch.log_softmax(logits / temperature, 1)).sum(1).mean()
        value = soft_cross_entropy(logits, target, temperature)
        assert torch.allclose(value, by_hand) and torch.allclose(value, F.cross_entropy(logits / temperature, p))
    at_target = target.clone().requires_grad_(True)
    soft_cross_entropy(at_target, target).backward()
    assert at_target.grad.abs().max() < 1e-7


def test_stitch_metrics_on_a_hand_computed_example():
    # B's logits are x @ W^T; stitching its input at the last layer through a permutation of the 3 features changes
    # the logits in a way we can compute by hand.
    model = nn.Sequential(nn.Flatten(), nn.Linear(3, 3, bias=False))
    with torch.no_grad():
        model[1].weight.copy_(torch.eye(3) * 4)
    x = torch.tensor([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]])
    labels = torch.tensor([0, 1, 0, 0])  # B: 3 of 4 right
    permutation = nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        permutation.weight.copy_(torch.tensor([[0.0, 1, 0], [1, 0, 0], [0, 0, 1]]))  # swaps features 0 and 1
    stitched = stitch(model, model, "0", "0", permutation)
    metrics = stitch_metrics(stitched, (x, labels))
    # stitched predictions: 1, 0, 2, 1 -> right on none but ... labels 0, 1, 0, 0 -> 0 right; agrees with B on 1 of 4
    assert metrics["accuracy"] == 0.0 and metrics["accuracy_b"] == 0.75 and metrics["relative_accuracy"] == 0.0
    assert metrics["agreement"] == 0.25
    p = torch.softmax(x @ (torch.eye(3) * 4), 1).double()
    q = torch.log_softmax(x[:, [1, 0, 2]] @ (torch.eye(3) * 4), 1).double()
    assert metrics["cross_entropy"] == pytest.approx(float(-(p * q).sum(1).mean()))
    itself = stitch_metrics(stitch(model, model, "0", "0", "identity", example=x), x)
    assert itself["agreement"] == 1.0 and "accuracy" not in itself
    assert itself["cross_entropy"] == pytest.approx(float(-(p * p.log()).sum(1).mean()))


# --- task-loss matching ---------------------------------------------------------------------------------------------


@pytest.fixture
def pair():
    model_a, x = _model("tiny10", 0)
    model_b, _ = _model("tiny10", 1)
    labels = torch.randint(0, 10, (len(x),), generator=torch.Generator().manual_seed(1))
    return model_a, model_b, x, labels


def test_task_loss_trains_only_the_stitching_layer(pair):
    model_a, model_b, x, labels = pair
    before = {k: v.clone() for k, v in {**model_a.state_dict(), **model_b.state_dict()}.items()}
    stitched = stitch(model_a, model_b, "bn3", "bn3")
    result = fit_task_loss(stitched, (x, labels), epochs=2, batch_size=8, progress=False)
    after = {**model_a.state_dict(), **model_b.state_dict()}
    assert all(torch.equal(before[k], after[k]) for k in before)  # weights and batch-norm statistics
    assert isinstance(stitched.direct_stitcher, LeastSquares)  # default init: least squares on the data
    assert len(result.history) == 2 and result.history[-1]["lr"] == pytest.approx(1e-5)


def test_task_loss_is_deterministic_for_a_seed(pair):
    model_a, model_b, x, labels = pair
    weights = []
    for seed in (0, 0, 1):
        stitched = stitch(model_a, model_b, "bn4", "bn4")
        fit_task_loss(stitched, (x, labels), init="random", epochs=2, batch_size=8, seed=seed, progress=False)
        weights.append(stitched.stitching_layer.weight.detach().clone())
    assert torch.equal(weights[0], weights[1]) and not torch.equal(weights[0], weights[2])


def test_task_loss_reduces_the_loss_it_trains(pair):
    model_a, model_b, x, labels = pair
    for target in ("soft", "labels"):
        stitched = stitch(model_a, model_b, "bn4", "bn4", "random", example=x)
        result = fit_task_loss(stitched, (x, labels), target=target, epochs=6, lr=1e-2, batch_size=8, progress=False)
        assert result.history[-1]["cross_entropy"] < result.history[0]["cross_entropy"]
    with pytest.raises(ValueError, match=r'target="labels" needs \(inputs, labels\)'):
        fit_task_loss(stitch(model_a, model_b, "bn4", "bn4", "random", example=x), x, target="labels")


def test_low_rank_task_loss_keeps_the_rank(pair):
    model_a, model_b, x, labels = pair
    stitched = stitch(model_a, model_b, "bn6", "bn6")
    fit_task_loss(stitched, (x, labels), rank=2, epochs=1, batch_size=8, progress=False)
    layer = stitched.stitching_layer
    assert isinstance(layer, LowRankStitch) and layer.rank == 2
    assert torch.linalg.matrix_rank(affine_map(layer)[0].detach()) <= 2
    with pytest.raises(ValueError, match="cannot be combined with rank"):
        fit_task_loss(stitched, (x, labels), rank=2, l1=1.0, progress=False)


def test_l1_penalty_makes_the_matrix_sparser(pair):
    model_a, model_b, x, labels = pair
    sparsity = []
    for l1 in (0.0, 100.0):
        stitched = stitch(model_a, model_b, "bn5", "bn5")
        fit_task_loss(stitched, (x, labels), l1=l1, epochs=15, lr=0.05, batch_size=8, progress=False)
        sparsity.append(sparsify_layer(stitched.stitching_layer, 1e-3)[1])
    assert sparsity[1] > sparsity[0] + 0.5


def test_traced_r2_and_cka_are_the_indices_of_the_current_map(pair):
    model_a, model_b, x, labels = pair
    stitched = stitch(model_a, model_b, "bn4", "bn4")
    result = fit_task_loss(stitched, (x, labels), epochs=1, batch_size=8, track_every=1, probe=x, progress=False)
    assert [r["step"] for r in result.trace] == [0, 1, 2, 3]  # before each of the 3 steps, and after the last
    acts_a, acts_b = get_activations(model_a, x, "bn4"), get_activations(model_b, x, "bn4")
    # at step 0 the map is the least-squares fit on these very samples: R^2 is that fit's score
    assert result.trace[0]["r2"] == pytest.approx(stitched.direct_stitcher.score(acts_a, acts_b), abs=1e-5)
    with torch.no_grad():
        mapped = stitched.stitching_layer(acts_a)
    assert result.trace[-1]["cka"] == pytest.approx(float(cka(mapped.flatten(1).double(), acts_b.flatten(1).double())))


def test_cka_penalty_lowers_cka_of_a_self_stitched_network(pair):
    # The identity is a stationary point of both the soft cross-entropy to the network itself and of CKA (its
    # maximum), so without the penalty only rounding noise moves the map; with it, CKA falls.
    model_a, _, x, _ = pair
    final = []
    for penalty in (0.0, 5.0):
        stitched = stitch(model_a, model_a, "bn4", "bn4", "identity", example=x)
        result = fit_task_loss(
            stitched, x, cka_penalty=penalty, epochs=8, lr=0.05, batch_size=8, track_every=24, progress=False
        )
        assert result.trace[0]["cka"] == pytest.approx(1.0)
        final.append(result.trace[-1]["cka"])
    assert final[0] > 0.995 and final[1] < 0.97


# --- activations ----------------------------------------------------------------------------------------------------


@pytest.mark.kernels
def test_get_activations_matches_a_manual_forward_pass_and_stops_early():
    model, x = _model("tiny10")
    calls = []
    handle = model.fc.register_forward_hook(lambda *_: calls.append(1))
    acts = get_activations(model, x, ["bn2", "relu5"], batch_size=7)
    handle.remove()
    assert not calls  # the forward pass stopped after relu5
    with torch.no_grad():
        expected = model[:6](x)
        # the same batches of 7 through the same kernels: byte for byte (a batch of 24 may add in another order)
        assert torch.equal(acts["bn2"], torch.cat([model[:5](part) for part in x.split(7)]))
        assert torch.equal(acts["relu5"], torch.cat([model[:15](part) for part in x.split(7)]))
        assert torch.equal(get_activations(model, x, "relu2"), expected)
    assert model.training is False


@pytest.mark.kernels
def test_get_activations_downsamples_streams_and_reads_loaders():
    model, x = _model("tiny10")
    small = get_activations(model, x, "bn1", downsample=5)
    assert small.shape == (24, 8, 5, 5)
    assert torch.allclose(small, F.adaptive_avg_pool2d(get_activations(model, x, "bn1"), 5))
    seen = []
    assert (
        get_activations(model, x, "bn3", store=None, on_batch=lambda acts: seen.append(acts["bn3"]), batch_size=10)
        is None
    )
    assert [len(t) for t in seen] == [10, 10, 4]
    loader = DataLoader(TensorDataset(x, torch.zeros(len(x))), batch_size=10)  # the batches of `seen`: same bytes
    assert torch.equal(get_activations(model, loader, "bn3"), torch.cat(seen))
    assert torch.equal(get_activations(model, x.numpy(), "bn3", batch_size=10), torch.cat(seen))


@pytest.mark.kernels
def test_activations_chunked_to_disk_read_back(tmp_path):
    model, x = _model("tiny10")
    store = get_activations(model, x, ["bn2", "fc"], store=tmp_path / "acts", chunk_size=10, batch_size=7)
    assert isinstance(store, ActivationStore) and len(store) == 24
    assert [len(chunk["fc"]) for chunk in store.chunks()] == [10, 10, 4]
    assert store.shapes == {"bn2": (8, 24, 24), "fc": (10,)}
    in_memory = get_activations(model, x, ["bn2", "fc"], batch_size=7)  # the same batches: the same bytes
    assert torch.equal(ActivationStore(tmp_path / "acts").load("bn2"), in_memory["bn2"])
    with pytest.raises(FileExistsError):
        get_activations(model, x, "fc", store=tmp_path / "acts")


# --- saving, interpolation, sparsity --------------------------------------------------------------------------------


@pytest.mark.parametrize("layer", [nn.Conv2d(4, 3, 1), nn.Linear(4, 3), LowRankStitch(4, 3, 2)], ids=type)
def test_stitching_layers_save_and_load_without_pickle(layer, tmp_path):
    path = tmp_path / "layer.safetensors"
    save_stitching_layer(layer, path, {"note": "seed 0 -> 1"})
    loaded, metadata = load_stitching_layer(path, with_metadata=True)
    assert type(loaded) is type(layer) and metadata == {"note": "seed 0 -> 1"}
    x = torch.randn(2, 4, 5, 5) if isinstance(layer, nn.Conv2d) else torch.randn(2, 4)
    with torch.no_grad():
        assert torch.equal(loaded(x), layer(x))
    save_file({"weight": torch.zeros(2)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="was not written by save_stitching_layer"):
        load_stitching_layer(tmp_path / "other.safetensors")


def test_a_stitched_model_saves_its_layer_for_the_same_layers_only(tmp_path):
    model, x = _model("tiny10")
    stitched = stitch(model, model, "bn3", "bn3", "random", example=x)
    stitched.save_layer(tmp_path / "bn3.safetensors")
    other = stitch(model, model, "bn3", "bn3").load_layer(tmp_path / "bn3.safetensors")
    with torch.no_grad():
        assert torch.equal(other(x), stitched(x))
    with pytest.raises(ValueError, match=r"saved for 'bn3' -> 'bn3', not 'bn4' -> 'bn4'"):
        stitch(model, model, "bn4", "bn4").load_layer(tmp_path / "bn3.safetensors")


def test_interpolation_and_thresholding():
    first, second = nn.Conv2d(3, 3, 1), nn.Conv2d(3, 3, 1)
    for weight, expected in ((1.0, first), (0.0, second)):
        assert torch.allclose(affine_map(interpolate_layers(first, second, weight))[0], affine_map(expected)[0])
    middle = interpolate_layers(first, second, 0.25)
    assert torch.allclose(middle.bias, 0.25 * first.bias + 0.75 * second.bias)
    layer = nn.Linear(2, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1e-5, 0.5], [-2e-4, -3e-5]]))
    sparse, sparsity = sparsify_layer(layer)
    assert sparsity == 0.5 and torch.equal(sparse.weight, torch.tensor([[0.0, 0.5], [-2e-4, 0.0]]))


# --- sweeps ---------------------------------------------------------------------------------------------------------


def test_sweep_and_sparsity_sweep_tables_and_plots(pair, tmp_path):
    model_a, model_b, x, labels = pair
    result = sweep(
        model_a,
        model_b,
        ["bn3", "bn6"],
        {"LS": LeastSquares(), "task loss": TaskLoss(epochs=1, batch_size=8)},
        data=(x, labels),
        eval_data=(x, labels),
        progress=False,
    )
    assert [(r["layer"], r["method"]) for r in result.rows] == [
        ("bn3", "LS"),
        ("bn3", "task loss"),
        ("bn6", "LS"),
        ("bn6", "task loss"),
    ]
    assert "| bn6 |" in result.to_markdown()
    ls_only = stitch(model_a, model_b, "bn3", "bn3", LeastSquares(), data=x)
    assert result.value("bn3", "LS", "agreement") == stitch_metrics(ls_only, (x, labels))["agreement"]
    result.plot(tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").stat().st_size > 5_000
    sparse = sparsity_sweep(
        model_a,
        model_b,
        "bn5",
        data=(x, labels),
        eval_data=(x, labels),
        l1=(0.0, 100.0),
        alphas=(0.0, 10.0),
        task_loss={"epochs": 1, "batch_size": 8},
        progress=False,
    )
    assert {r["method"] for r in sparse.rows} == {"task loss (L1)", "direct (Lasso)"}
    assert sparse.rows[1]["sparsity"] == 1.0  # a huge Lasso alpha zeroes the matrix
    sparse.plot(tmp_path / "sparse.png")
    assert (tmp_path / "sparse.png").stat().st_size > 5_000


# --- models ---------------------------------------------------------------------------------------------------------


def test_tiny10_and_tiny_resnet_shapes_and_names():
    model = tiny10()
    names = [n for n, _ in model.named_children()]
    assert names[:3] == ["conv1", "bn1", "relu1"] and names[-2:] == ["pool", "fc"]
    shapes = layer_shapes(model, torch.zeros(2, 1, 28, 28))
    sides = [shapes[f"bn{i}"][2] for i in range(1, 9)]
    assert sides == [26, 24, 11, 9, 7, 3, 1, 1] and [shapes[f"bn{i}"][1] for i in (1, 3, 6)] == [16, 32, 64]
    assert [shapes[f"bn{i}"][1] for i in (1, 3, 6)] == [16, 32, 64]
    assert layer_shapes(tiny10(0.25, in_channels=3), torch.zeros(1, 3, 32, 32))["fc"] == (1, 10)
    resnet = tiny_resnet(blocks=(2, 1))
    shapes = layer_shapes(resnet, torch.zeros(1, 1, 28, 28))
    assert shapes["layer1.1"] == (1, 16, 28, 28) and shapes["layer2.0"] == (1, 32, 14, 14)
    assert resnet.layer1[0].downsample is None and resnet.layer2[0].downsample is not None
    assert np.isclose(
        sum(p.numel() for p in tiny10(2.0).parameters()) / sum(p.numel() for p in tiny10().parameters()), 4, rtol=0.05
    )
