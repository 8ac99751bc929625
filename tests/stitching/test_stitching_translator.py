"""Latent translation against relative representations on the same data: a head trained on space Y, used on X."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from latentstitch.invariance import AXIS_SCALE, ORTHOGONAL, TRANSLATION, random_transform
from latentstitch.relative import StandardScaling, relative_projection
from latentstitch.stitching import LatentTranslator, LeastSquares, Procrustes

CLASSES, WIDTH = 5, 20
CHANCE = 1 / CLASSES


def latent_classes(n, means, rng):
    labels = rng.integers(0, len(means), n)
    return means[labels] + rng.standard_normal((n, means.shape[1])), labels


def orthogonal_rescaled_shifted(z):
    return 4.0 * z @ random_transform(ORTHOGONAL, WIDTH, 1).matrix + 7.0


def nonlinear_wider(z):
    """A random one-hidden-layer tanh network into 32 dimensions: not an affine function of z."""
    rng = np.random.default_rng(2)
    hidden = np.tanh(z @ rng.standard_normal((WIDTH, 48)) / np.sqrt(WIDTH) + 0.5 * rng.standard_normal(48))
    return 3.0 * hidden @ rng.standard_normal((48, 32)) / np.sqrt(48) + 1.0


def share_of_native(accuracy, native):
    """How much of the native head's above-chance accuracy is kept (1 = all of it)."""
    return (accuracy - CHANCE) / (native - CHANCE)


@pytest.mark.slow
@pytest.mark.parametrize("space_y", [orthogonal_rescaled_shifted, nonlinear_wider])
def test_translation_and_relative_representations_both_let_a_head_trained_on_y_read_x(space_y):
    rng = np.random.default_rng(0)
    means = 0.5 * rng.standard_normal((CLASSES, WIDTH))  # overlapping classes: the native head is far from perfect
    (x_train, labels_train), (x_test, labels_test) = latent_classes(2000, means, rng), latent_classes(2000, means, rng)
    x_anchors, _ = latent_classes(300, means, rng)  # parallel anchors: the same inputs embedded in both spaces
    y_train, y_test, y_anchors = space_y(x_train), space_y(x_test), space_y(x_anchors)

    head = LogisticRegression(max_iter=5000).fit(y_train, labels_train)  # trained on Y only
    native = head.score(y_test, labels_test)
    padded_x = np.pad(x_test, ((0, 0), (0, y_test.shape[1] - WIDTH)))
    absolute = head.score(padded_x, labels_test)  # X fed to Y's head as it is
    translated = {
        name: head.score(LatentTranslator(stitcher).fit(x_anchors, y_anchors).transform(x_test), labels_test)
        for name, stitcher in [("procrustes", Procrustes()), ("least_squares", LeastSquares())]
    }
    relative_head = LogisticRegression(max_iter=5000).fit(
        relative_projection(y_train, y_anchors, center=True), labels_train
    )
    relative = relative_head.score(relative_projection(x_test, x_anchors, center=True), labels_test)

    assert native > 0.6
    assert share_of_native(absolute, native) < 0.25
    if space_y is orthogonal_rescaled_shifted:
        # Y is an exact similarity transform of X: translation recovers it, centred cosine is invariant to it
        for accuracy in (*translated.values(), relative):
            assert accuracy >= native - 0.02
    else:
        # Not affine: the linear translation and the relative projection both keep most of the accuracy
        assert translated["least_squares"] >= native - 0.05
        for accuracy in (translated["procrustes"], relative):
            assert share_of_native(accuracy, native) > 0.75


def test_translator_is_scale_translate_fit_unscale():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 6)) * rng.uniform(0.1, 10, 6) + 3
    y = x @ rng.standard_normal((6, 4)) + rng.standard_normal((200, 4))
    translator = LatentTranslator(LeastSquares()).fit(x, y)
    source, target = StandardScaling().fit(x), StandardScaling().fit(y)
    inner = LeastSquares().fit(source.transform(x), target.transform(y))
    expected = target.inverse_transform(inner.transform(source.transform(x)))
    np.testing.assert_allclose(translator.transform(x), expected, atol=1e-10)
    np.testing.assert_allclose(translator.stitcher_.coef_, inner.coef_)
    # the stitcher passed in is cloned, never fitted itself
    stitcher = Procrustes()
    LatentTranslator(stitcher).fit(x, y)
    assert not hasattr(stitcher, "coef_")


def test_standardized_translation_is_invariant_to_rescaling_and_shifting_the_source_axes():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((300, 8)), rng.standard_normal((300, 8))
    distort = random_transform(AXIS_SCALE, 8, 3)
    shift = random_transform(TRANSLATION, 8, 4)
    moved = shift(distort(x))
    translator = LatentTranslator()
    np.testing.assert_allclose(translator.fit(moved, y).transform(moved), translator.fit(x, y).transform(x), atol=1e-10)


def test_translator_takes_two_dimensional_embeddings():
    x = np.zeros((4, 3, 2, 2))
    with pytest.raises(ValueError, match="source: expected a 2-D array"):
        LatentTranslator().fit(x, x)
