"""RelativeProjection and RobustRelativeProjection as layers (on the ``--device``)."""

import numpy as np
import pytest
import torch
from torch import nn

from latentstitch import RelativeProjection, RobustRelativeProjection, relative_projection


def test_module_equals_the_function_and_holds_anchors_as_a_buffer(device):
    x, anchors = torch.randn(10, 4, device=device), torch.randn(6, 4, device=device)
    layer = RelativeProjection(anchors=anchors)
    torch.testing.assert_close(layer(x), relative_projection(x, anchors))
    assert "anchors" in layer.state_dict()
    restored = RelativeProjection(num_anchors=6).to(device)
    restored.load_state_dict(layer.state_dict())
    torch.testing.assert_close(restored(x), layer(x))


def test_anchors_given_at_forward_take_precedence(device):
    x, held, given = (torch.randn(n, 3, device=device) for n in (5, 4, 4))
    torch.testing.assert_close(RelativeProjection(anchors=held)(x, given), relative_projection(x, given))


@pytest.mark.parametrize("norm", ["l2", "layernorm", "batchnorm"])
def test_output_normalisations(norm, device):
    x, anchors = torch.randn(16, 5, device=device), torch.randn(7, 5, device=device)
    out = RelativeProjection(anchors=anchors, output_norm=norm).to(device)(x)
    r = relative_projection(x, anchors)
    if norm == "l2":
        torch.testing.assert_close(out, r / r.norm(dim=1, keepdim=True))
    elif norm == "layernorm":
        torch.testing.assert_close(out, nn.functional.layer_norm(r, (7,)))
    else:
        torch.testing.assert_close(out, nn.functional.batch_norm(r, None, None, training=True))


def test_gradients_reach_the_encoder(device):
    encoder = nn.Linear(3, 4).to(device)
    layer = RelativeProjection(output_norm="layernorm", num_anchors=5).to(device)
    inputs = torch.randn(8, 3, device=device)
    with torch.no_grad():  # anchors re-embedded without gradient, as in the official code
        anchors = encoder(torch.randn(5, 3, device=device))
    layer(encoder(inputs), anchors).pow(2).sum().backward()
    assert encoder.weight.grad is not None and encoder.weight.grad.abs().sum() > 0


def test_errors():
    with pytest.raises(ValueError, match="anchors: none given to forward"):
        RelativeProjection()(torch.randn(2, 3))
    with pytest.raises(ValueError, match="num_anchors: output_norm='layernorm' has parameters per anchor"):
        RelativeProjection(output_norm="layernorm")
    with pytest.raises(ValueError, match="anchors: expected 4 anchors, got 3"):
        RelativeProjection(num_anchors=4)(torch.randn(2, 3), torch.randn(3, 3))
    with pytest.raises(ValueError, match="output_norm: expected one of"):
        RelativeProjection(output_norm="rms")
    with pytest.raises(ValueError, match="unknown similarity"):
        RelativeProjection("cos")


def test_robust_projection_standardises_with_batch_statistics_like_batchnorm(device):
    g = torch.Generator().manual_seed(0)
    x, anchors = (torch.randn(32, 6, generator=g) * 3 + 2).to(device), torch.randn(9, 6, generator=g).to(device)
    layer = RobustRelativeProjection(6, momentum=0.3).to(device)
    reference = nn.BatchNorm1d(6, affine=False, momentum=0.3).to(device)
    out = layer(x, anchors)
    standardised = reference(x)
    mean, std = x.mean(0), (x.var(0, unbiased=False) + 1e-5).sqrt()
    expected = relative_projection(standardised, (anchors - mean) / std)
    torch.testing.assert_close(out, expected)
    # running statistics follow nn.BatchNorm1d exactly
    layer(x * 2, anchors)
    reference(x * 2)
    torch.testing.assert_close(layer.running_mean, reference.running_mean)
    torch.testing.assert_close(layer.running_var, reference.running_var)


def test_robust_projection_uses_running_statistics_in_eval_mode(device):
    layer = RobustRelativeProjection(4, anchors=torch.randn(5, 4)).to(device)
    for _ in range(50):
        layer(torch.randn(64, 4, device=device) * 2 + 1)
    layer.eval()
    x = torch.randn(1, 4, device=device)  # a single sample is fine in eval mode
    scale = torch.rsqrt(layer.running_var + layer.eps)
    expected = relative_projection((x - layer.running_mean) * scale, (layer.anchors - layer.running_mean) * scale)
    torch.testing.assert_close(layer(x), expected)
    np.testing.assert_allclose(layer.running_mean.cpu().numpy(), 1.0, atol=0.15)


def test_robust_projection_errors():
    layer = RobustRelativeProjection(3, anchors=torch.randn(4, 3))
    with pytest.raises(ValueError, match="x: batch statistics need at least 2 samples in train mode"):
        layer(torch.randn(1, 3))
    with pytest.raises(ValueError, match="x: expected 3 features, got 2"):
        layer(torch.randn(5, 2))


def test_robust_projection_fits_frozen_embeddings_and_returns_the_input_type(rng):
    anchors = (rng.normal(size=(40, 6)) * 3 + 2).astype(np.float32)
    x = (rng.normal(size=(9, 6)) * 3 + 2).astype(np.float32)
    layer = RobustRelativeProjection(6).fit(anchors)
    assert not layer.training
    out = layer.transform(x)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (9, 40)
    mean, std = anchors.mean(0), np.sqrt(anchors.var(0) + layer.eps)
    expected = relative_projection((x - mean) / std, (anchors - mean) / std)
    np.testing.assert_allclose(out, expected, atol=1e-5)
    # frozen: no batch dependence, and the statistics never move
    np.testing.assert_allclose(layer.transform(x[:1]), out[:1], atol=1e-6)
    assert isinstance(layer.transform(torch.from_numpy(x)), torch.Tensor)
    np.testing.assert_allclose(layer.running_mean.numpy(), mean, rtol=1e-5)


def test_robust_projection_frozen_is_invariant_to_per_feature_scale_permutation_and_shift(rng):
    anchors, x = rng.normal(size=(30, 5)), rng.normal(size=(7, 5))
    scale, order, shift = (
        rng.uniform(0.1, 10, size=5) * rng.choice([-1, 1], size=5),
        rng.permutation(5),
        rng.normal(size=5),
    )

    def moved(v):
        return (v * scale + shift)[:, order]

    first = RobustRelativeProjection(5, eps=1e-12).fit(anchors).transform(x)
    second = RobustRelativeProjection(5, eps=1e-12).fit(moved(anchors)).transform(moved(x))
    np.testing.assert_allclose(first, second, atol=1e-9)


def test_robust_projection_floors_near_dead_features(rng):
    anchors, x = rng.normal(size=(30, 4)), rng.normal(size=(6, 4))
    dead_anchors, dead_x = anchors.copy(), x.copy()
    dead_anchors[:, 3] = 1e-30 * rng.normal(size=30)
    dead_x[:, 3] = 1e-30 * rng.normal(size=6)
    without = RobustRelativeProjection(3, eps=0.0).fit(anchors[:, :3]).transform(x[:, :3])
    with_dead = RobustRelativeProjection(4, eps=0.0).fit(dead_anchors).transform(dead_x)
    np.testing.assert_allclose(with_dead, without, atol=1e-6)  # unfloored, the dead feature would weigh as much


def test_robust_projection_transform_needs_fit_and_the_right_width(rng):
    with pytest.raises(ValueError, match="call fit"):
        RobustRelativeProjection(3).transform(rng.normal(size=(2, 3)))
    layer = RobustRelativeProjection(3).fit(rng.normal(size=(5, 3)))
    with pytest.raises(ValueError, match="x: expected 3 features, got 2"):
        layer.transform(rng.normal(size=(2, 2)))
    with pytest.raises(ValueError, match="anchors: expected 3 features"):
        RobustRelativeProjection(3).fit(rng.normal(size=(5, 4)))
