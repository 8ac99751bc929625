"""Property tests: every invariance a similarity claims holds, and some it does not claim visibly fail.

The projections run on the ``--device`` (the ``on`` fixture moves the inputs there)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from latentstitch import RobustRelativeProjection, relative_projection
from latentstitch.invariance import (
    ALL,
    AXIS_REFLECTION,
    AXIS_SCALE,
    INVERTIBLE_LINEAR,
    ORTHOGONAL,
    PERMUTATION,
    TRANSLATION,
    random_transform,
)
from latentstitch.relative import SIMILARITIES

CLAIMS = sorted((name, kind) for name, spec in SIMILARITIES.items() for kind in spec.invariances)
seeds = st.integers(0, 2**31 - 1)
dims = st.integers(2, 12)


def _space(seed: int, dim: int, n_anchors: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(20, dim)), rng.normal(size=(n_anchors, dim))


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return np.allclose(a, b, rtol=1e-7, atol=1e-7 * max(1.0, np.abs(a).max()))


def _project(on, x: np.ndarray, anchors: np.ndarray, *args, **kwargs) -> np.ndarray:
    return relative_projection(*on(x, anchors), *args, **kwargs).cpu().numpy()


@pytest.mark.parametrize(("name", "kind"), CLAIMS)
@given(seed=seeds, dim=dims)
def test_claimed_invariance_holds(name, kind, seed, dim, on):
    # basis_change needs anchors spanning the space for its claims: give it more anchors than features.
    x, anchors = _space(seed, dim, n_anchors=2 * dim + 1)
    t = random_transform(kind, dim, seed)
    before = _project(on, x, anchors, name)
    after = _project(on, t(x), t(anchors), name)
    assert _close(before, after)


@given(seed=seeds, dim=dims)
def test_centering_adds_translation_invariance_to_cosine(seed, dim, on):
    x, anchors = _space(seed, dim, n_anchors=7)
    t = random_transform(TRANSLATION, dim, seed)
    assert _close(_project(on, x, anchors, center=True), _project(on, t(x), t(anchors), center=True))
    assert not _close(_project(on, x, anchors), _project(on, t(x), t(anchors)))


UNCLAIMED = [
    ("cosine", TRANSLATION),
    ("cosine", AXIS_SCALE),
    ("cosine", INVERTIBLE_LINEAR),
    ("dot", AXIS_SCALE),
    ("euclidean", AXIS_SCALE),
    ("l1", ORTHOGONAL),
    ("linf", ORTHOGONAL),
]


@pytest.mark.parametrize(("name", "kind"), UNCLAIMED)
@given(seed=seeds, dim=st.integers(3, 12))
def test_unclaimed_transformation_changes_the_output(name, kind, seed, dim, on):
    assert kind not in SIMILARITIES[name].invariances
    x, anchors = _space(seed, dim, n_anchors=7)
    t = random_transform(kind, dim, seed)
    assert not _close(_project(on, x, anchors, name), _project(on, t(x), t(anchors), name))


# --- the robust (batch-normalised) projection ----------------------------------------------------------------


def _robust(on, x: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    layer = RobustRelativeProjection(x.shape[1], eps=1e-12).train().to(on(x).device)
    return layer(*on(x, anchors)).detach().cpu().numpy()


@pytest.mark.parametrize("kind", [AXIS_SCALE, PERMUTATION, TRANSLATION, AXIS_REFLECTION])
@given(seed=seeds, dim=dims)
def test_robust_projection_is_invariant_to_the_relu_intertwiner_group(kind, seed, dim, on):
    x, anchors = _space(seed, dim, n_anchors=9)
    t = random_transform(kind, dim, seed)
    assert np.allclose(_robust(on, x, anchors), _robust(on, t(x), t(anchors)), atol=1e-6)


@given(seed=seeds, dim=st.integers(3, 12))
def test_robust_projection_is_not_invariant_to_rotations(seed, dim, on):
    x, anchors = _space(seed, dim, n_anchors=9)
    t = random_transform(ORTHOGONAL, dim, seed)
    assert not np.allclose(_robust(on, x, anchors), _robust(on, t(x), t(anchors)), atol=1e-6)


def test_random_transforms_have_the_structure_their_name_says():
    dim = 6
    for kind in ALL:
        t = random_transform(kind, dim, seed=3)
        m = t.matrix
        assert np.linalg.matrix_rank(m) == dim, kind
        if kind == ORTHOGONAL:
            np.testing.assert_allclose(m.T @ m, np.eye(dim), atol=1e-12)
        if kind in (AXIS_SCALE, AXIS_REFLECTION):
            np.testing.assert_array_equal(m, np.diag(np.diag(m)))
        if kind == PERMUTATION:
            assert sorted(m.sum(axis=0)) == [1] * dim and set(np.unique(m)) == {0.0, 1.0}
        if kind != TRANSLATION:
            np.testing.assert_array_equal(t.shift, 0.0)
