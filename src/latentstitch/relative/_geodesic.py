"""Geodesic relative representations: distances to the anchors measured along the data manifold.

The relative-representations paper names geodesic distances "over the data manifold instead of Euclidean
approximations" as a future direction. Here the manifold is approximated, as Isomap does (Tenenbaum et al. 2000),
by a k-nearest-neighbour graph, and the distance from a sample to an anchor is the length of the shortest path
between them in that graph.

**The graph.** Its nodes are the anchors plus, optionally, ``graph_points`` (more samples of the same space, e.g.
the training set: the denser the nodes, the closer the paths follow the manifold). Each node is joined to its
``n_neighbors`` nearest nodes (Euclidean), edges weighted by their Euclidean length, made symmetric (an edge
exists if either end counts the other among its neighbours). A graph in several pieces is joined into one by
repeatedly adding the shortest edge between a piece and the rest (with a warning: a larger ``n_neighbors``
usually follows the data better). Shortest paths from every anchor to every node (Dijkstra, scipy) are computed
once per call, on the CPU in float64.

**New samples.** A sample (any row of ``x``, whether or not it is a node) attaches to its ``n_neighbors`` nearest
nodes by straight edges; its distance to anchor ``j`` is ``min_i |x - v_i| + D(v_i, a_j)`` over those nodes. A
sample that *is* a node (distance 0 to itself) gets exactly its graph distance, and the graph is never changed by
the samples, so the result does not depend on which other samples are projected with it (chunks and batches give
the same rows).

**Scale.** Distances are divided by the median node-to-anchor graph distance, which makes the output free of the
space's units (invariant to isotropic rescaling); ``normalize=False`` keeps raw lengths.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from latentstitch._core.arrays import as_float_tensor, check_same_width, to_numpy
from latentstitch._core.numerics import power_of_two_scale
from latentstitch._core.params import check_bool, check_positive_int
from latentstitch.invariance import ISOTROPIC_SCALE, ORTHOGONAL, TRANSLATION
from latentstitch.relative._similarities import register_similarity

# Elements of the (rows, nodes) distance block computed at a time when attaching samples to the graph.
_BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class GeodesicGraph:
    """The prepared graph: its nodes (anchors first), each node's graph distance to every anchor (already divided
    by ``scale``), the number of neighbours and the scale."""

    nodes: torch.Tensor  # (V, d)
    to_anchors: torch.Tensor  # (V, m)
    n_neighbors: int
    scale: float
    components: int  # connected pieces of the k-NN graph before they were joined
    largest: torch.Tensor | None = None  # 0-d: the largest magnitude of a node coordinate, on the nodes' device


def geodesic_graph(
    anchors: torch.Tensor,
    n_neighbors: int = 10,
    graph_points: object = None,
    normalize: bool = True,
) -> GeodesicGraph:
    """Build the k-NN graph over the anchors (and ``graph_points``) and its shortest paths to every anchor."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components, dijkstra
    from sklearn.neighbors import NearestNeighbors

    k = check_positive_int(n_neighbors, "n_neighbors")
    normalize = check_bool(normalize, "normalize")
    nodes = anchors
    if graph_points is not None:
        points = as_float_tensor(graph_points, "graph_points", ndim=2, min_rows=1)
        check_same_width(points, anchors, "graph_points", "anchors")
        nodes = torch.cat([anchors, points.to(device=anchors.device, dtype=anchors.dtype)])
    m, total = anchors.shape[0], nodes.shape[0]
    if total < 2:
        raise ValueError("anchors: a geodesic graph needs at least 2 nodes; give more anchors or graph_points")
    # Lengths are measured in units where the largest coordinate lies in [0.5, 1) (an exact power-of-two scaling):
    # squared distances of 1e200-sized or 1e-200-sized points neither overflow nor underflow.
    nodes64 = nodes.detach().cpu().double()
    largest = nodes.detach().abs().amax()
    to_unit = float(power_of_two_scale(largest.cpu().double()))
    points64 = to_numpy(nodes64 * to_unit, "anchors")
    k = min(k, total - 1)  # a node has at most total - 1 neighbours: the graph is then complete
    distances, neighbours = NearestNeighbors(n_neighbors=k + 1).fit(points64).kneighbors(points64)
    # Drop each node itself (distance 0; with duplicate points it may not come first, so filter by index).
    rows = np.repeat(np.arange(total), k + 1)
    keep = neighbours.ravel() != rows
    graph = coo_matrix((distances.ravel()[keep], (rows[keep], neighbours.ravel()[keep])), shape=(total, total)).tocsr()
    graph = graph.maximum(graph.T).tolil()
    pieces, labels = connected_components(graph, directed=False)
    components = pieces
    while pieces > 1:
        inside = np.flatnonzero(labels == labels[0])
        outside = np.flatnonzero(labels != labels[0])
        i, j, length = _closest_pair(points64, inside, outside)
        graph[i, j] = graph[j, i] = max(length, np.finfo(np.float64).tiny)
        pieces, labels = connected_components(graph.tocsr(), directed=False)
    if components > 1:
        warnings.warn(
            f"geodesic: the {k}-nearest-neighbour graph over {total} nodes had {components} separate pieces; they "
            "were joined through their closest pairs of points. A larger n_neighbors (or more graph_points) gives a "
            "graph that follows the data",
            stacklevel=5,
        )
    paths = dijkstra(graph.tocsr(), directed=False, indices=np.arange(m))  # (m, V)
    unit = to_unit  # the paths' unit, in data units: paths / unit are data lengths
    if normalize:
        positive = paths[paths > 0]
        if positive.size == 0:
            raise ValueError("anchors: every node is the same point, so geodesic distances have no scale")
        unit = float(np.median(positive))
    to_anchors = torch.from_numpy(paths.T / unit).to(device=anchors.device, dtype=anchors.dtype)
    scale = unit / to_unit if normalize else 1.0  # the median graph distance in data units
    return GeodesicGraph(nodes.detach(), to_anchors, k, scale, components, largest)


def _closest_pair(points: np.ndarray, inside: np.ndarray, outside: np.ndarray) -> tuple[int, int, float]:
    from scipy.spatial.distance import cdist

    best = (0, 0, math.inf)
    step = max(1, _BLOCK_ELEMENTS // max(len(outside), 1))
    for start in range(0, len(inside), step):
        block = inside[start : start + step]
        d = cdist(points[block], points[outside])
        flat = int(np.argmin(d))
        row, col = divmod(flat, d.shape[1])
        if d[row, col] < best[2]:
            best = (int(block[row]), int(outside[col]), float(d[row, col]))
    return best


def _geodesic_prepare(
    anchors: torch.Tensor, n_neighbors: int = 10, graph_points: object = None, normalize: bool = True
) -> GeodesicGraph:
    return geodesic_graph(anchors, n_neighbors, graph_points, normalize)


@register_similarity(
    "geodesic",
    kind="distance",
    value_range=(0.0, math.inf),
    invariances={ORTHOGONAL, TRANSLATION, ISOTROPIC_SCALE},
    prepare=_geodesic_prepare,
)
def geodesic(
    x: torch.Tensor,
    graph: GeodesicGraph,
    n_neighbors: int = 10,
    graph_points: object = None,
    normalize: bool = True,
) -> torch.Tensor:
    """Shortest-path distance to each anchor along a k-nearest-neighbour graph of the anchors and ``graph_points``
    (a distance), divided by the median graph distance; in [0, inf). See ``latentstitch.relative._geodesic`` for
    how the graph is built and how samples attach to it.

    Invariant to rotations, reflections, translations and isotropic rescaling (the graph depends only on
    Euclidean distances, and the scale is divided out) applied to samples, anchors and ``graph_points`` together;
    and, unlike every straight-line similarity, approximately invariant to bending the manifold without
    stretching it (a swiss roll unrolled into a sheet keeps its geodesic distances), as far as the graph follows
    the manifold. Not invariant to anisotropic rescaling or general linear maps. Differentiable with respect to
    ``x`` through its attaching edges (the graph is fixed).
    """
    nodes, k = graph.nodes, graph.n_neighbors
    m = graph.to_anchors.shape[1]
    step = max(1, _BLOCK_ELEMENTS // max(nodes.shape[0], k * max(m, x.shape[1])))
    largest = nodes.detach().abs().amax() if graph.largest is None else graph.largest
    out = [x.new_zeros((0, m))]
    for start in range(0, x.shape[0], step):
        block = x[start : start + step]
        # Each block and the nodes are measured in units where the largest coordinate of either lies in [0.5, 1)
        # (an exact power-of-two scaling, on the device: no sync), so that no square overflows or underflows.
        to_unit = power_of_two_scale(torch.maximum(block.detach().abs().amax(), largest.to(block.dtype)))
        scaled_nodes = nodes * to_unit
        with torch.no_grad():  # which nodes are nearest: the fast |x|^2 - 2<x, v> + |v|^2 form, in float64
            b64, n64 = (block.detach() * to_unit).double(), scaled_nodes.detach().double()
            approximate = b64.pow(2).sum(dim=1, keepdim=True) - 2 * b64 @ n64.T + n64.pow(2).sum(dim=1)
            index = torch.topk(approximate, k, dim=1, largest=False).indices
        # their exact lengths, from the differences (differentiable; 0 for a sample that is a node), brought back to
        # data units by the division by to_unit
        lengths = torch.linalg.vector_norm(block.unsqueeze(1) * to_unit - scaled_nodes[index], dim=2)
        through = lengths.unsqueeze(2) / (to_unit.double() * graph.scale) + graph.to_anchors[index]  # (rows, k, m)
        out.append(through.amin(dim=1))
    return torch.cat(out) if len(out) > 2 else out[-1]
