"""Every invariance a measure claims holds (hypothesis over seeds and sizes); every measure changes under a
transformation it does not claim. The measures run on tensors on the ``--device``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latentstitch import invariance
from latentstitch.invariance import random_transform
from latentstitch.similarity import MEASURES

OPTIONS = {"minibatch_cka": {"batch_size": 20}}


def options(name: str, n: int) -> dict:
    """The measure's test options; a row option (deconfounded CKA's confounder) is a fixed random input of n rows,
    left untouched by the transformations."""
    out = dict(OPTIONS.get(name, {}))
    for option in MEASURES[name].row_options:
        out[option] = np.random.default_rng(n).standard_normal((n, 3))
    return out


def paired_data(seed: int, n: int, p: int, q: int, same_space: bool):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, p)) * np.linspace(0.6, 2.0, p) + rng.normal(size=p)
    if same_space:
        return x, x + 0.7 * rng.standard_normal((n, p))
    y = np.tanh(x @ rng.standard_normal((p, q)) / np.sqrt(p)) + 0.4 * rng.standard_normal((n, q))
    return x, y


def value(name: str, x, y, on) -> float:
    extra = {key: on(v) if isinstance(v, np.ndarray) else v for key, v in options(name, x.shape[0]).items()}
    return float(MEASURES[name](*on(x, y), **extra))


CLAIMS = sorted(
    (name, side, kind)
    for name, spec in MEASURES.items()
    for side, kinds in (("x", spec.invariances_x), ("y", spec.invariances_y))
    for kind in kinds
    if not (spec.same_space and side == "y")  # same-space measures: one transform acts on both
)


@pytest.mark.parametrize(("name", "side", "kind"), CLAIMS)
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(40, 70), p=st.integers(2, 7), q=st.integers(2, 7))
def test_claimed_invariance_holds(name, side, kind, seed, n, p, q, on):
    spec = MEASURES[name]
    x, y = paired_data(seed, n, p, p if spec.same_space else q, spec.same_space)
    before = value(name, x, y, on)
    if spec.same_space:
        transform = random_transform(kind, p, seed + 1)
        after = value(name, transform(x), transform(y), on)
    elif side == "x":
        after = value(name, random_transform(kind, p, seed + 1)(x), y, on)
    else:
        after = value(name, x, random_transform(kind, q, seed + 1)(y), on)
    assert after == pytest.approx(before, abs=1e-7)


# A transformation each measure does not claim, and that must change it. "cube" (elementwise x^3) is for the
# CCA family, which is invariant to every affine map in the vocabulary.
NOT_CLAIMED = {
    "linear_cka": ("x", invariance.INVERTIBLE_LINEAR),
    "debiased_cka": ("x", invariance.AXIS_SCALE),
    "rbf_cka": ("x", invariance.AXIS_SCALE),
    "minibatch_cka": ("x", invariance.INVERTIBLE_LINEAR),
    "r2_linear": ("y", invariance.AXIS_SCALE),
    "mean_cca": ("x", "cube"),
    "r2_cca": ("y", "cube"),
    "svcca": ("x", invariance.AXIS_SCALE),
    "pwcca": ("x", invariance.ORTHOGONAL),
    "procrustes_distance": ("x", invariance.AXIS_SCALE),
    "shape_metric_angular": ("y", invariance.INVERTIBLE_LINEAR),
    "rsa": ("x", invariance.AXIS_SCALE),
    "mutual_knn": ("x", invariance.TRANSLATION),
    "jaccard_at_k": ("both", invariance.AXIS_SCALE),
    "mrr": ("both", invariance.AXIS_SCALE),
    "matched_cosine": ("both", invariance.TRANSLATION),
    "cknna": ("x", invariance.TRANSLATION),
    "cycle_knn": ("y", invariance.TRANSLATION),
    "knn_jaccard": ("x", invariance.TRANSLATION),
    "rank_similarity": ("x", invariance.TRANSLATION),
    "second_order_cosine": ("y", invariance.TRANSLATION),
    "gulp": ("x", "cube"),
    "pnka": ("x", invariance.AXIS_SCALE),
    "deconfounded_cka": ("y", invariance.AXIS_SCALE),
    "distance_correlation": ("x", invariance.AXIS_SCALE),
    "eigenspace_overlap": ("x", invariance.TRANSLATION),
    "ensd": ("x", invariance.AXIS_SCALE),
    "correlation_match": ("x", invariance.ORTHOGONAL),
    "soft_correlation_match": ("y", invariance.AXIS_REFLECTION),
    "permutation": ("x", invariance.AXIS_SCALE),
    "aligned_cosine": ("y", invariance.TRANSLATION),
}


def test_every_measure_has_a_non_claimed_case():
    assert set(NOT_CLAIMED) == set(MEASURES)


@pytest.mark.parametrize("name", sorted(NOT_CLAIMED))
def test_non_claimed_transformation_changes_the_value(name, on):
    spec = MEASURES[name]
    side, kind = NOT_CLAIMED[name]
    assert kind == "cube" or (kind not in spec.invariances_x if side != "y" else kind not in spec.invariances_y)
    x, y = paired_data(7, 60, 6, 6 if spec.same_space else 5, spec.same_space)

    def apply(t):
        return t**3 if kind == "cube" else random_transform(kind, t.shape[1], 11)(t)

    if side == "both":
        after = value(name, apply(x), apply(y), on)
    elif side == "x":
        after = value(name, apply(x), y, on)
    else:
        after = value(name, x, apply(y), on)
    assert abs(after - value(name, x, y, on)) > 1e-3
