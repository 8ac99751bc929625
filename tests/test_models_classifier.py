"""Classifiers with absolute/relative latents: anchor refresh, stitching, the mixed schedule, real-data training."""

import numpy as np
import pytest
import torch
from torch import nn

from latentstitch import select_anchors
from latentstitch.data import load_fashion_mnist, load_mnist_5k
from latentstitch.losses import TopologicalDensificationLoss, death_times
from latentstitch.models import LatentClassifier, ZeroShotStitched, accuracy, cnn_encoder, mlp_encoder, train_classifier
from latentstitch.training import (
    ClassAccumulationSampler,
    ClassBalancedBatchSampler,
    ClassificationObjective,
    TensorBatches,
    batchnorm_eval,
    cyclical_weight,
    fit,
)


class CountingEncoder(nn.Module):
    """Counts the forwards that see the anchors (batches of exactly ``anchors`` rows)."""

    def __init__(self, anchors: int):
        super().__init__()
        self.anchors = anchors
        self.anchor_calls = 0
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        self.anchor_calls += len(x) == self.anchors
        return self.linear(x)


def test_anchors_refresh_every_period_in_training_and_always_in_eval():
    encoder = CountingEncoder(anchors=5)
    model = LatentClassifier(encoder, 3, 2, anchor_inputs=torch.randn(5, 4), anchor_refresh=3)
    model.train()
    x = torch.randn(8, 4)
    calls = []
    for _ in range(7):
        model(x)
        calls.append(encoder.anchor_calls)
    assert calls == [1, 1, 1, 2, 2, 2, 3]
    model.eval()
    model(x)
    model(x)
    assert encoder.anchor_calls == 5
    model.train()  # switching modes drops the cache: the next training forward re-embeds
    model(x)
    assert encoder.anchor_calls == 6


def test_cached_anchors_are_the_embeddings_of_the_weights_that_made_them():
    torch.manual_seed(0)
    model = LatentClassifier(nn.Linear(4, 3), 3, 2, anchor_inputs=torch.randn(5, 4), anchor_refresh=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = torch.randn(8, 4), torch.tensor([0, 1] * 4)
    for step in range(4):
        fresh = model.encoder(model.anchors.inputs).detach()  # the anchors under the current weights
        loss = nn.functional.cross_entropy(model(x), y)  # one training forward: one use of the anchors
        cached = model.anchors._cache
        assert not cached.requires_grad  # no gradient through the anchors
        assert torch.allclose(cached, fresh) == (step % 2 == 0)  # re-embedded on steps 0 and 2, stale between
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_stitching_pairs_encoder_and_anchors_of_one_model_with_the_head_of_another():
    anchors = torch.randn(6, 5)
    a = LatentClassifier(mlp_encoder(5, 8, 4), 4, 3, anchor_inputs=anchors)
    b = LatentClassifier(mlp_encoder(5, 8, 4), 4, 3, anchor_inputs=anchors)
    x = torch.randn(10, 5)
    a.eval(), b.eval()
    with torch.no_grad():
        assert torch.equal(ZeroShotStitched(a, b)(x), b.head(a.latents(x)))
    absolute = LatentClassifier(mlp_encoder(5, 8, 4), 4, 3)
    with pytest.raises(ValueError, match="relative width 6 vs absolute width 4"):
        ZeroShotStitched(a, absolute)


def test_cnn_and_robust_variants_build_and_run():
    images = torch.rand(12, 1, 28, 28)
    model = LatentClassifier(
        cnn_encoder(latent_dim=16, channels=(4, 8)), 16, 10, anchor_inputs=images[:7], projection="robust"
    )
    assert model(images).shape == (12, 10) and model.latent_width == 7
    with pytest.raises(ValueError, match="projection: expected one of 'cosine', 'robust'"):
        LatentClassifier(nn.Linear(4, 3), 3, 2, anchor_inputs=torch.randn(5, 4), projection="dot")


def test_mixed_schedule_updates_batchnorm_only_on_random_batches():
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3))
    model = LatentClassifier(encoder, 3, 2, anchor_inputs=torch.randn(5, 4), projection="robust")
    objective = ClassificationObjective(TopologicalDensificationLoss(1.0), weight=0.1)
    norms = [encoder[1], model.projection]
    model.train()
    x, y = torch.randn(8, 4), torch.zeros(8, dtype=torch.long)

    before = [n.running_mean.clone() for n in norms]
    assert objective(model, (x, y, False)) is None  # statistics only
    after_random = [n.running_mean.clone() for n in norms]
    assert all(not torch.equal(a, b) for a, b in zip(before, after_random, strict=True))

    out = objective(model, (x + 3, y, True))
    assert set(out) == {"loss", "cross_entropy", "topological", "accuracy"} and out["loss"].requires_grad
    assert all(torch.equal(n.running_mean, a) for n, a in zip(norms, after_random, strict=True))
    assert all(n.training for n in norms)  # modes restored after the class-pure batch
    with batchnorm_eval(model):
        assert not any(n.training for n in norms) and model.training


def test_cyclical_weight_ramps_four_times():
    weight = cyclical_weight(100, 0.02)
    values = [weight(s) for s in range(100)]
    assert values[0] == 0 and values[25] == 0 and values[50] == 0 and values[75] == 0
    assert values[10] == pytest.approx(0.02 * 10 / 18.75)
    assert values[20] == values[24] == 0.02 and weight(500) == 0.02


# Relative latents train about as well as absolute ones. A statistical claim, so it is tested over seeds with margins
# from the measured spread of the per-seed difference (relative - absolute test accuracy), not on one seed: on
# Fashion-MNIST a single seed's robust score moves by 3 points between CPU kernels (AVX2 0.787, AVX-512 0.754 for
# seed 0), which a one-seed, 3-point margin cannot absorb.
# Measured here (6 seeds, 6 epochs, AVX2; mean +- std of the per-seed difference):
#   MNIST-5k       cosine -0.007 +- 0.006, robust -0.008 +- 0.005 (absolute 0.945-0.956)
#   Fashion-MNIST  cosine +0.001 +- 0.018, robust -0.054 +- 0.045 (absolute 0.785-0.826; robust 0.709-0.814)
# So on Fashion-MNIST the robust projection does lag absolute training at 6 epochs (by ~5 points, with a large seed
# spread): the test states that lag instead of a parity it does not have. Margins: the measured mean minus about
# four standard deviations of the mean over the seeds used.
LOADERS = [
    # (loader, seeds, accuracy the absolute MLPs must reach on average, margins for cosine and robust)
    pytest.param(load_mnist_5k, (0, 1), 0.9, 0.03, 0.03, id="mnist-5k"),
    # 5,000 / 1,000 of the official split keeps each training to seconds; Fashion-MNIST is harder than MNIST.
    pytest.param(
        lambda: load_fashion_mnist(n_train=5000, n_test=1000),
        (0, 1, 2),
        0.75,
        0.045,
        0.16,
        id="fashion-mnist",
        marks=pytest.mark.integration,
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("loader", "seeds", "trained", "cosine_margin", "robust_margin"), LOADERS)
@pytest.mark.usefixtures("one_thread")
def test_relative_classifiers_train_within_a_few_points_of_absolute(
    loader, seeds, trained, cosine_margin, robust_margin
):
    data = loader()
    x, y = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    x_test, y_test = torch.from_numpy(data.x_test), torch.from_numpy(data.y_test)
    flat = data.x_train.reshape(len(x), -1)
    anchors = x[select_anchors(flat, 300, "stratified", labels=data.y_train, seed=0)]
    scores = {kind: [] for kind in ("absolute", "cosine", "robust")}
    for seed in seeds:
        for kind in scores:
            torch.manual_seed(seed)
            model = LatentClassifier(
                mlp_encoder(flat.shape[1], 256, 64),
                64,
                data.num_classes,
                anchor_inputs=None if kind == "absolute" else anchors,
                projection="robust" if kind == "robust" else "cosine",
            )
            train_classifier(model, x, y, epochs=6, seed=seed)
            scores[kind].append(accuracy(model, x_test, y_test))
    mean = {kind: float(np.mean(values)) for kind, values in scores.items()}
    assert mean["absolute"] > trained, scores  # training worked at all
    assert mean["cosine"] > mean["absolute"] - cosine_margin, scores
    assert mean["robust"] > mean["absolute"] - robust_margin, scores


def blobs(n, seed):
    """Four Gaussian classes in 20 dimensions (fixed centres, fresh noise per seed)."""
    y = torch.arange(n) % 4
    centres = torch.randn(4, 20, generator=torch.Generator().manual_seed(99)) * 2
    return centres[y] + 1.5 * torch.randn(n, 20, generator=torch.Generator().manual_seed(seed)), y


def intra_class_death_times(model, x, y, n=16):
    """Death times of class-pure groups of n latents."""
    with torch.no_grad():
        latents = model.latents(x)
    groups = [latents[y == c][s : s + n] for c in y.unique() for s in range(0, int((y == c).sum()) - n + 1, n)]
    return torch.cat([death_times(g) for g in groups])


def train_blobs(schedule, topological, x, y, seed=0):
    torch.manual_seed(seed)
    encoder = nn.Sequential(nn.Linear(20, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 16))
    if schedule == "class-balanced":  # Hofer et al.: b groups of n same-class samples, absolute latents
        model = LatentClassifier(encoder, 16, 4)
        batches = TensorBatches((x, y), ClassBalancedBatchSampler(y, 4, 8, seed=seed))
        objective = ClassificationObjective(topological, 0.1, group_size=8)
        fit(model, objective, batches, epochs=2, progress=False, seed=seed)
    else:  # García-Castellanos et al.: random + class-pure batches, robust relative latents
        model = LatentClassifier(encoder, 16, 4, anchor_inputs=x[:32], projection="robust")
        sampler = ClassAccumulationSampler(y, 16, seed=seed)
        objective = ClassificationObjective(topological, 0.1)
        fit(model, objective, sampler.tagged(x, y), epochs=8, accumulate=sampler.group_size, progress=False, seed=seed)
    return model


# How far the densified death times are from beta, relative to plain training's (the statistic asserted below),
# measured over training seeds 0-4 (AVX2): class-balanced 0.159-0.171; mixed 0.474-0.782 (mean 0.61, std 0.11; seed
# 0 is the worst). One seed's 0.78 sat 1 std below the 0.9 bound, so the claim is tested on the mean of three seeds
# (mean + 4 std of the mean = 0.86 < 0.9 for the mixed schedule).
@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["class-balanced", "mixed"])
@pytest.mark.usefixtures("one_thread")
def test_topological_densification_moves_intra_class_death_times_to_beta(schedule):
    x, y = blobs(512, 0)
    x_test, y_test = blobs(512, 1)
    ratios, shrink, accuracies = [], [], []
    for seed in (0, 1, 2):
        plain = train_blobs(schedule, None, x, y, seed)
        natural = intra_class_death_times(plain, x_test, y_test)
        beta = 0.5 * float(natural.mean())  # ask for clusters twice as dense as plain training makes them
        densified = train_blobs(schedule, TopologicalDensificationLoss(beta), x, y, seed)
        deaths = intra_class_death_times(densified, x_test, y_test)
        ratios.append(float((deaths - beta).abs().mean() / (natural - beta).abs().mean()))
        shrink.append(float(deaths.mean() / natural.mean()))
        accuracies.append(accuracy(densified, x_test, y_test))
    assert np.mean(ratios) < 0.9, ratios
    assert np.mean(shrink) < 1.0, shrink
    assert np.mean(accuracies) > 0.95, accuracies


def test_demo_path_train_classifier_still_returns_per_epoch_losses():
    x = torch.randn(40, 5)
    y = (x[:, 0] > 0).long()
    torch.manual_seed(0)
    model = LatentClassifier(mlp_encoder(5, 8, 4), 4, 2, anchor_inputs=x[:6])
    seen = []
    losses = train_classifier(model, x, y, epochs=3, batch_size=8, on_epoch=lambda e, loss: seen.append((e, loss)))
    assert len(losses) == 3 and [e for e, _ in seen] == [0, 1, 2] and np.allclose([v for _, v in seen], losses)
    assert not model.training
