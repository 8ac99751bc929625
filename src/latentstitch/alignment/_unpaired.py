"""Alignment with no pairs at all: mini-vec2vec (Dar 2025, arXiv 2510.02348; official code guy-dar/mini-vec2vec)."""

from __future__ import annotations

import warnings
from typing import ClassVar

import numpy as np
import torch
from scipy.optimize import quadratic_assignment
from sklearn.cluster import KMeans

from latentstitch._core.arrays import ArrayLike, wrap_like
from latentstitch._core.numerics import matmul, rescaled_row_norms, unit_rows
from latentstitch._core.params import Rule, check_bool, check_positive_int, check_seed, rule
from latentstitch.alignment._common import mean_of_neighbours, orthogonal_factor, seeded, space
from latentstitch.stitching import AffineMap


class UnpairedAlignment(AffineMap):
    """Align two embedding spaces from their point clouds alone: no parallel pair is needed.

    The linear, stable recipe of mini-vec2vec (Dar 2025), following the official notebook step by step:

    1. Each space is centred on its mean and its rows L2-normalised.
    2. **Anchors by structure**: ``n_matchings`` times, a random subsample of each space is clustered (k-means,
       ``n_clusters``) and the two sets of centroids are matched by their centred Gram matrices, solving a quadratic
       assignment problem (``scipy.optimize.quadratic_assignment``, 2-opt, best of ``n_restarts``).
    3. **Pseudo-pairs through relative space**: every row is described by its cosines to its space's matched
       centroids; each source row is paired with the mean of the ``n_neighbors`` target rows whose relative vectors
       are most similar. An orthogonal map ``W`` is fitted on these pseudo-pairs (Procrustes).
    4. **Refinement**: ``refine_iter`` rounds of "map a sample of source rows, average their ``n_neighbors`` nearest
       targets, refit, W <- (W + W_new) / 2"; then one round of cluster correction: k-means with
       ``refine_clusters`` centroids in the source, k-means in the target started from the mapped source
       centroids, and a Procrustes fit between the two sets of centroids (averaged into W).

    The map into the target's absolute space is affine: ``y = (x - mean_s) W * scale + mean_t``, with
    ``scale = mean |t - mean_t| / mean |s - mean_s|``, so ``coef_``, ``intercept_``, ``transform``, ``to_torch``,
    ``save``/``load`` work as for every stitcher. Widths may differ (zero-padded Procrustes, as ``Procrustes``).

    Usable as a ``Bridge`` translation route: ``fit(source, target)`` ignores which rows correspond (none need to).

    **Is the alignment any good?** Without pairs nothing can be checked against truth, so the fit reports how well
    the map explains the target's own structure. ``kmeans_consistency_`` is the official notebook's figure: source
    centroids are mapped into the target and k-means is run in the target *started from them*; it is the mean cosine
    between the mapped centroids and where k-means takes them (1: every mapped centroid already sits on a target
    cluster). Its level depends on the data (uniform data keeps ~0.7 for any map), so ``score_`` calibrates it
    against random rotations: ``score_ = (consistency - null) / (1 - null)``, with ``null`` the same figure for
    ``n_null`` random orthogonal maps. Near 1: the map puts source clusters onto target clusters far better than
    chance; near 0 (or below): no better than a random rotation -- a failed alignment (unrelated spaces, or a wrong
    cluster matching). ``stability_`` (with ``check=True``) adds the agreement of two independent alignments on
    random halves of both spaces (mean cosine of their images of the source); it flags unstable fits but not a
    wrong map both halves agree on.

    Parameters
    ----------
    n_clusters : int
        Centroids per k-means in step 2 (official: 20).
    n_matchings : int
        Independent subsample / k-means / QAP rounds in step 2 (official: 30).
    n_restarts : int
        QAP restarts per round, the best objective kept (official: 30).
    subsample : int
        Rows of each space clustered per round (official: 10,000; all rows when fewer).
    n_neighbors : int
        Target rows averaged into each pseudo-pair (official: 50).
    refine_iter : int
        Rounds of the nearest-neighbour refinement (official: 100); 0 skips it.
    refine_sample : int
        Source rows per refinement round (official: 1,000).
    refine_clusters : int
        Centroids of the cluster correction (official: 500), capped at a fifth of the smaller space; 0 skips it.
    n_null : int
        Random rotations the k-means consistency is calibrated against (``score_``). Needs ``refine_clusters``.
    check : bool
        Also compute ``stability_`` (costs two more alignments of half the data). Default False.
    random_state : int
        Seed of every subsample, k-means and QAP start: a fit is deterministic.

    Attributes
    ----------
    coef_ : (d_s, d_t), intercept_ : (d_t,)
        ``transform(x) = x @ coef_ + intercept_`` (float64, of the fit input's type).
    rotation_ : (d_s, d_t)
        ``W`` (on centred, unit-norm rows); close to orthogonal (an average of orthogonal maps).
    scale_ : float
        Ratio of mean norms, target over source.
    score_ : float
        Calibrated self-consistency (see above): ~1 good, ~0 no better than a random map. NaN when the cluster
        correction is skipped (``refine_clusters=0``).
    kmeans_consistency_, null_consistency_ : float
        The official notebook's k-means self-consistency of the fitted map, and its mean over random rotations.
    stability_ : float
        Agreement of two alignments fitted on random halves, in [-1, 1]; NaN without ``check``.
    """

    def __init__(
        self,
        n_clusters: int = 20,
        n_matchings: int = 30,
        n_restarts: int = 30,
        subsample: int = 10_000,
        n_neighbors: int = 50,
        refine_iter: int = 100,
        refine_sample: int = 1000,
        refine_clusters: int = 500,
        n_null: int = 3,
        check: bool = False,
        random_state: int = 0,
    ):
        self.n_clusters = n_clusters
        self.n_matchings = n_matchings
        self.n_restarts = n_restarts
        self.subsample = subsample
        self.n_neighbors = n_neighbors
        self.refine_iter = refine_iter
        self.refine_sample = refine_sample
        self.refine_clusters = refine_clusters
        self.n_null = n_null
        self.check = check
        self.random_state = random_state

    def fit(self, source: ArrayLike, target: ArrayLike) -> UnpairedAlignment:
        """Fit from two embedding tables (n_s, d_s) and (n_t, d_t) whose rows need not correspond. Returns
        ``self``."""
        self._check_params()
        s = space(source, "source", min_rows=2 * self.n_clusters)
        t = space(target, "target", min_rows=2 * self.n_clusters)
        s64, t64 = s.detach().double(), t.detach().double().to(s.device)
        mean_s, mean_t = s64.mean(dim=0), t64.mean(dim=0)
        unit_s, unit_t = unit_rows(s64 - mean_s, "source"), unit_rows(t64 - mean_t, "target")
        rng = np.random.default_rng(seeded(self.random_state))
        rotation, consistency = self._align(unit_s, unit_t, rng)
        null = self._null_consistency(unit_s, unit_t, rng)
        stability = float("nan")
        if self.check:
            halves_s, halves_t = _halves(unit_s.shape[0], rng), _halves(unit_t.shape[0], rng)
            maps = [self._align(unit_s[hs], unit_t[ht], rng)[0] for hs, ht in zip(halves_s, halves_t, strict=True)]
            images = [unit_rows(matmul(unit_s, w), "mapped source") for w in maps]
            stability = float((images[0] * images[1]).sum(dim=1).mean())
        scale = float(_mean_norm(t64 - mean_t) / _mean_norm(s64 - mean_s))
        coef = rotation * scale
        self._set_map(coef, mean_t - mean_s @ coef, source, 2)
        self.rotation_ = wrap_like(rotation, source)
        self.scale_ = scale
        self.kmeans_consistency_ = consistency
        self.null_consistency_ = null
        self.score_ = (consistency - null) / (1.0 - null) if null < 1 else float("nan")
        self.stability_ = stability
        return self

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "n_clusters": rule(check_positive_int, minimum=2),
        "n_matchings": rule(check_positive_int),
        "n_restarts": rule(check_positive_int),
        "subsample": rule(check_positive_int),
        "n_neighbors": rule(check_positive_int),
        "refine_sample": rule(check_positive_int),
        "refine_iter": rule(check_positive_int, minimum=0),
        "refine_clusters": rule(check_positive_int, minimum=0),
        "n_null": rule(check_positive_int),
        "check": rule(check_bool),
        "random_state": rule(check_seed),
    }

    def _check_loaded(self) -> None:
        super()._check_loaded()
        if tuple(self.rotation_.shape) != (self.n_features_in_, self.n_features_out_):
            raise ValueError(
                f"rotation_ has shape {tuple(self.rotation_.shape)} but the map is "
                f"{self.n_features_in_} -> {self.n_features_out_}"
            )

    # --- the recipe ----------------------------------------------------------------------------------------
    def _align(self, x: torch.Tensor, y: torch.Tensor, rng: np.random.Generator) -> tuple[torch.Tensor, float]:
        """The orthogonal-ish map W (d_s, d_t) between unit rows x and y, and the k-means self-consistency."""
        centres_x, centres_y = self._matched_centroids(x, y, rng)
        relative_x = unit_rows(matmul(x, unit_rows(centres_x, "centroids").T), "relative source")
        relative_y = unit_rows(matmul(y, unit_rows(centres_y, "centroids").T), "relative target")
        pseudo = mean_of_neighbours(relative_x, relative_y, self.n_neighbors, values=y)
        rotation = orthogonal_factor(matmul(x.T, pseudo))
        for _ in range(self.refine_iter):
            rows = torch.as_tensor(rng.choice(x.shape[0], size=min(self.refine_sample, x.shape[0]), replace=False))
            points = x[rows]
            matched = mean_of_neighbours(unit_rows(matmul(points, rotation), "mapped source"), y, self.n_neighbors)
            rotation = 0.5 * rotation + 0.5 * orthogonal_factor(matmul(points.T, matched))
        consistency = float("nan")
        clusters = self._correction_clusters(x, y)
        if clusters:
            centres_x = _kmeans(x, clusters, rng)
            centres_y, consistency = _kmeans_consistency(centres_x, rotation, y, rng)
            rotation = 0.5 * rotation + 0.5 * orthogonal_factor(matmul(centres_x.T, centres_y))
        return rotation, consistency

    def _correction_clusters(self, x: torch.Tensor, y: torch.Tensor) -> int:
        clusters = min(self.refine_clusters, x.shape[0] // 5, y.shape[0] // 5)
        return clusters if clusters >= 2 else 0

    def _null_consistency(self, x: torch.Tensor, y: torch.Tensor, rng: np.random.Generator) -> float:
        """The k-means consistency of random orthogonal maps: what a map that knows nothing achieves."""
        clusters = self._correction_clusters(x, y)
        if not clusters:
            return float("nan")
        centres_x = _kmeans(x, clusters, rng)
        values = []
        for _ in range(self.n_null):
            gaussian = torch.as_tensor(rng.standard_normal((x.shape[1], y.shape[1])), dtype=x.dtype, device=x.device)
            values.append(_kmeans_consistency(centres_x, orthogonal_factor(gaussian), y, rng)[1])
        return float(np.mean(values))

    def _matched_centroids(
        self, x: torch.Tensor, y: torch.Tensor, rng: np.random.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Step 2: centroids of both spaces, matched by quadratic assignment of their centred Gram matrices."""
        all_x, all_y = [], []
        for _ in range(self.n_matchings):
            sample_x = x[torch.as_tensor(_subsample(x.shape[0], self.subsample, rng))]
            sample_y = y[torch.as_tensor(_subsample(y.shape[0], self.subsample, rng))]
            centres_x = _kmeans(sample_x, self.n_clusters, rng)
            centres_y = _kmeans(sample_y, self.n_clusters, rng)
            gram_x, gram_y = _centred_gram(centres_x), _centred_gram(centres_y)
            best = None
            for _ in range(self.n_restarts):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # scipy's notice about its future default random generator
                    result = quadratic_assignment(
                        gram_x,
                        gram_y,
                        method="2opt",
                        options={"maximize": True, "rng": int(rng.integers(2**31))},
                    )
                if best is None or result.fun > best.fun:
                    best = result
            all_x.append(centres_x)
            all_y.append(centres_y[torch.as_tensor(best.col_ind)])
        return torch.cat(all_x), torch.cat(all_y)


def _mean_norm(t: torch.Tensor) -> torch.Tensor:
    """Mean row norm, exact at any magnitude (plain norms of rows near 1e+-200 overflow or underflow)."""
    _, norms, scales = rescaled_row_norms(t)
    return (norms / scales).mean()


def _subsample(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    return np.arange(n) if size >= n else rng.choice(n, size=size, replace=False)


def _halves(n: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    order = torch.as_tensor(rng.permutation(n))
    return order[: n // 2], order[n // 2 :]


def _kmeans(x: torch.Tensor, k: int, rng: np.random.Generator, init: torch.Tensor | None = None) -> torch.Tensor:
    data = x.cpu().numpy()
    start = "k-means++" if init is None else init.cpu().numpy()
    model = KMeans(n_clusters=k, init=start, n_init=1, random_state=int(rng.integers(2**31))).fit(data)
    return torch.as_tensor(model.cluster_centers_, dtype=x.dtype, device=x.device)


def _kmeans_consistency(
    centres_x: torch.Tensor, rotation: torch.Tensor, y: torch.Tensor, rng: np.random.Generator
) -> tuple[torch.Tensor, float]:
    """Target k-means started from the mapped source centroids, and the mean cosine between start and result."""
    start = matmul(centres_x, rotation)
    centres_y = _kmeans(y, centres_x.shape[0], rng, init=start)
    return centres_y, float(torch.nn.functional.cosine_similarity(start, centres_y, dim=1).mean())


def _centred_gram(c: torch.Tensor) -> np.ndarray:
    centred = c - c.mean(dim=0)
    return (centred @ centred.T).cpu().numpy()
