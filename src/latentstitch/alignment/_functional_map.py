"""Latent functional maps (Fumero et al., NeurIPS 2024; official code marc0git/lfmap)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from scipy import sparse
from scipy.sparse.csgraph import connected_components, dijkstra
from scipy.sparse.linalg import LinearOperator, cg, eigsh

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.knn import top_k
from latentstitch._core.numerics import unit_rows
from latentstitch._core.params import Rule, check_choice, check_nonnegative, check_positive_int, rule
from latentstitch.alignment._common import as_pairs, space
from latentstitch.stitching import AffineMap, LeastSquares, Procrustes

TRANSFERS = ("orthogonal", "linear")


def knn_graph(x: torch.Tensor, n_neighbors: int) -> sparse.csr_matrix:
    """Symmetric k-NN graph of the rows of ``x`` under the angular (chord) distance ``|u_i - u_j|`` of unit rows,
    weighted ``1 / distance`` (lfmap's ``graph_similarity="angular", graph_kernel="singular"``), symmetrised by the
    maximum. Distance-0 neighbours get weight 1, as in graphlearning."""
    unit = unit_rows(x.detach().double(), "x")
    neighbours = top_k(unit, unit, n_neighbors + 1)[:, 1:].cpu().numpy()  # the first is the row itself
    rows = np.repeat(np.arange(x.shape[0]), n_neighbors)
    distance = torch.linalg.vector_norm(unit[torch.as_tensor(rows)] - unit[torch.as_tensor(neighbours.ravel())], dim=1)
    weight = 1.0 / np.where(distance.cpu().numpy() > 0, distance.cpu().numpy(), 1.0)
    graph = sparse.csr_matrix((weight, (rows, neighbours.ravel())), shape=(x.shape[0],) * 2)
    return graph.maximum(graph.T).tocsr()


def laplacian_eigenbasis(graph: sparse.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` smallest eigenvalues (ascending) and eigenvectors (columns, orthonormal) of the normalised
    Laplacian ``I - D^-1/2 W D^-1/2``, from the largest eigenvalues of ``D^-1/2 W D^-1/2``."""
    degree = np.asarray(graph.sum(axis=1)).ravel()
    scale = sparse.diags(1.0 / np.sqrt(degree))
    normalised = scale @ graph @ scale
    start = np.random.default_rng(0).standard_normal(graph.shape[0])  # deterministic Lanczos start
    values, vectors = eigsh(normalised, k=k, which="LA", v0=start)
    order = np.argsort(1.0 - values)
    return (1.0 - values)[order], vectors[:, order]


def geodesic_descriptors(graph: sparse.csr_matrix, anchors: np.ndarray) -> np.ndarray:
    """``exp(-d^2)`` of the shortest-path distances from each anchor (edges of length ``1 / weight``): lfmap's
    ``dist_geod`` descriptor, (n, n_anchors)."""
    lengths = graph.copy()
    lengths.data = 1.0 / lengths.data
    distances = dijkstra(lengths, directed=False, indices=anchors)
    return np.exp(-(distances.T**2))


def _hessian_product(c, descr_x, ev_sqdiff, operators, weights):
    """The linear part of the gradient of lfmap's ``energy_func_std`` (descriptor preservation, Laplacian
    commutativity, descriptor commutativity): the energy is quadratic in C, its gradient ``H(C) - w_descr B A^T``."""
    w_descr, w_lap, w_dcomm = weights
    product = w_descr * (c @ descr_x) @ descr_x.T + w_lap * c * ev_sqdiff
    for op_x, op_y in operators:
        commutator = c @ op_x - op_y @ c
        product += w_dcomm * (commutator @ op_x.T - op_y.T @ commutator)
    return product


def solve_functional_map(
    basis_x: np.ndarray,
    basis_y: np.ndarray,
    values_x: np.ndarray,
    values_y: np.ndarray,
    descriptors_x: np.ndarray,
    descriptors_y: np.ndarray,
    weights: tuple[float, float, float],
) -> np.ndarray:
    """The regularised functional map C (k_y, k_x) of lfmap's ``rfm``: descriptors projected on the bases must
    agree (``C A ~ B``), C must commute with the Laplacians (eigenvalue differences) and with the descriptors'
    multiplication operators. Started at the identity, first column fixed to the constant functions' match."""
    k_x, k_y = basis_x.shape[1], basis_y.shape[1]
    spectral_x, spectral_y = basis_x.T @ descriptors_x, basis_y.T @ descriptors_y
    operators = []
    if weights[2] > 0:
        operators = [
            (basis_x.T @ (descriptors_x[:, [i]] * basis_x), basis_y.T @ (descriptors_y[:, [i]] * basis_y))
            for i in range(descriptors_x.shape[1])
        ]
    ev_sqdiff = np.square(values_x[None, :] - values_y[:, None])
    ev_sqdiff /= ev_sqdiff.sum()
    start = np.eye(k_y, k_x)
    start[:, 0] = 0
    start[0, 0] = np.sign(basis_x[0, 0] * basis_y[0, 0])

    # The energy is quadratic: its minimiser over the free columns solves H(C) = w_descr B A^T there. Conjugate
    # gradients from the identity reach the optimum that lfmap's L-BFGS (also started at the identity) approaches.
    free = (k_y, k_x - 1)

    def apply(flat: np.ndarray) -> np.ndarray:
        c = np.zeros((k_y, k_x))
        c[:, 1:] = flat.reshape(free)
        return _hessian_product(c, spectral_x, ev_sqdiff, operators, weights)[:, 1:].ravel()

    fixed = np.zeros((k_y, k_x))
    fixed[:, 0] = start[:, 0]
    pulled = _hessian_product(fixed, spectral_x, ev_sqdiff, operators, weights)
    right = weights[0] * spectral_y @ spectral_x.T - pulled
    operator = LinearOperator((free[0] * free[1],) * 2, matvec=apply, dtype=np.float64)
    solution, _ = cg(operator, right[:, 1:].ravel(), x0=start[:, 1:].ravel(), rtol=1e-12, atol=0.0, maxiter=10_000)
    out = fixed.copy()
    out[:, 1:] = solution.reshape(free)
    return out


def pointwise_map(c: np.ndarray, basis_x: np.ndarray, basis_y: np.ndarray) -> np.ndarray:
    """For each target row, the source row whose spectral embedding, carried by C, is nearest (lfmap's
    ``FM_to_p2p``): (n_y,) indices into the source."""
    k_y, k_x = c.shape
    carried = torch.from_numpy(np.ascontiguousarray(basis_x[:, :k_x] @ c.T))
    queries = torch.from_numpy(np.ascontiguousarray(basis_y[:, :k_y]))
    distances = torch.cdist(queries, carried)
    return distances.argmin(dim=1).numpy()


def zoomout(c: np.ndarray, basis_x: np.ndarray, basis_y: np.ndarray, steps: int) -> np.ndarray:
    """ZoomOut refinement (Melzi et al. 2019, as lfmap's ``zoomout_refine``): alternate point-to-point maps and
    least-squares functional maps, growing the basis by one function per step."""
    for _ in range(steps):
        k_y, k_x = c.shape
        p2p = pointwise_map(c, basis_x, basis_y)
        c = np.linalg.lstsq(basis_y[:, : k_y + 1], basis_x[p2p, : k_x + 1], rcond=None)[0]
    return c


def map_similarity(c: np.ndarray) -> float:
    """lfmap's similarity of two spaces from their functional map: ``1 - ||C - diag(C)|| / ||C||`` (1: C is
    diagonal, the spaces' graphs are isometric; near 0: unrelated)."""
    return float(1.0 - np.linalg.norm(c - np.diag(np.diag(c))) / np.linalg.norm(c))


_WEIGHTS = ("descriptor_weight", "laplacian_weight", "commutativity_weight")


class FunctionalMap(AffineMap):
    """Latent functional maps (Fumero et al. 2024): align two spaces through their graphs' Laplacian eigenbases.

    Each space becomes a k-NN graph (angular distance, weights ``1 / distance``), whose normalised Laplacian gives
    an eigenbasis of smooth functions on the data. A few anchor pairs provide descriptor functions (``exp(-d^2)``
    of graph geodesic distances from each anchor); the functional map ``C`` (k x k) carries functions of the
    source onto functions of the target, regularised to commute with the Laplacians and the descriptors, then
    refined by ZoomOut. From it:

    - ``similarity_``: ``1 - ||offdiag(C)|| / ||C||``, a similarity of the two spaces (lfmap's ``get_similarity``);
    - ``correspondence_``: a source row for every target row (point-to-point map);
    - a linear transfer (``coef_``, ``intercept_``, ``transform``): a stitcher fitted on the pairs
      ``(source[correspondence_], target)``, so a few (5-50) anchors give a full translation.

    Follows the official code (marc0git/lfmap: ``FM`` with ``graph_algo="knn"``, ``graph_similarity="angular"``,
    ``graph_kernel="singular"``, ``descriptors=("dist_geod",)``, the default regularisation weights and
    ``refine=True``); neighbours are found exactly (lfmap uses approximate annoy search for more than 5
    dimensions) and eigenvectors by Lanczos (``eigsh``) instead of ``svds``, which agree on these graphs.

    ``fit(source, target, pairs)`` takes two tables whose rows need not correspond and the known ``pairs``. In the
    Bridge-route form ``fit(source, target)`` (no ``pairs``) the rows are parallel, so the correspondence is known:
    C is the ground-truth map ``Phi_t^T Phi_s`` (lfmap's ``compute_gt_map``), ``similarity_`` measures how well the
    two graphs agree, and the transfer is fitted on all rows.

    Parameters
    ----------
    n_neighbors : int
        Neighbours per row in the k-NN graph (lfmap's ``k`` counts the row itself: k=20 there is 19 here).
    n_eigenvectors : int
        Size of the eigenbasis (lfmap's ``num_eigs``, default 50); at most the number of rows minus one.
    refine : int
        ZoomOut steps (lfmap: 10): the map is solved on ``n_eigenvectors - refine`` functions and grown back.
    descriptor_weight, laplacian_weight, commutativity_weight : float
        Weights of the energy (lfmap's defaults 1, 1e-3, 1e-1).
    transfer : {"orthogonal", "linear"}
        The stitcher of the linear transfer: ``Procrustes(center=True, scale=True)`` (default) or ``LeastSquares()``.

    Attributes
    ----------
    map_ : (k, k) float64 numpy array
        The functional map C (target basis x source basis).
    similarity_ : float
        ``1 - ||C - diag(C)|| / ||C||`` in [0, 1]; high for related spaces, low for unrelated ones.
    score_ : float
        Same as ``similarity_`` (the confidence every alignment estimator reports).
    n_rows_ : [n_s, n_t]
        The rows of the source and target tables of the fit.
    correspondence_ : (n_t,) int64 numpy array
        For each target row, its matched source row.
    coef_, intercept_ : the linear transfer, ``transform(x) = x @ coef_ + intercept_``.
    """

    def __init__(
        self,
        n_neighbors: int = 19,
        n_eigenvectors: int = 50,
        refine: int = 10,
        descriptor_weight: float = 1.0,
        laplacian_weight: float = 1e-3,
        commutativity_weight: float = 1e-1,
        transfer: str = "orthogonal",
    ):
        self.n_neighbors = n_neighbors
        self.n_eigenvectors = n_eigenvectors
        self.refine = refine
        self.descriptor_weight = descriptor_weight
        self.laplacian_weight = laplacian_weight
        self.commutativity_weight = commutativity_weight
        self.transfer = transfer

    def fit(self, source: ArrayLike, target: ArrayLike, pairs: ArrayLike | None = None) -> FunctionalMap:
        """Fit from two tables and their known ``pairs`` ((m, 2) source/target rows; about 5-50), or, without
        ``pairs``, from parallel rows. Returns ``self``."""
        self._check_params()
        n_neighbors, k, refine = int(self.n_neighbors), int(self.n_eigenvectors), int(self.refine)
        weights = tuple(float(getattr(self, name)) for name in _WEIGHTS)
        s = space(source, "source", min_rows=n_neighbors + 2)
        t = space(target, "target", min_rows=n_neighbors + 2)
        if pairs is None and s.shape[0] != t.shape[0]:
            raise ValueError(
                f"pairs: without pairs the rows must be parallel, but source has {s.shape[0]} rows and target "
                f"{t.shape[0]}; pass the known (source row, target row) pairs"
            )
        smallest = min(s.shape[0], t.shape[0])
        if k >= smallest:
            raise ValueError(f"n_eigenvectors: expected fewer than the {smallest} rows of the smaller table, got {k}")
        if pairs is not None and refine >= k:
            raise ValueError(f"refine: expected fewer ZoomOut steps than n_eigenvectors={k}, got {refine}")
        graphs = []
        for name, table in (("source", s), ("target", t)):
            graph = knn_graph(table, n_neighbors)
            parts = connected_components(graph, directed=False)[0]
            if parts > 1:
                raise ValueError(
                    f"{name}: its {n_neighbors}-NN graph falls into {parts} disconnected parts, so the Laplacian "
                    "eigenbasis does not describe it as one space; increase n_neighbors"
                )
            graphs.append(graph)
        (values_s, basis_s), (values_t, basis_t) = (laplacian_eigenbasis(g, k) for g in graphs)
        if pairs is None:
            c = basis_t.T @ basis_s
            correspondence = np.arange(t.shape[0])
        else:
            anchors = as_pairs(pairs, "pairs", s.shape[0], t.shape[0])
            descriptors = [geodesic_descriptors(g, anchors[:, side]) for side, g in enumerate(graphs)]
            size = k - refine
            c = solve_functional_map(
                basis_s[:, :size], basis_t[:, :size], values_s[:size], values_t[:size], *descriptors, weights
            )
            c = zoomout(c, basis_s, basis_t, refine)
            correspondence = pointwise_map(c, basis_s, basis_t)
        stitcher = Procrustes(center=True, scale=True) if self.transfer == "orthogonal" else LeastSquares()
        index = torch.as_tensor(correspondence, device=s.device)
        fitted = stitcher.fit(s[index], t)
        coef, intercept = (v.clone() for v in fitted._map64())
        self._set_map(coef, intercept, source, 2)
        self.map_ = c
        self.similarity_ = map_similarity(c)
        self.score_ = self.similarity_
        self.correspondence_ = correspondence.astype(np.int64)
        self.n_rows_ = [int(s.shape[0]), int(t.shape[0])]
        self.eigenvalues_ = np.stack([values_s, values_t])
        return self

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "n_neighbors": rule(check_positive_int),
        "n_eigenvectors": rule(check_positive_int, minimum=2),
        "refine": rule(check_positive_int, minimum=0),
        **{name: rule(check_nonnegative) for name in _WEIGHTS},
        "transfer": rule(check_choice, choices=TRANSFERS),
    }

    def _check_loaded(self) -> None:
        super()._check_loaded()
        k = int(self.n_eigenvectors)
        if tuple(np.shape(self.map_)) != (k, k):
            raise ValueError(f"map_ has shape {tuple(np.shape(self.map_))}, expected ({k}, {k})")
        if tuple(np.shape(self.eigenvalues_)) != (2, k):
            raise ValueError(f"eigenvalues_ has shape {tuple(np.shape(self.eigenvalues_))}, expected (2, {k})")
        correspondence = np.asarray(self.correspondence_)
        n_source, n_target = self.n_rows_
        if correspondence.shape != (n_target,) or correspondence.dtype.kind not in "iu":
            raise ValueError(
                f"correspondence_ must be {n_target} integer source rows, got {correspondence.dtype} of shape "
                f"{correspondence.shape}"
            )
        if correspondence.size and not 0 <= correspondence.min() <= correspondence.max() < n_source:
            raise ValueError(f"correspondence_ holds rows outside the {n_source} source rows")
