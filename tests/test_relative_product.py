"""Product of invariances and multi-layer relative representations: aggregation, claimed invariances, modules."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from latentstitch import relative_projection
from latentstitch.invariance import ORTHOGONAL, TRANSLATION, random_transform
from latentstitch.relative import (
    AGGREGATIONS,
    MultiLayerRelativeProjection,
    ProductOfInvariances,
    multilayer_relative_projection,
    product_of_invariances,
    shared_invariances,
)

PAIRS = [
    (("cosine", "euclidean", "l1", "linf"), kind)
    for kind in sorted(shared_invariances(("cosine", "euclidean", "l1", "linf")))
] + [(("cosine", "euclidean"), kind) for kind in sorted(shared_invariances(("cosine", "euclidean")))]


def _standardised(r: np.ndarray) -> np.ndarray:
    return (r - r.mean(1, keepdims=True)) / r.std(1, keepdims=True)


def test_claimed_invariances_are_the_intersection_plus_scale_for_homogeneous_distances():
    assert shared_invariances() == {"isotropic_scale", "permutation", "axis_reflection"}
    assert shared_invariances(("cosine", "euclidean")) == {
        "orthogonal",
        "isotropic_scale",
        "permutation",
        "axis_reflection",
    }
    assert shared_invariances(("euclidean", "l1")) >= {TRANSLATION}


@pytest.mark.parametrize(("similarities", "kind"), PAIRS)
@given(seed=st.integers(0, 2**31 - 1), dim=st.integers(2, 10))
def test_claimed_invariance_holds(similarities, kind, seed, dim):
    rng = np.random.default_rng(seed)
    x, anchors = rng.normal(size=(15, dim)), rng.normal(size=(9, dim))
    t = random_transform(kind, dim, seed)
    before = product_of_invariances(x, anchors, similarities)
    np.testing.assert_allclose(product_of_invariances(t(x), t(anchors), similarities), before, atol=1e-7)


@pytest.mark.parametrize("kind", [ORTHOGONAL, TRANSLATION])
def test_unclaimed_transformations_change_the_product_but_not_the_components_invariant_to_them(kind, rng):
    x, anchors = rng.normal(size=(20, 6)), rng.normal(size=(7, 6))
    t = random_transform(kind, 6, seed=3)
    before, after = product_of_invariances(x, anchors), product_of_invariances(t(x), t(anchors))
    assert not np.allclose(before, after, atol=1e-3)
    # the concatenation keeps each component: the euclidean block (columns 7-13) is invariant to both
    np.testing.assert_allclose(before[:, 7:14], after[:, 7:14], atol=1e-8)


def test_concat_and_sum_of_standardised_spaces(rng):
    x, anchors = rng.normal(size=(10, 4)), rng.normal(size=(5, 4))
    spaces = [_standardised(relative_projection(x, anchors, name)) for name in ("cosine", "l1")]
    np.testing.assert_allclose(product_of_invariances(x, anchors, ("cosine", "l1")), np.hstack(spaces), atol=1e-12)
    np.testing.assert_allclose(product_of_invariances(x, anchors, ("cosine", "l1"), "sum"), sum(spaces), atol=1e-12)
    options = {"geodesic": {"n_neighbors": 2}}
    out = product_of_invariances(x, anchors, ("cosine", "geodesic"), similarity_options=options)
    assert out.shape == (10, 10)


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_module_aggregations_train_and_save(aggregation):
    torch.manual_seed(0)
    anchors = torch.randn(6, 5)
    layer = ProductOfInvariances(aggregation=aggregation, anchors=anchors)
    x = torch.randn(12, 5, requires_grad=True)
    out = layer(x)
    assert out.shape == (12, layer.out_features)
    out.pow(2).sum().backward()
    assert x.grad is not None and all(p.grad is not None for p in layer.aggregate.parameters() if p.requires_grad)
    restored = ProductOfInvariances(aggregation=aggregation, num_anchors=6)
    restored.load_state_dict(layer.state_dict())
    torch.testing.assert_close(restored(x), layer(x))


def test_module_at_initialisation_equals_the_frozen_function():
    torch.manual_seed(0)
    x, anchors = torch.randn(8, 4, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    for aggregation in ("concat", "sum"):
        layer = ProductOfInvariances(aggregation=aggregation, anchors=anchors).double()
        torch.testing.assert_close(layer(x), product_of_invariances(x, anchors, aggregation=aggregation))


def test_multilayer_is_invariant_to_a_different_rotation_per_layer(rng):
    layers = [rng.normal(size=(20, 6)), rng.normal(size=(20, 4))]
    anchors = [layer[:5] for layer in layers]
    t = [random_transform(ORTHOGONAL, 6, seed=1), random_transform(ORTHOGONAL, 4, seed=2)]
    before = multilayer_relative_projection(layers, anchors)
    after = multilayer_relative_projection([t[0](layers[0]), t[1](layers[1])], [t[0](anchors[0]), t[1](anchors[1])])
    np.testing.assert_allclose(after, before, atol=1e-10)
    assert before.shape == (20, 10)
    expected = sum(_standardised(relative_projection(x, a)) for x, a in zip(layers, anchors, strict=True))
    np.testing.assert_allclose(multilayer_relative_projection(layers, anchors, aggregation="sum"), expected)


def test_multilayer_module_reads_another_encoder_with_its_own_anchors(rng):
    layers = [torch.randn(10, 6), torch.randn(10, 3)]
    anchors = [layer[:4] for layer in layers]
    module = MultiLayerRelativeProjection(2, 4, aggregation="mlp", anchors=anchors)
    assert module(layers).shape == (10, 4)
    other = [torch.randn(10, 8), torch.randn(10, 8)]  # another encoder, other widths
    assert module(other, [layer[:4] for layer in other]).shape == (10, 4)


def test_errors(rng):
    x = rng.normal(size=(5, 3))
    with pytest.raises(ValueError, match="similarities: names repeat"):
        product_of_invariances(x, x, ("cosine", "cosine"))
    with pytest.raises(ValueError, match="unknown similarity 'cos'"):
        product_of_invariances(x, x, ("cos", "l1"))
    with pytest.raises(ValueError, match="aggregation: expected one of 'concat', 'sum'"):
        product_of_invariances(x, x, aggregation="mlp")
    with pytest.raises(ValueError, match="similarity_options:.*'dot'.*not among"):
        product_of_invariances(x, x, similarity_options={"dot": {"scaled": True}})
    with pytest.raises(ValueError, match="num_anchors: the aggregation has parameters per anchor"):
        ProductOfInvariances()
    with pytest.raises(ValueError, match=r"anchors: expected one \(m, d_l\) array per layer \(2\), got 1"):
        multilayer_relative_projection([x, x], [x])
    with pytest.raises(ValueError, match="same anchors"):
        multilayer_relative_projection([x, x], [x, x[:3]])
