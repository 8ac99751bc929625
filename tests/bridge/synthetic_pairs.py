"""Pairs of embedding spaces with a known relation between them."""

from __future__ import annotations

import numpy as np

from latentstitch.invariance import random_transform


def rotated_scaled_shifted(seed: int, n: int = 150, d: int = 24, noise: float = 0.1):
    """target = 2.5 * source @ R + shift + noise: a translation route recovers it. Returns the source, the target
    and the noise-free map."""
    rng = np.random.default_rng(seed)
    source = rng.normal(size=(n, d)).astype(np.float32)
    rotation = random_transform("orthogonal", d, seed).matrix
    shift = 3.0 * rng.normal(size=d)

    def image(x):
        return (2.5 * x @ rotation + shift).astype(np.float32)

    target = image(source) + noise * rng.normal(size=(n, d)).astype(np.float32)
    return source, target, image


def angle_preserving_per_class(seed: int, n: int = 150, d: int = 24, classes: int = 4):
    """target_i = s_c(i) * source_i @ R with one scale per class (0.05 to 20): not a linear map of the source, but
    every angle between two vectors is kept, so cosine relative representations agree exactly."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    source = 2.0 * rng.normal(size=(classes, d))[labels] + rng.normal(size=(n, d))
    rotation = random_transform("orthogonal", d, seed).matrix
    target = np.geomspace(0.05, 20.0, classes)[labels][:, None] * (source @ rotation)
    return source.astype(np.float32), target.astype(np.float32), labels
