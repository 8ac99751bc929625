"""Convolutional AE/VAE with absolute or relative latents: architecture, losses, training, stitching."""

import math

import pytest
import torch
from torch import nn

from latentstitch.data import load_mnist_5k
from latentstitch.losses import calibrated_reconstruction_loss, free_bits_kl, gaussian_kl
from latentstitch.models import ConvAutoencoder, ZeroShotStitched, reconstruction_objective
from latentstitch.training import RandomBatchSampler, TensorBatches, fit


@pytest.fixture(scope="module")
def mnist():
    data = load_mnist_5k()
    return torch.from_numpy(data.x_train[:512]), torch.from_numpy(data.x_test[:256])


def images(n, shape=(1, 28, 28), seed=0):
    return torch.rand(n, *shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32), (1, 20, 17)])
@pytest.mark.parametrize("variational", [False, True])
@pytest.mark.parametrize("relative", [False, True])
def test_reconstructions_have_the_input_shape_and_range(shape, variational, relative):
    x = images(4, shape)
    model = ConvAutoencoder(
        shape, width=0.25, latent_dim=8, variational=variational, anchor_inputs=x[:3] if relative else None
    )
    out = model(x)
    assert out.reconstruction.shape == x.shape
    assert out.reconstruction.min() >= 0 and out.reconstruction.max() <= 1
    assert out.latents.shape == (4, 3 if relative else 8)
    assert (out.mu is not None) == variational


def test_architecture_follows_relreps():
    model = ConvAutoencoder(anchor_inputs=images(5))
    convs = [m for m in model.encoder.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [32, 64, 128, 256]
    assert all(c.kernel_size == (3, 3) and c.stride == (2, 2) and c.padding == (1, 1) for c in convs)
    assert isinstance(model.encoder[-1][-1], nn.Identity)  # relative: last GELU removed
    assert isinstance(ConvAutoencoder().encoder[-1][-1], nn.GELU)
    transposed = [m for m in model.decoder.modules() if isinstance(m, nn.ConvTranspose2d)]
    assert [t.out_channels for t in transposed] == [128, 64, 32, 32]
    assert isinstance(model.decoder[-1][-1], nn.Sigmoid) and model.decoder[-1][0].out_channels == 1
    assert model.map_shape == (256, 2, 2) and isinstance(model.norm, nn.LayerNorm)
    assert [c.out_channels for c in ConvAutoencoder(width=0.25).encoder.modules() if isinstance(c, nn.Conv2d)] == [
        8,
        16,
        32,
        64,
    ]


def test_calibrated_loss_is_half_n_times_one_plus_log_mse():
    x, x_hat = images(3), images(3, seed=1)
    mse = ((x - x_hat) ** 2).mean()
    expected = 0.5 * x.numel() * (1 + math.log(mse.item()))
    assert calibrated_reconstruction_loss(x_hat, x).item() == pytest.approx(expected, rel=1e-5)


def test_gaussian_kl_matches_torch_distributions():
    mu, logvar = torch.randn(5, 7), torch.randn(5, 7)
    posterior = torch.distributions.Normal(mu, (0.5 * logvar).exp())
    prior = torch.distributions.Normal(torch.zeros(7), torch.ones(7))
    expected = torch.distributions.kl_divergence(posterior, prior).sum(dim=1)
    torch.testing.assert_close(gaussian_kl(mu, logvar), expected)


def test_losses_default_to_the_official_runs():
    x = images(4)
    assert ConvAutoencoder(width=0.25).loss_kind == "calibrated"
    assert ConvAutoencoder(width=0.25, anchor_inputs=x, variational=True).loss_kind == "calibrated"
    vae = ConvAutoencoder(width=0.25, variational=True)
    assert (vae.loss_kind, vae.kl_weight) == ("mse", 0.025)
    vae.eval()
    out = vae(x)
    loss = vae.loss(x, out)
    kl = gaussian_kl(out.mu, out.logvar)
    assert loss["loss"].item() == pytest.approx((((out.reconstruction - x) ** 2).mean() + 0.025 * kl.mean()).item())
    rel = ConvAutoencoder(width=0.25, anchor_inputs=x[:2], variational=True).eval()
    out = rel(x)
    expected = calibrated_reconstruction_loss(out.reconstruction, x) + gaussian_kl(out.mu, out.logvar).sum()
    assert rel.loss(x, out)["loss"].item() == pytest.approx(expected.item())


def test_vae_samples_in_training_and_uses_the_mean_in_eval():
    x = images(4)
    vae = ConvAutoencoder(width=0.25, variational=True, anchor_inputs=x[:3])
    vae.eval()
    assert torch.equal(vae(x).reconstruction, vae(x).reconstruction)
    vae.train()
    assert not torch.equal(vae.decode(vae.encode(x)), vae.decode(vae.encode(x)))


@pytest.mark.slow
@pytest.mark.parametrize("variational", [False, True])
@pytest.mark.parametrize("relative", [False, True])
@pytest.mark.usefixtures("one_thread")
def test_short_training_reduces_reconstruction_error(variational, relative, mnist):
    x, x_test = mnist
    torch.manual_seed(0)
    model = ConvAutoencoder(
        width=0.25, latent_dim=16, variational=variational, anchor_inputs=x[:32] if relative else None
    )

    def test_mse():
        model.eval()
        with torch.no_grad():
            return nn.functional.mse_loss(model(x_test).reconstruction, x_test).item()

    before = test_mse()
    batches = TensorBatches((x,), RandomBatchSampler(len(x), 32, seed=0))
    history = fit(model, reconstruction_objective, batches, epochs=4, grad_clip=10.0, progress=False)
    after = test_mse()
    assert after < 0.5 * before, (before, after)
    assert history[-1]["mse"] < 0.6 * history[0]["mse"]


def test_zero_shot_stitching_of_two_relative_autoencoders():
    x = images(6)
    anchors = images(5, seed=9)
    torch.manual_seed(0)
    a = ConvAutoencoder(width=0.25, anchor_inputs=anchors).eval()
    torch.manual_seed(1)
    b = ConvAutoencoder(width=0.25, anchor_inputs=anchors).eval()
    stitched = ZeroShotStitched(a, b)
    with torch.no_grad():
        out = stitched(x)
        assert out.shape == x.shape
        assert torch.equal(out, b.decode(a.encode(x)))
    with pytest.raises(ValueError, match="relative width 5 vs absolute width 256"):
        ZeroShotStitched(a, ConvAutoencoder(width=0.25))


def test_bad_anchor_images_are_named():
    with pytest.raises(ValueError, match=r"anchor_inputs: expected images of shape \(1, 28, 28\), got \(3, 28, 28\)"):
        ConvAutoencoder(anchor_inputs=torch.rand(4, 3, 28, 28))
    with pytest.raises(ValueError, match="loss: expected one of 'calibrated', 'mse'"):
        ConvAutoencoder(loss="l1")
    with pytest.raises(ValueError, match="width: expected a finite number > 0"):
        ConvAutoencoder(width=0)


def test_free_bits_kl_floors_each_dimension():
    """With no floor it is the batch-mean KL; with a floor, a dimension whose mean KL is below it contributes the
    floor and gets no gradient (what keeps the absolute VAE's latent in use), while the others keep theirs."""
    torch.manual_seed(0)
    mu, logvar = torch.randn(16, 6), torch.randn(16, 6) * 0.1
    torch.testing.assert_close(free_bits_kl(mu, logvar, 0.0), gaussian_kl(mu, logvar).mean())
    mu = mu.clone()
    mu[:, 0] = 0.0  # dimension 0 sits on the prior's mean: KL ~ 0 there
    mu.requires_grad_(True)
    per_dim = (-0.5 * (1 + logvar - mu.square() - logvar.exp())).mean(dim=0)
    floor = float(per_dim[0]) + 0.05
    value = free_bits_kl(mu, logvar, floor)
    value.backward()
    assert mu.grad[:, 0].abs().max() == 0 and mu.grad[:, 1:].abs().max() > 0
    expected = sum(max(float(k), floor) for k in per_dim)
    assert math.isclose(float(value), expected, rel_tol=1e-5)
    with pytest.raises(ValueError, match="free_bits"):
        ConvAutoencoder(variational=False, free_bits=0.5)
