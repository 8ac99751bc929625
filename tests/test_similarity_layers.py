"""``layer_similarity``: every layer pair of two models in one streamed pass equals the one-shot measures on the
collected activations, whatever the batch size, from bfloat16 activations of any scale, per token or pooled."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from latentstitch.similarity import (
    LayerMoments,
    cca,
    cka,
    layer_similarity,
    layer_similarity_from_moments,
    procrustes_distance,
    r2_linear,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: a second intra-op thread only spin-waits


class Block(nn.Module):
    """A residual block that returns a tuple, as Hugging Face layers do."""

    def __init__(self, width: int):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x):
        return (torch.tanh(self.linear(x)) + x, None)


class Tokens(nn.Module):
    """A tiny token model: ``model(input_ids=..., attention_mask=...)`` -> (batch, tokens, width) states."""

    def __init__(self, width: int, depth: int, scale: float = 1.0, offset: float = 0.0, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.embeddings = nn.Embedding(50, width)
        self.layers = nn.ModuleList(Block(width) for _ in range(depth))
        self.scale, self.offset = scale, offset

    def forward(self, input_ids, attention_mask=None):
        h = self.embeddings(input_ids)
        for layer in self.layers:
            h = layer(h)[0] * self.scale + self.offset
        return h


def token_batches(count: int, size: int, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        ids = torch.randint(1, 50, (size, 7), generator=generator)
        lengths = torch.randint(2, 8, (size,), generator=generator)
        mask = (torch.arange(7)[None] < lengths[:, None]).long()
        batches.append({"input_ids": ids * mask, "attention_mask": mask})
    return batches


def collected(model: nn.Module, batches, layers, pooling: str) -> dict[str, torch.Tensor]:
    """The two-step reference: every layer's activations of every batch, pooled by hand, in float64."""
    out: dict[str, list[torch.Tensor]] = {name: [] for name in layers}
    modules = dict(model.named_modules())
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str):
        def hook(_module, _inputs, output) -> None:  # returns None: a hook's return value would replace the output
            seen.setdefault(name, output[0] if isinstance(output, tuple) else output)

        return hook

    for batch in batches:
        seen.clear()
        handles = [modules[n].register_forward_hook(keep(n)) for n in layers]
        with torch.no_grad():
            model(**batch)
        for handle in handles:
            handle.remove()
        mask = batch["attention_mask"].bool()
        for name in layers:
            states = seen[name].double()
            if pooling == "tokens":
                out[name].append(states[mask])
            else:
                weights = mask.double().unsqueeze(-1)
                out[name].append((states * weights).sum(1) / weights.sum(1))
    return {name: torch.cat(parts) for name, parts in out.items()}


def reference(model_a, model_b, batches, result, measures, pooling="mean") -> list[np.ndarray]:
    """Each of ``measures`` over every layer pair of the collected activations."""
    a = collected(model_a, batches, result.layers_a, pooling)
    b = collected(model_b, batches, result.layers_b, pooling)
    return [np.array([[float(f(a[i], b[j])) for j in result.layers_b] for i in result.layers_a]) for f in measures]


@pytest.mark.parametrize("batch_size", [1, 2, 5])
@pytest.mark.kernels
def test_every_pair_equals_the_one_shot_measures_whatever_the_batch_size(batch_size):
    # torch-cka's "HSIC computation resulted in NaNs": batches of 1-3 rows divide by (n-1)(n-2) = 0. Here the
    # statistics are those of all rows, so any batch size gives the one-shot value.
    model_a, model_b = Tokens(12, 3, seed=1), Tokens(9, 2, seed=2)
    batches = token_batches(60 // batch_size, batch_size)
    result = layer_similarity(
        model_a, model_b, batches, measures=["linear_cka", "mean_cca", "procrustes_distance", "r2_linear"]
    )
    assert result.layers_a == ["layers.0", "layers.1", "layers.2"] and result.layers_b == ["layers.0", "layers.1"]
    assert result.samples == 60 and result.widths_a == [12] * 3
    expected = reference(model_a, model_b, batches, result, [cka, procrustes_distance, cca, r2_linear])
    for name, values, tolerance in zip(
        ["linear_cka", "procrustes_distance", "mean_cca", "r2_linear"], expected, [1e-6, 1e-5, 1e-4, 1e-4], strict=True
    ):
        np.testing.assert_allclose(result.values[name], values, atol=tolerance)


def test_per_token_rows_skip_the_padding():
    model_a, model_b = Tokens(8, 2, seed=3), Tokens(8, 2, seed=4)
    batches = token_batches(6, 4, seed=1)
    result = layer_similarity(model_a, model_b, batches, pooling="tokens", layers_a=["embeddings", "layers.1"])
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    assert result.samples == tokens
    np.testing.assert_allclose(
        result.values["linear_cka"], reference(model_a, model_b, batches, result, [cka], "tokens")[0], atol=1e-6
    )


@pytest.mark.parametrize("precision", ["float64", "input"])
@pytest.mark.parametrize("scale", [1e4, 1e6])
def test_bfloat16_activations_of_huge_scale_give_the_float64_value(scale, precision):
    # Activations of magnitude 1e4-1e6 around a mean 10x larger, in bfloat16: a float32 Gram matrix of such rows
    # loses every digit of the centred part. The accumulator centres about the first batch's mean.
    model_a = Tokens(16, 2, scale=scale, offset=10 * scale, seed=5).to(torch.bfloat16)
    model_b = Tokens(10, 2, scale=scale / 7, offset=-3 * scale, seed=6).to(torch.bfloat16)
    batches = token_batches(20, 3, seed=2)
    measures = ["linear_cka", "procrustes_distance"]
    result = layer_similarity(model_a, model_b, batches, measures=measures, precision=precision)
    assert np.isfinite(result.values["linear_cka"]).all()
    expected_cka, expected_procrustes = reference(model_a, model_b, batches, result, [cka, procrustes_distance])
    np.testing.assert_allclose(result.values["linear_cka"], expected_cka, atol=1e-5)
    np.testing.assert_allclose(result.values["procrustes_distance"], expected_procrustes, atol=1e-4)


@pytest.mark.kernels
def test_partitions_merge_to_the_single_pass():
    model_a, model_b = Tokens(8, 2, seed=7), Tokens(6, 3, seed=8)
    batches = token_batches(8, 5, seed=3)
    from latentstitch.similarity import layer_moments

    whole = layer_moments(model_a, model_b, batches)
    parts = [layer_moments(model_a, model_b, batches[k : k + 3]) for k in range(0, 8, 3)]
    merged = parts[0].merge(parts[1]).merge(parts[2])
    assert merged.count == whole.count == 40
    np.testing.assert_allclose(
        layer_similarity_from_moments(merged).values["linear_cka"],
        layer_similarity_from_moments(whole).values["linear_cka"],
        atol=1e-10,
    )
    restored = LayerMoments.from_state_dict(whole.state_dict(), whole.names)
    np.testing.assert_allclose(restored.pair(1, 2).centered_ab(), whole.pair(1, 2).centered_ab())


def test_separate_inputs_per_model_and_plain_tensor_models():
    torch.manual_seed(0)
    model_a = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    model_b = nn.Sequential(nn.Linear(5, 7), nn.Tanh())
    x = torch.randn(30, 4)
    y = torch.cat([x, x[:, :1] ** 2], dim=1)  # the same samples, prepared differently for the second model
    batches = [(x[k : k + 7], y[k : k + 7]) for k in range(0, 30, 7)]
    result = layer_similarity(model_a, model_b, batches, layers_a=["0", "2"], layers_b="1", separate_inputs=True)
    with torch.no_grad():
        expected = [float(cka(model_a[: k + 1](x).double(), model_b(y).double())) for k in (0, 2)]
    np.testing.assert_allclose(result.values["linear_cka"][:, 0], expected, atol=1e-6)
    json.dumps(result.to_dict())  # JSON-ready


def test_a_constant_layer_is_a_named_nan_cell_not_a_silent_one():
    torch.manual_seed(0)
    model_a = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 3))
    with torch.no_grad():
        model_a[1].weight.zero_()  # the second layer outputs its bias: the same row for every input
    model_b = nn.Sequential(nn.Linear(4, 5))
    x = torch.randn(20, 4)
    with pytest.warns(RuntimeWarning, match="does not vary"):
        result = layer_similarity(model_a, model_b, [x[:10], x[10:]], layers_a=["0", "1"], layers_b=["0"])
    assert np.isfinite(result.values["linear_cka"][0, 0]) and np.isnan(result.values["linear_cka"][1, 0])
    assert "'1' does not vary" in result.undefined["linear_cka"][0]


def test_errors_name_the_argument():
    model_a, model_b = Tokens(8, 2), Tokens(8, 2)
    batches = token_batches(2, 3)
    with pytest.raises(ValueError, match="layers_a: Tokens has no layer named 'nope'; valid names: embeddings"):
        layer_similarity(model_a, model_b, batches, layers_a=["nope"])
    with pytest.raises(ValueError, match="measures:.*linear_cka"):
        layer_similarity(model_a, model_b, batches, measures="rbf_cka")
    with pytest.raises(ValueError, match="pooling"):
        layer_similarity(model_a, model_b, batches, pooling="max")
    with pytest.raises(ValueError, match="at least 2 rows"):
        layer_similarity(model_a, model_b, token_batches(1, 1))
    with pytest.raises(TypeError, match="model_b: expected a torch nn.Module"):
        layer_similarity(model_a, "minilm", batches)
    tokens_a, tokens_b = token_batches(1, 3, seed=1)[0], token_batches(1, 3, seed=2)[0]
    with pytest.raises(ValueError, match="same tokenisation"):
        layer_similarity(model_a, model_b, [(tokens_a, tokens_b)], pooling="tokens", separate_inputs=True)


def test_a_measure_failing_on_a_pair_leaves_that_cell_nan_and_keeps_the_others(monkeypatch):
    """An eigensolver that does not converge (torch raises ``LinAlgError``) in one measure on one layer pair: that
    cell is NaN and says why, a warning names the measure, and every other cell and measure is kept."""
    from latentstitch.similarity.layers import _similarity as _layer_similarity

    svcca = _layer_similarity.LAYER_MEASURES["svcca"]

    def failing(moments):
        if moments.centered_aa().shape[0] == 3:  # the 3-wide layer of model_a
            raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge because the input matrix")
        return svcca(moments)

    monkeypatch.setitem(_layer_similarity.LAYER_MEASURES, "svcca", failing)
    torch.manual_seed(0)
    model_a = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 6))
    model_b = nn.Sequential(nn.Linear(4, 5))
    x = torch.randn(40, 4)
    with pytest.warns(
        RuntimeWarning, match=r"svcca: 1 of 2 layer pairs left NaN, e.g. 0 ~ 0: svcca failed: linalg.eigh"
    ):
        result = layer_similarity(
            model_a, model_b, [x], layers_a=["0", "1"], layers_b=["0"], measures=["linear_cka", "svcca"]
        )
    assert np.isfinite(result.values["linear_cka"]).all()
    assert np.isnan(result.values["svcca"][0, 0]) and np.isfinite(result.values["svcca"][1, 0])
    assert result.best("svcca")[:2] == ("1", "0")
    assert list(result.undefined) == ["svcca"]


def test_the_best_pair_of_a_measure_undefined_everywhere_is_a_named_error():
    torch.manual_seed(0)
    model_a, model_b = nn.Sequential(nn.Linear(4, 8)), nn.Sequential(nn.Linear(4, 8))
    with pytest.warns(RuntimeWarning, match="svcca: 1 of 1 layer pairs left NaN"):
        result = layer_similarity(
            model_a, model_b, [torch.randn(6, 4)], layers_a=["0"], layers_b=["0"], measures=["linear_cka", "svcca"]
        )
    assert np.isfinite(result.values["linear_cka"]).all()
    with pytest.raises(
        ValueError, match=r"measure: svcca has no value on any layer pair .*6 rows for 8 and 8 features"
    ):
        result.best("svcca")
