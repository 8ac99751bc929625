"""Linear CKA's closed-form permutation test per layer pair, from the streamed ``LayerMoments``: the same p-values as
``permutation_test(..., method="moments")`` on the collected activations, exact streamed sums whatever the shift,
and calibrated stars on unrelated models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from latentstitch.similarity import LayerMoments, layer_similarity, layer_similarity_from_moments, permutation_test
from latentstitch.similarity.layers._similarity import layer_moments

pytestmark = pytest.mark.usefixtures("one_thread")

LAYERS_A, LAYERS_B = ["0", "2", "4"], ["0", "2"]


def models(seed: int) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(seed)
    a = nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 8))
    b = nn.Sequential(nn.Linear(10, 12), nn.ReLU(), nn.Linear(12, 6))
    return a, b


def inputs(rows: int, batch: int, seed: int = 0, heavy: bool = False) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 10, generator=generator) + 3.0
    if heavy:  # heavy-tailed rows: the skewness terms are dominated by a few of them
        x = x * torch.exp(torch.randn(rows, 1, generator=generator))
    return list(x.split(batch))


def activations(model: nn.Module, batches: list[torch.Tensor], layer: str) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([model[: int(layer) + 1](x) for x in batches])


@pytest.mark.parametrize("batch", [1, 7])
def test_p_values_equal_the_closed_form_on_the_collected_activations(batch):
    model_a, model_b = models(0)
    batches = inputs(90, batch, heavy=True)
    result = layer_similarity(model_a, model_b, batches, layers_a=LAYERS_A, layers_b=LAYERS_B)
    assert result.skewness_rows == result.samples == 90  # every row in the sample: the skewness is exact
    for i, name_a in enumerate(LAYERS_A):
        for j, name_b in enumerate(LAYERS_B):
            x, y = activations(model_a, batches, name_a), activations(model_b, batches, name_b)
            expected = permutation_test(x, y, "linear_cka", method="moments")
            assert math.isclose(result.p_values["linear_cka"][i, j], expected.p_value, rel_tol=1e-4, abs_tol=1e-300)
    p = result.p_values["linear_cka"]
    order = np.argsort(p, axis=None)
    corrected = result.p_corrected["linear_cka"].ravel()[order]
    assert np.all(np.diff(corrected) >= 0) and np.all(corrected >= p.ravel()[order] - 1e-15)  # Holm: monotone, >= p
    assert result.to_dict()["p_corrected"]["linear_cka"] == result.p_corrected["linear_cka"].tolist()


def test_streamed_fourth_order_sums_are_exact_far_from_the_first_batch_s_mean():
    # The sums are kept about the first batch's mean and moved to the overall mean at the end (and to another
    # accumulator's shift on a merge): a drifting stream with a large offset tests that the expansion is exact.
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(200, 5, generator=generator, dtype=torch.float64) + 1e3
    x = x + torch.linspace(0, 50, 200, dtype=torch.float64)[:, None]  # the mean drifts across the stream
    y = torch.randn(200, 3, generator=generator, dtype=torch.float64)
    z = x - x.mean(0)
    w = (z * z).sum(1)
    whole = LayerMoments().update({"x": x}, {"y": y})
    first = LayerMoments(seed=1)
    for part in zip(x[:130].split(9), y[:130].split(9), strict=True):
        first.update({"x": part[0]}, {"y": part[1]})
    second = LayerMoments(seed=2).update({"x": x[130:]}, {"y": y[130:]})
    for moments in (whole, first.merge(second)):
        fourth, third = moments.higher("a", 0)
        assert math.isclose(float(fourth), float(w @ w), rel_tol=1e-9)
        torch.testing.assert_close(third, w @ z, rtol=1e-8, atol=1e-6 * float(w @ w) ** 0.75)
    merged = first.merge(second)
    assert sorted(merged.sample["a"][:, 0].tolist()) == sorted(x[:, 0].tolist())  # every row kept once
    restored = LayerMoments.from_state_dict(merged.state_dict(), merged.names)
    np.testing.assert_array_equal(
        layer_similarity_from_moments(restored).p_values["linear_cka"],
        layer_similarity_from_moments(merged).p_values["linear_cka"],
    )


def test_beyond_the_sample_mean_and_variance_stay_exact_and_the_skewness_is_close():
    model_a, model_b = models(1)
    batches = inputs(400, 25, seed=3)
    exact = layer_moments(model_a, model_b, batches, layers_a=LAYERS_A, layers_b=LAYERS_B)
    values = layer_similarity_from_moments(exact).values["linear_cka"]
    from latentstitch.similarity.layers._significance import layer_tests

    reference = layer_tests(exact, values)
    for seed in range(3):
        sampled = layer_moments(
            model_a, model_b, batches, layers_a=LAYERS_A, layers_b=LAYERS_B, sample_rows=120, seed=seed
        )
        for row, expected_row in zip(layer_tests(sampled, values), reference, strict=True):
            for test, expected in zip(row, expected_row, strict=True):
                assert not test.exact and test.rows == 120
                assert math.isclose(test.mean, expected.mean, rel_tol=1e-9)
                assert math.isclose(test.std, expected.std, rel_tol=1e-9)
                assert abs(test.skewness - expected.skewness) < 0.1 * abs(expected.skewness) + 0.05
    normal = layer_moments(model_a, model_b, batches, layers_a=LAYERS_A, layers_b=LAYERS_B, sample_rows=0)
    test, expected = layer_tests(normal, values)[0][0], reference[0][0]
    assert math.isnan(test.skewness) and test.rows == 0 and math.isclose(test.std, expected.std, rel_tol=1e-9)
    assert test.p_value == pytest.approx(0.5 * math.erfc(test.z / math.sqrt(2)), rel=1e-9, abs=1e-300)


def test_unrelated_models_on_independent_inputs_star_few_cells():
    # The null: each model sees its own independent inputs. Holm keeps the family-wise error at 0.05; over 40
    # independent heatmaps the number with any star is Binomial(40, <= 0.05): 6 or more has probability < 0.05.
    with_star, raw = 0, []
    for seed in range(40):
        model_a, model_b = models(seed)
        generator = torch.Generator().manual_seed(100 + seed)
        data = [(torch.randn(40, 10, generator=generator), torch.randn(40, 10, generator=generator)) for _ in range(3)]
        result = layer_similarity(model_a, model_b, data, layers_a=LAYERS_A, layers_b=LAYERS_B, separate_inputs=True)
        with_star += int(result.significant().any())
        raw.append(result.p_values["linear_cka"].ravel())
    assert with_star <= 5
    assert np.mean(np.concatenate(raw) < 0.05) < 0.1  # per cell, uncorrected: near the nominal 0.05


def test_related_layers_are_starred_and_tokens_get_no_p_values():
    model_a, _ = models(2)
    batches = inputs(120, 30, seed=4)
    result = layer_similarity(model_a, model_a, batches, layers_a=LAYERS_A, layers_b=LAYERS_A)
    assert np.all(np.diag(result.significant()))  # a layer against itself
    with pytest.raises(ValueError, match="measure: no p-values for 'mean_cca'"):
        result.significant("mean_cca")
    with pytest.raises(ValueError, match="sample_rows"):
        LayerMoments(sample_rows=-1)
    sequences = [x.reshape(6, 5, 10) for x in batches]  # (inputs, tokens, features): every token a row
    tokens = layer_similarity(model_a, model_a, sequences, layers_a=LAYERS_A, layers_b=LAYERS_A, pooling="tokens")
    assert tokens.samples == 120 and tokens.p_values == {} and tokens.skewness_rows == 0
