"""Alignment with no pairs at all: mini-vec2vec (Dar 2025, arXiv 2510.02348; official code guy-dar/mini-vec2vec)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike, wrap_like
from latentstitch._core.kmeans import kmeans
from latentstitch._core.knn import mutual_nearest
from latentstitch._core.numerics import matmul, rescaled_row_norms, unit_rows
from latentstitch._core.params import Rule, check_bool, check_positive_int, check_seed, rule
from latentstitch.alignment._clusters import cluster_means, principal_axes, project
from latentstitch.alignment._common import (
    check_rotation_shape,
    mean_of_neighbours,
    orthogonal_factor,
    random_orthogonal,
    seeded,
    space,
)
from latentstitch.alignment._matching import match_by_structure, nearest_cosine, pseudo_pair_map
from latentstitch.stitching import AffineMap

#: Probe rows each candidate starting map is fitted and ranked on.
RANKING_ROWS = 256
#: k-means++ starts per clustering of a matching round, the least inertia kept: both spaces must reach the same
#: partition for their centroids to match, and one start often stops in another local optimum.
N_INIT = 3
#: The mutual refinement stops once a round moves the map by less than this (Frobenius norm / sqrt(width)).
MUTUAL_TOL = 1e-3
#: ... or once its mutual pairs grew by less than 1 %.
MUTUAL_GROWTH = 1.01


class UnpairedAlignment(AffineMap):
    """Align two embedding spaces from their point clouds alone: no parallel pair is needed.

    The linear recipe of mini-vec2vec (Dar 2025), step by step as the official notebook, with every step batched
    and one exact refinement added:

    1. Each space is centred on its mean and its rows L2-normalised.
    2. **Anchors by structure**: ``n_matchings`` rounds, each with its own number of clusters (from ``n_clusters``
       down to half of it, so that some round meets the data's own count: k-means solutions that split clusters
       differently in the two spaces do not match). Each space is clustered (k-means, best of 3 k-means++ starts,
       on its 64 leading principal axes; centroids are the full-width cluster means) and the two sets of centroids
       are matched by their centred Gram matrices, a quadratic assignment solved by 2-opt: ``n_restarts`` ascents
       run as one batch, the first started from the Hungarian assignment of rotation-invariant relational
       signatures (each centroid's sorted inner products).
    3. **Pseudo-pairs through relative space**: every row is described by its cosines to its space's matched
       centroids; each source row is paired with the mean of the ``n_neighbors`` target rows whose relative vectors
       are most similar, and an orthogonal map is fitted on these pseudo-pairs (Procrustes). One candidate map per
       round and one through all rounds' centroids at once (the notebook's); the candidate whose image of a probe
       sample lies nearest the target rows (mean cosine to the nearest row) is kept as ``W``.
    4. **Refine-1**: ``refine_iter`` rounds of "map a sample of source rows, average their ``n_neighbors`` nearest
       targets, refit, W <- (W + W_new) / 2".
    5. **Refine-2**: k-means with ``refine_clusters`` centroids in the source, k-means in the target started from
       the mapped source centroids, and a Procrustes fit between the two sets of centroids (averaged into W).
    6. **Mutual refinement** (not in the notebook; the refinement of Conneau et al. 2018): up to ``refine_mutual``
       rounds of Procrustes on the mutual nearest neighbours of mapped source and target rows, while the pairs
       change and grow. Where the target is an orthogonal image of the source, this recovers the map to numerical
       precision; 0 skips it.

    Every step works on at most ``subsample`` rows of each space (one fixed random subset per fit), so one fit costs
    about the same from 5,000 rows up. Measured on one CPU thread (``python -m benchmarks unpaired_alignment``):
    ~0.5 s at 1,800 x 16, ~9 s at 20,000 x 768; an exact rotation of 12 clusters (1,800 x 16) is recovered to
    1e-8 on 16 of 16 seeds (75% of partners before). Where the official notebook took 273-348 s on GloVe 8k / 8k,
    this takes ~3 s at the same top-1 (1.00). The notebook's own budget (``n_matchings=30``,
    ``subsample=10_000``, ``refine_iter=100``, ``refine_clusters=500``, ``refine_mutual=0``) is a parameter setting
    away (its cluster counts per round and candidate choice are not).

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
        Matching rounds in step 2 (official: 30).
    n_restarts : int
        2-opt ascents per matching, the best objective kept (official: 30).
    subsample : int
        Rows of each space any step works on (official: 10,000 for step 2, all rows elsewhere); all rows when fewer.
    n_neighbors : int
        Target rows averaged into each pseudo-pair (official: 50).
    refine_iter : int
        Rounds of refine-1 (official: 100); 0 skips it.
    refine_sample : int
        Source rows per refine-1 round (official: 1,000).
    refine_clusters : int
        Centroids of refine-2 and of ``score_`` (official: 500), capped at a fifth of the smaller space; 0 skips
        both.
    refine_mutual : int
        Rounds of the mutual refinement at most; 0 skips it.
    n_null : int
        Random rotations the k-means consistency is calibrated against (``score_``). Needs ``refine_clusters``.
    check : bool
        Also compute ``stability_`` (costs two more alignments of half the data). Default False.
    random_state : int
        Seed of every subsample, k-means and 2-opt start: a fit is deterministic.

    Attributes
    ----------
    coef_ : (d_s, d_t), intercept_ : (d_t,)
        ``transform(x) = x @ coef_ + intercept_`` (float64, of the fit input's type).
    rotation_ : (d_s, d_t)
        ``W`` (on centred, unit-norm rows); orthogonal after the mutual refinement, close to it otherwise.
    scale_ : float
        Ratio of mean norms, target over source.
    score_ : float
        Calibrated self-consistency (see above): ~1 good, ~0 no better than a random map. NaN when
        ``refine_clusters=0``.
    kmeans_consistency_, null_consistency_ : float
        The k-means self-consistency of the fitted map, and its mean over random rotations.
    n_mutual_ : int
        Mutual nearest-neighbour pairs the last mutual refinement was fitted on (0 when skipped).
    stability_ : float
        Agreement of two alignments fitted on random halves, in [-1, 1]; NaN without ``check``.
    """

    def __init__(
        self,
        n_clusters: int = 20,
        n_matchings: int = 10,
        n_restarts: int = 30,
        subsample: int = 5000,
        n_neighbors: int = 50,
        refine_iter: int = 3,
        refine_sample: int = 1000,
        refine_clusters: int = 50,
        refine_mutual: int = 10,
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
        self.refine_mutual = refine_mutual
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
        rotation, centres, n_mutual = self._align(unit_s, unit_t, rng)
        consistency, null = self._consistency(centres, rotation, unit_t, rng)
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
        self.n_mutual_ = n_mutual
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
        "refine_mutual": rule(check_positive_int, minimum=0),
        "n_null": rule(check_positive_int),
        "check": rule(check_bool),
        "random_state": rule(check_seed),
    }

    def _check_loaded(self) -> None:
        super()._check_loaded()
        check_rotation_shape(self)

    # --- the recipe ----------------------------------------------------------------------------------------
    def _align(
        self, x64: torch.Tensor, y64: torch.Tensor, rng: np.random.Generator
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None, int]:
        """The map W (d_s, d_t) between unit rows x and y (float64); the source centroids of refine-2 and the
        target rows (None when skipped); the mutual pairs of the last mutual refinement. Searches run in float32
        on fixed subsets of at most ``subsample`` rows; fits in float64."""
        rows_x, rows_y = _subset(x64.shape[0], self.subsample, rng), _subset(y64.shape[0], self.subsample, rng)
        x64, y64 = x64[rows_x.to(x64.device)], y64[rows_y.to(y64.device)]
        x, y = x64.float(), y64.float()
        axes_y = principal_axes(y)
        reduced_x, reduced_y = project(x, principal_axes(x)), project(y, axes_y)
        rotation = self._initial_map(x, y, x64, y64, reduced_x, reduced_y, rng)
        for _ in range(self.refine_iter):  # refine-1
            rows = torch.as_tensor(_subset(x.shape[0], self.refine_sample, rng), device=x.device)
            mapped = unit_rows(matmul(x[rows], rotation.float()), "mapped source")
            matched = mean_of_neighbours(mapped, y, self.n_neighbors, values=y64)
            rotation = 0.5 * rotation + 0.5 * orthogonal_factor(matmul(x64[rows].T, matched))
        clusters = self._correction_clusters(x, y)
        source_centres = None
        if clusters:  # refine-2
            source_centres = cluster_means(x, reduced_x, kmeans(reduced_x, clusters, rng))
            start = project(matmul(source_centres, rotation.float()), axes_y)
            target_centres = cluster_means(y, reduced_y, kmeans(reduced_y, clusters, rng, init=start))
            correction = orthogonal_factor(matmul(source_centres.double().T, target_centres.double()))
            rotation = 0.5 * rotation + 0.5 * correction
        previous: tuple[torch.Tensor, torch.Tensor] | None = None
        for _ in range(self.refine_mutual):  # while the pairs change and grow by more than MUTUAL_GROWTH
            i, j = mutual_nearest(unit_rows(matmul(x, rotation.float()), "mapped source"), y)
            if i.numel() < 2 or (
                previous is not None
                and (i.numel() < previous[0].numel() or (torch.equal(i, previous[0]) and torch.equal(j, previous[1])))
            ):
                break
            grown = previous is None or i.numel() > MUTUAL_GROWTH * previous[0].numel()
            previous, updated = (i, j), orthogonal_factor(matmul(x64[i].T, y64[j]))
            moved = float(torch.linalg.matrix_norm(updated - rotation)) / min(rotation.shape) ** 0.5
            rotation = updated
            if moved < MUTUAL_TOL or not grown:
                break
        n_mutual = 0 if previous is None else int(previous[0].numel())
        return rotation, (None if source_centres is None else (source_centres, y, reduced_y, axes_y)), n_mutual

    def _correction_clusters(self, x: torch.Tensor, y: torch.Tensor) -> int:
        clusters = min(self.refine_clusters, x.shape[0] // 5, y.shape[0] // 5)
        return clusters if clusters >= 2 else 0

    def _consistency(self, fitted, rotation: torch.Tensor, y: torch.Tensor, rng: np.random.Generator):
        """The k-means self-consistency of the map and its mean over ``n_null`` random orthogonal maps: the target's
        k-means started from each map's image of the source centroids, all in one batch."""
        if fitted is None:
            return float("nan"), float("nan")
        centres_x, rows_y, reduced_y, axes_y = fitted
        maps = [rotation.float()]
        maps += [random_orthogonal(*rotation.shape, rng, centres_x) for _ in range(self.n_null)]
        starts = torch.stack([matmul(centres_x, w) for w in maps])
        reduced_ends = kmeans(reduced_y, centres_x.shape[0], rng, init=project(starts, axes_y))
        ends = torch.stack([cluster_means(rows_y, reduced_y, end) for end in reduced_ends])
        cosines = torch.nn.functional.cosine_similarity(starts, ends, dim=2).mean(dim=1).double()
        return float(cosines[0]), float(cosines[1:].mean())

    def _initial_map(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        x64: torch.Tensor,
        y64: torch.Tensor,
        reduced_x: torch.Tensor,
        reduced_y: torch.Tensor,
        rng: np.random.Generator,
    ) -> torch.Tensor:
        """Steps 2-3 with a choice: a candidate map per matching round (pseudo-pairs through that round's matched
        centroids) and one through all rounds' centroids at once (the notebook's), each fitted on ``RANKING_ROWS``
        probe rows; the candidate whose image of the probe lies nearest the target rows (mean cosine to the nearest)
        is refitted on ``refine_sample`` rows and kept."""
        probe = torch.as_tensor(_subset(x.shape[0], self.refine_sample, rng), device=x.device)
        rounds = [
            self._matched_centroids(x, y, reduced_x, reduced_y, clusters, rng) for clusters in self._cluster_counts()
        ]
        rounds.append((torch.cat([cx for cx, _ in rounds]), torch.cat([cy for _, cy in rounds])))
        ranking = probe[:RANKING_ROWS]
        quality = [
            nearest_cosine(x[ranking], pseudo_pair_map(x[ranking], y, x64[ranking], y64, *pair, self.n_neighbors), y)
            for pair in rounds
        ]
        best = rounds[int(np.argmax(quality))]
        return pseudo_pair_map(x[probe], y, x64[probe], y64, *best, self.n_neighbors)

    def _cluster_counts(self) -> list[int]:
        """The k-means sizes of the matching rounds: spread from n_clusters / 2 to n_clusters, so that some round
        meets the data's own number of clusters (matching k-means solutions that split clusters differently in the
        two spaces fails)."""
        low = max(2, self.n_clusters // 2)
        return [round(float(c)) for c in np.linspace(self.n_clusters, low, self.n_matchings)]

    def _matched_centroids(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        reduced_x: torch.Tensor,
        reduced_y: torch.Tensor,
        clusters: int,
        rng: np.random.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Centroids of both spaces (k-means of their leading principal components, best of ``N_INIT`` starts; the
        centroids are the means of the full rows of each cluster), the target's reordered to match the source's by
        quadratic assignment of their centred Gram matrices."""
        centres_x = cluster_means(x, reduced_x, kmeans(reduced_x, clusters, rng, n_init=N_INIT))
        centres_y = cluster_means(y, reduced_y, kmeans(reduced_y, clusters, rng, n_init=N_INIT))
        order = match_by_structure(_centred_gram(centres_x), _centred_gram(centres_y), self.n_restarts, rng)
        return centres_x, centres_y[torch.as_tensor(order, device=y.device)]


def _mean_norm(t: torch.Tensor) -> torch.Tensor:
    """Mean row norm, exact at any magnitude (plain norms of rows near 1e+-200 overflow or underflow)."""
    _, norms, scales = rescaled_row_norms(t)
    return (norms / scales).mean()


def _subset(n: int, size: int, rng: np.random.Generator) -> torch.Tensor:
    """All of ``n`` rows in order when ``size >= n``, else ``size`` distinct rows drawn at random."""
    return torch.arange(n) if size >= n else torch.as_tensor(rng.choice(n, size=size, replace=False))


def _halves(n: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    order = torch.as_tensor(rng.permutation(n))
    return order[: n // 2], order[n // 2 :]


def _centred_gram(c: torch.Tensor) -> np.ndarray:
    centred = c.double() - c.double().mean(dim=0)
    return (centred @ centred.T).cpu().numpy()
