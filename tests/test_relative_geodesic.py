"""The "geodesic" similarity: shortest paths along a k-NN graph, how samples attach, and the manifold property."""

import numpy as np
import pytest
import torch
from scipy.sparse.csgraph import shortest_path
from scipy.spatial.distance import cdist

from latentstitch import relative_projection
from latentstitch.invariance import AXIS_SCALE, random_transform
from latentstitch.relative import RelativeProjection


def swiss_roll(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A swiss roll in 3-d and the same points unrolled into the plane (arc length along the spiral, height):
    an isometry of the surface, so geodesic distances agree and straight-line ones do not."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(1.5 * np.pi, 4.5 * np.pi, n)
    height = rng.uniform(0, 15, n)
    arc = 0.5 * (t * np.sqrt(1 + t * t) + np.arcsinh(t))
    return np.stack([t * np.cos(t), height, t * np.sin(t)], 1), np.stack([arc, height], 1)


def _knn_paths(points: np.ndarray, k: int) -> np.ndarray:
    d = cdist(points, points)
    adjacency = np.zeros_like(d)
    for i in range(len(points)):
        for j in np.argsort(d[i])[1 : k + 1]:
            adjacency[i, j] = adjacency[j, i] = d[i, j]
    return shortest_path(adjacency, directed=False)


def test_samples_in_the_graph_get_their_exact_graph_distance(rng):
    points = rng.normal(size=(80, 3))
    anchors = points[:6]
    paths = _knn_paths(points, k=5)[:, :6]
    out = relative_projection(points, anchors, "geodesic", n_neighbors=5, graph_points=points[6:], normalize=False)
    np.testing.assert_allclose(out, paths, atol=1e-12)
    scaled = relative_projection(points, anchors, "geodesic", n_neighbors=5, graph_points=points[6:])
    np.testing.assert_allclose(scaled, paths / np.median(paths[paths > 0]), atol=1e-12)


def test_new_samples_attach_through_their_nearest_nodes_and_do_not_change_the_graph(rng):
    nodes = rng.normal(size=(60, 4))
    anchors, graph_points = nodes[:5], nodes[5:]
    x = rng.normal(size=(30, 4))
    paths = _knn_paths(nodes, k=6)[:, :5]
    attach = cdist(x, nodes)
    nearest = np.argsort(attach, axis=1)[:, :6]
    expected = np.stack([np.min(attach[i, nearest[i], None] + paths[nearest[i]], axis=0) for i in range(30)])
    out = relative_projection(x, anchors, "geodesic", n_neighbors=6, graph_points=graph_points, normalize=False)
    np.testing.assert_allclose(out, expected, atol=1e-12)
    # one sample at a time gives the same rows: the samples are not nodes
    options = {"n_neighbors": 6, "graph_points": graph_points}
    alone = [relative_projection(x[i : i + 1], anchors, "geodesic", **options) for i in (0, 7)]
    together = relative_projection(x, anchors, "geodesic", **options)
    np.testing.assert_allclose(np.concatenate(alone), together[[0, 7]], atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unrolling_a_swiss_roll_keeps_geodesic_but_not_straight_line_representations(seed):
    rolled, flat = swiss_roll(1500, seed)
    anchors = np.arange(25)

    def relative(space: np.ndarray, similarity: str, **options) -> np.ndarray:
        return relative_projection(space, space[anchors], similarity, **options)

    def error(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.abs(a - b).mean() / np.abs(b).mean())

    geodesic = error(
        relative(rolled, "geodesic", graph_points=rolled, n_neighbors=8),
        relative(flat, "geodesic", graph_points=flat, n_neighbors=8),
    )
    cosine = error(relative(rolled, "cosine", center=True), relative(flat, "cosine", center=True))
    euclidean = error(
        relative(rolled, "euclidean") / np.median(relative(rolled, "euclidean")),
        relative(flat, "euclidean") / np.median(relative(flat, "euclidean")),
    )
    # measured: geodesic 0.0005-0.001, cosine 0.96-1.0, euclidean 0.49-0.53 (seeds 0-2)
    assert geodesic < 0.02
    assert cosine > 0.3 and euclidean > 0.3


def test_not_invariant_to_axis_scaling(rng):
    x, anchors = rng.normal(size=(40, 5)), rng.normal(size=(30, 5))
    t = random_transform(AXIS_SCALE, 5, seed=1)
    before = relative_projection(x, anchors, "geodesic", n_neighbors=4)
    after = relative_projection(t(x), t(anchors), "geodesic", n_neighbors=4)
    assert not np.allclose(before, after, atol=1e-3)


def test_a_disconnected_graph_is_joined_with_a_warning(rng):
    blobs = np.concatenate([rng.normal(size=(20, 2)), rng.normal(size=(20, 2)) + 100.0])
    with pytest.warns(UserWarning, match="had 2 separate pieces"):
        out = relative_projection(blobs, blobs[[0, 25]], "geodesic", n_neighbors=3, graph_points=blobs)
    assert np.isfinite(out).all()


def test_module_gradient_and_types(rng):
    x = torch.randn(10, 3, dtype=torch.float64, requires_grad=True)
    anchors = torch.randn(12, 3, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda v: relative_projection(v, anchors, "geodesic", n_neighbors=3), (x,))
    layer = RelativeProjection("geodesic", anchors=anchors.float(), n_neighbors=3)
    assert layer(torch.randn(4, 3)).shape == (4, 12)


def test_errors(rng):
    x = rng.normal(size=(5, 3))
    with pytest.raises(ValueError, match="n_neighbors: expected an integer >= 1"):
        relative_projection(x, x, "geodesic", n_neighbors=0)
    with pytest.raises(ValueError, match="graph_points and anchors must have the same number of features"):
        relative_projection(x, x, "geodesic", graph_points=np.ones((4, 2)))
    with pytest.raises(ValueError, match="at least 2 nodes"):
        relative_projection(x, x[:1], "geodesic")
    with pytest.raises(ValueError, match="top_k: needs a similarity.*'geodesic' is a distance"):
        relative_projection(x, x, "geodesic", top_k=2)
