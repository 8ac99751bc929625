"""relative_projection: agreement with direct formulas, type round trips, gradients and errors.

Tests of the math take the ``device`` fixture (``pytest --device cuda`` runs them on a GPU)."""

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

from latentstitch import relative_projection
from latentstitch._core.errors import ZeroNormError
from latentstitch.relative import SIMILARITIES, register_similarity


def _geodesic_reference(x: np.ndarray, a: np.ndarray, k: int = 10) -> np.ndarray:
    """Shortest paths in the symmetric k-NN graph of the anchors (scipy), samples attached to their k nearest
    anchors, divided by the median positive anchor-to-anchor path length."""
    from scipy.sparse.csgraph import shortest_path

    m = len(a)
    k = min(k, m - 1)
    d = cdist(a, a)
    adjacency = np.zeros_like(d)
    for i in range(m):
        for j in np.argsort(d[i])[1 : k + 1]:
            adjacency[i, j] = adjacency[j, i] = d[i, j]
    paths = shortest_path(adjacency, directed=False)
    attach = cdist(x, a)
    out = np.empty((len(x), m))
    for row in range(len(x)):
        nearest = np.argsort(attach[row])[:k]
        out[row] = np.min(attach[row, nearest, None] + paths[nearest], axis=0)
    return out / np.median(paths[paths > 0])


def _whitened_reference(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    mean = a.mean(axis=0)
    covariance = np.cov(a, rowvar=False, bias=True)
    return (x - mean) @ np.linalg.inv(covariance) @ (a - mean).T


def _reference(name: str, x: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Each similarity written directly from its definition, in float64 numpy/scipy."""
    cos = 1 - cdist(x, a, "cosine")
    if name == "geodesic":
        return _geodesic_reference(x, a)
    if name == "whitened":
        return _whitened_reference(x, a)
    return {
        "cosine": cos,
        "angular": 1 - np.arccos(np.clip(cos, -1, 1)) / math.pi,
        "dot": x @ a.T,
        "euclidean": cdist(x, a, "euclidean"),
        "l1": cdist(x, a, "cityblock"),
        "linf": cdist(x, a, "chebyshev"),
        "basis_change": np.linalg.lstsq(a.T, x.T, rcond=None)[0].T,
    }[name]


@pytest.mark.parametrize("name", sorted(SIMILARITIES))
def test_matches_definition(name, rng, on):
    x = rng.normal(size=(40, 6))
    anchors = rng.normal(size=(15, 6))  # more than 10 + 1: the geodesic graph is not complete
    got = relative_projection(*on(x, anchors), name).cpu().numpy()
    np.testing.assert_allclose(got, _reference(name, x, anchors), atol=1e-10)


def test_scaled_dot_divides_by_sqrt_dim(rng, on):
    x, anchors = rng.normal(size=(5, 16)), rng.normal(size=(3, 16))
    got = relative_projection(*on(x, anchors), "dot", scaled=True).cpu().numpy()
    np.testing.assert_allclose(got, x @ anchors.T / 4.0)


def test_basis_change_reconstructs_samples_in_the_anchor_span(rng, on):
    anchors = rng.normal(size=(12, 5))  # more anchors than features: the anchors span the space
    x = rng.normal(size=(30, 5))
    coordinates = relative_projection(*on(x, anchors), "basis_change").cpu().numpy()
    np.testing.assert_allclose(coordinates @ anchors, x, atol=1e-10)


def test_centering_subtracts_the_anchor_mean(rng, on):
    x, anchors = rng.normal(size=(20, 4)) + 3, rng.normal(size=(7, 4)) + 3
    mean = anchors.mean(axis=0)
    expected = _reference("cosine", x - mean, anchors - mean)
    np.testing.assert_allclose(relative_projection(*on(x, anchors), center=True).cpu().numpy(), expected, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_in_numpy_out_same_dtype(dtype, rng):
    x = rng.normal(size=(10, 3)).astype(dtype)
    out = relative_projection(x, x[:4])
    assert isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == (10, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_in_torch_out_same_dtype(dtype, device):
    x = torch.randn(10, 3, dtype=dtype, device=device)
    out = relative_projection(x, x[:4])
    assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.shape == (10, 4) and out.device == x.device


def test_anchors_are_cast_to_the_dtype_of_x(rng):
    x = rng.normal(size=(6, 3)).astype(np.float32)
    out = relative_projection(x, rng.normal(size=(2, 3)))  # float64 anchors
    assert out.dtype == np.float32


@pytest.mark.parametrize("name", sorted(SIMILARITIES))
def test_chunked_equals_single_pass(name, rng, on):
    x, anchors = on(rng.normal(size=(103, 8)), rng.normal(size=(11, 8)))
    whole = relative_projection(x, anchors, name, chunk_size=1000)
    chunked = relative_projection(x, anchors, name, chunk_size=10)
    torch.testing.assert_close(chunked, whole, rtol=1e-12, atol=1e-12)


def test_cosine_stays_within_its_range_despite_rounding(device):
    x = torch.randn(500, 64, device=device)
    out = relative_projection(x, x[:50])  # every anchor is also a sample: cos = 1 up to rounding
    assert out.max() <= 1.0 and out.min() >= -1.0


@pytest.mark.parametrize("name", ["cosine", "angular", "dot", "euclidean", "basis_change"])
def test_gradients_match_finite_differences(name, device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 4, dtype=torch.float64, generator=g).to(device).requires_grad_()
    anchors = torch.randn(6, 4, dtype=torch.float64, generator=g).to(device).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, a: relative_projection(x, a, name), (x, anchors))


def test_gradient_flows_through_the_chunked_path(device):
    x = torch.randn(50, 4, device=device, requires_grad=True)
    relative_projection(x, torch.randn(3, 4, device=device), chunk_size=7).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


# --- errors ------------------------------------------------------------------------------------------------


def test_feature_mismatch_names_both_arguments():
    with pytest.raises(ValueError, match="x and anchors must have the same number of features.*5 and 4"):
        relative_projection(np.ones((3, 5)), np.ones((2, 4)))


def test_wrong_rank_is_rejected():
    with pytest.raises(ValueError, match=r"x: expected a 2-D array, got shape \(5,\)"):
        relative_projection(np.ones(5), np.ones((2, 5)))


@pytest.mark.parametrize("name", sorted(SIMILARITIES))
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_samples_are_reported_with_their_row(bad, name, rng, on):
    x = rng.normal(size=(30, 3))
    x[17, 1] = bad
    x[23, 0] = bad  # a later bad row in a later chunk: the first is named
    with pytest.raises(ValueError, match="x: contains NaN or inf \\(first at row 17\\)"):
        relative_projection(*on(x, x[:4] + 1), name, chunk_size=4)


def test_non_finite_anchors_are_rejected(rng):
    anchors = rng.normal(size=(4, 3))
    anchors[2, 0] = np.nan
    with pytest.raises(ValueError, match="anchors: contains NaN or inf \\(first at row 2\\)"):
        relative_projection(rng.normal(size=(5, 3)), anchors)


def test_zero_vectors_under_cosine_are_an_error_by_default(rng, on):
    x = rng.normal(size=(30, 3))
    x[21] = 0
    with pytest.raises(ZeroNormError, match="x: row 21 has zero norm"):
        relative_projection(*on(x, x[:2]), chunk_size=8)
    anchors = x[:3].copy()
    anchors[1] = 0
    with pytest.raises(ZeroNormError, match="anchors: row 1 has zero norm"):
        relative_projection(*on(x[:5], anchors))


def test_eps_maps_zero_vectors_to_zero_similarity(rng, on):
    x = rng.normal(size=(4, 3))
    x[2] = 0
    out = relative_projection(*on(x, rng.normal(size=(5, 3))), eps=1e-8).cpu().numpy()
    np.testing.assert_array_equal(out[2], 0.0)
    assert np.all(np.abs(out[[0, 1, 3]]) > 0)


def test_no_anchors_is_an_error():
    with pytest.raises(ValueError, match="anchors: expected at least 1 rows"):
        relative_projection(np.ones((3, 2)), np.ones((0, 2)))


def test_integer_input_is_rejected_with_a_hint():
    with pytest.raises(TypeError, match=r"x: expected a floating-point array, got dtype int64.*astype"):
        relative_projection(np.ones((3, 2), dtype=np.int64), np.ones((2, 2)))


def test_unknown_similarity_lists_the_registered_ones():
    with pytest.raises(ValueError, match="unknown similarity 'cosin'; registered: angular, basis_change"):
        relative_projection(np.ones((3, 2)), np.ones((2, 2)), "cosin")


def test_unknown_similarity_option_is_rejected():
    with pytest.raises(TypeError, match="scaled"):
        relative_projection(np.ones((3, 2)), np.ones((2, 2)), "cosine", scaled=True)


def test_rank_deficient_anchors_warn_under_basis_change(rng):
    anchors = rng.normal(size=(2, 5))  # two anchors cannot span five dimensions
    with pytest.warns(UserWarning, match="anchors: rank 2 < 5 features"):
        relative_projection(rng.normal(size=(3, 5)), anchors, "basis_change")


def test_registering_a_similarity_is_one_decorated_function(rng):
    @register_similarity("test_negative_sq_euclidean", value_range=(-math.inf, 0.0))
    def negative_sq_euclidean(x, anchors):
        """Negative squared Euclidean distance."""
        return -(torch.cdist(x, anchors) ** 2)

    try:
        x, anchors = rng.normal(size=(5, 3)), rng.normal(size=(2, 3))
        np.testing.assert_allclose(
            relative_projection(x, anchors, "test_negative_sq_euclidean"), -cdist(x, anchors, "sqeuclidean")
        )
        with pytest.raises(ValueError, match="already registered"):
            register_similarity("test_negative_sq_euclidean", value_range=(0, 1))(negative_sq_euclidean)
    finally:
        SIMILARITIES.pop("test_negative_sq_euclidean")


def test_every_similarity_documents_its_range_and_invariances():
    for spec in SIMILARITIES.values():
        assert spec.doc, spec.name
        assert spec.value_range[0] < spec.value_range[1]
        assert spec.kind in ("similarity", "distance", "coordinates")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_chunks_written_into_the_output_equal_one_pass(dtype, device):
    """Cosine writes each chunk straight into the output (numpy BLAS, or torch for dtypes numpy lacks)."""
    x, anchors = torch.randn(50, 6, dtype=dtype, device=device), torch.randn(4, 6, dtype=dtype, device=device)
    chunked = relative_projection(x, anchors, chunk_size=7)
    assert chunked.dtype == dtype
    torch.testing.assert_close(chunked, relative_projection(x, anchors, chunk_size=50))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("more_anchors", [False, True])
def test_half_precision_is_computed_natively_and_close_to_float64(dtype, more_anchors, device):
    """bfloat16/float16 in: the result keeps the dtype, and its error against float64 on the same (rounded) inputs
    is that of one or two roundings to the dtype (float32 accumulation), whichever side is normalised."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 48, generator=generator).to(device, dtype)
    anchors = torch.randn(96 if more_anchors else 16, 48, generator=generator).to(device, dtype)
    out = relative_projection(x, anchors)
    assert out.dtype == dtype and out.device == x.device
    x64, a64 = x.double(), anchors.double()
    reference = (x64 / x64.norm(dim=1, keepdim=True)) @ (a64 / a64.norm(dim=1, keepdim=True)).T
    assert (out.double() - reference).abs().max() <= 4 * torch.finfo(dtype).eps
