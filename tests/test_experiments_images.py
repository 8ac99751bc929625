"""Helpers of the image reproductions, against hand computations (the experiments themselves run in
test_reproductions.py)."""

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr

from latentstitch.experiments.ae_stitching import test_mse as reconstruction_mse
from latentstitch.experiments.cross_architecture_vision import predict_in_batches
from latentstitch.experiments.latent_similarity_proxy import build_mlp, proxy_scores


class _Scaled(torch.nn.Module):
    """encode = identity, decode = times a factor: reconstruction error known in closed form."""

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def encode(self, x):
        return x

    def decode(self, z):
        return z * self.factor


def test_reconstruction_mse_is_the_mean_of_per_image_errors_across_batches():
    x = torch.rand(7, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    expected = float(((0.5 * x - x) ** 2).flatten(1).mean(dim=1).mean())
    # encoder side and decoder side are different models: the decoder side's factor applies
    assert reconstruction_mse(_Scaled(2.0), _Scaled(0.5), x, batch=3) == pytest.approx(expected, rel=1e-6)


def test_predict_in_batches_never_scores_a_batch_of_one():
    sizes = []

    def logits(chunk):
        sizes.append(len(chunk))
        return torch.nn.functional.one_hot(torch.arange(len(chunk)) % 3, 3).float()

    predictions = predict_in_batches(logits, torch.zeros(65, 2), batch=32)
    assert sizes == [32, 33] and predictions.shape == (65,)
    sizes.clear()
    predict_in_batches(logits, torch.zeros(70, 2), batch=32)
    assert sizes == [32, 32, 6]


def test_proxy_scores_match_a_hand_computation():
    rng = np.random.default_rng(0)
    runs, epochs, n, m = 4, 3, 20, 5
    relative = rng.normal(size=(runs, epochs, n, m)).astype(np.float16)
    accuracy = rng.uniform(0.1, 0.9, size=(runs, epochs))
    accuracy[2, 2] = 0.95  # the best grid model: run 2 after 3 epochs
    scores = proxy_scores(accuracy, relative, (2, 3))
    assert scores["best"] == 2 * 2 + 1

    def cosine(r, s):
        r, s = r.astype(np.float64), s.astype(np.float64)
        return float(np.mean((r * s).sum(1) / np.linalg.norm(r, axis=1) / np.linalg.norm(s, axis=1)))

    reference = relative[2, 2]
    similarity = [cosine(relative[r, e - 1], reference) for r in range(runs) for e in (2, 3)]
    np.testing.assert_allclose(scores["similarity"], similarity, rtol=1e-5)
    assert scores["similarity"][scores["best"]] == pytest.approx(1.0, abs=1e-6)
    grid_accuracy = [accuracy[r, e - 1] for r in range(runs) for e in (2, 3)]
    others = [i for i in range(len(similarity)) if i != scores["best"]]
    expected = pearsonr(np.take(similarity, others), np.take(grid_accuracy, others)).statistic
    assert scores["pearson"] == pytest.approx(expected, rel=1e-5)
    per_run = [
        pearsonr([cosine(relative[r, e], reference) for e in range(epochs)], accuracy[r]).statistic for r in range(runs)
    ]
    assert scores["per_run_pearson"] == pytest.approx(np.mean(per_run), rel=1e-5)


@pytest.mark.parametrize("layers", [1, 3])
def test_proxy_mlp_latents_are_unit_vectors_and_depth_follows_layers(layers):
    torch.manual_seed(0)
    model = build_mlp(12, 4, hidden=8, layers=layers, dropout=0.5, activation="tanh").eval()
    latents = model.latents(torch.rand(5, 1, 3, 4))
    torch.testing.assert_close(latents.norm(dim=1), torch.ones(5))
    assert sum(isinstance(m, torch.nn.Linear) for m in model.encoder) == layers + 1
    assert model(torch.rand(5, 1, 3, 4)).shape == (5, 4)
