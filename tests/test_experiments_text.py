"""Helpers of the text, word and graph reproductions (their numbers are checked by the quick runs, not here)."""

import numpy as np
import pytest
import torch

from latentstitch.experiments._text import predict, score
from latentstitch.experiments.latent_similarity_proxy_graph import matched_similarity
from latentstitch.experiments.robust_relative import ResidualAdapter
from latentstitch.experiments.word_embeddings import retrieval, zero_pad
from latentstitch.models import BatchInstanceNorm


class _BatchStandardised(torch.nn.Module):
    """Logits that depend on the batch (like the relreps heads): batch-standardised features."""

    def __init__(self):
        super().__init__()
        self.norm = BatchInstanceNorm()

    def forward(self, x, shift=0.0):
        return self.norm(x) + shift


def test_predict_scores_in_batches_and_never_leaves_a_batch_of_one():
    x = torch.randn(257, 4)
    model = _BatchStandardised()
    predicted = predict(model, x, batch_size=128)  # 128 + 129: the last single row joins the second batch
    expected = torch.cat([model(x[:128]), model(x[128:])]).argmax(dim=1).numpy()
    np.testing.assert_array_equal(predicted, expected)
    np.testing.assert_array_equal(predict(model, x, 1.0, batch_size=128), expected)  # extra arguments pass through


def test_score_is_macro_f1_and_accuracy():
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    identity = torch.nn.Identity()
    result = score(identity, x, np.array([0, 1, 1, 1]))
    assert result["accuracy"] == pytest.approx(0.75)
    # class 0: precision 1/2, recall 1 -> F1 2/3; class 1: precision 1, recall 2/3 -> F1 4/5
    assert result["macro_f1"] == pytest.approx((2 / 3 + 4 / 5) / 2)


def test_residual_adapter_starts_as_the_identity_and_trains():
    torch.manual_seed(0)
    adapter = ResidualAdapter(6, 10).eval()
    x = torch.randn(5, 6)
    torch.testing.assert_close(adapter(x), x)
    adapter.train()
    adapter(x).square().sum().backward()
    assert adapter.inner[-1].weight.grad.abs().sum() > 0  # the zero output layer still receives gradient


def test_zero_padding_makes_cross_width_retrieval_see_only_the_shared_coordinates():
    rng = np.random.default_rng(0)
    narrow, wide = rng.standard_normal((40, 3)), rng.standard_normal((40, 8))
    padded = zero_pad(narrow, 8)
    assert padded.shape == (40, 8) and np.all(padded[:, 3:] == 0)
    # Retrieval of padded narrow queries in the wide index == retrieval in the wide index's first 3 coordinates,
    # up to the index's row norms: with an index of unit-norm rows over 3 coordinates the two agree exactly.
    wide[:, 3:] = 0
    assert retrieval(padded, wide) == pytest.approx(retrieval(narrow, wide[:, :3]))
    same = retrieval(wide, wide)
    assert same == pytest.approx((1.0, 1.0, 1.0))


def test_matched_similarity_is_one_for_the_reference_and_invariant_to_scale():
    r = torch.randn(30, 7)
    assert matched_similarity(r, r) == pytest.approx(1.0)
    assert matched_similarity(3 * r, r) == pytest.approx(1.0)
    assert matched_similarity(-r, r) == pytest.approx(-1.0)
