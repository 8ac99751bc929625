"""Alignment from a few parallel pairs and many unpaired vectors on each side (*pools*): semi-supervised Procrustes.

A user with 100 paired items usually also holds thousands of vectors of other items in each model: the old model's
index, the new model's vectors of whatever it embedded since. Three estimators use them, each with
``fit(source, target, source_pool=..., target_pool=...)`` (``source``, ``target``: the parallel pairs; the pools:
(M_s, p) and (M_t, q) unpaired rows, different items and counts on each side allowed):

- ``PoolProcrustes`` (the pairs as constraints inside an alignment over the pools, as Unpaired Rosetta):
  Procrustes on the pairs, then alternately match the mapped source pool to the target pool (mutual nearest
  neighbours under CSLS) and refit Procrustes on the pairs (weighted to carry ``ANCHOR_SHARE`` of the total) plus the
  matched pseudo-pairs, until the matching stops changing;
- ``SelfLearning`` (VecMap's self-learning, Artetxe et al. ACL 2018): a dictionary seeded by the pairs, re-induced
  every round from both directions' nearest neighbours under CSLS with stochastic dictionary induction, refitted
  until the objective stops improving;
- ``BootstrappedProcrustes``: the pairs grown into more by ``bootstrap_anchors`` over the pools (relative
  representations matched by optimal transport), then a weighted Procrustes on the pairs and the grown ones.

Every one maps ``y = (x - mean_s) W scale + mean_t``: ``W`` orthogonal (zero-padded when the widths differ), the
means over the pairs and the pool of each side, ``scale`` the ratio of the two sides' root-mean-square spreads (the
target's spread kept, as ``procrustes_norm``). Without pools, each is Procrustes on the pairs alone.

Cost and memory: the matching works on at most ``subsample`` rows of the source pool and ``target_subsample`` of the
target pool (seeded random draws), in float32, by blocks of cosines (``_core.knn.csls_nearest``): O((subsample +
target_subsample) x width) for the rows and one block of at most 2^24 cosines (64 MiB; kept between the two
passes of a round when the whole subsample x target_subsample block fits in it, as with the defaults), O(subsample
x target_subsample x width) time per round; fits in float64, O(width^2). ``BootstrappedProcrustes`` holds the
transport plan, O(subsample x target_subsample) float64 (8 MiB with its defaults).
"""

from __future__ import annotations

import hashlib
import math
import sys
import threading
import warnings
from collections import OrderedDict
from typing import Any, ClassVar

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike, check_same_rows, wrap_like
from latentstitch._core.knn import csls_nearest
from latentstitch._core.least_squares import loo_errors_from_svd, ridge_from_svd, ridge_svd
from latentstitch._core.numerics import matmul, unit_rows
from latentstitch._core.params import (
    Rule,
    check_nonnegative,
    check_number,
    check_positive_int,
    check_probability,
    check_ridges,
    check_seed,
    optional,
    rule,
)
from latentstitch.alignment._bootstrap import bootstrap_anchors
from latentstitch.alignment._common import check_rotation_shape, orthogonal_factor, space
from latentstitch.stitching import DEFAULT_RIDGES, AffineMap

#: The share of the total weight of a Procrustes fit the real pairs carry when pseudo-pairs outnumber them (each
#: pair then weighs n_pseudo / n_pairs): a few true pairs are not drowned by thousands of guessed ones.
ANCHOR_SHARE = 0.2
#: Neighbourhood of CSLS (VecMap's ``--csls 10``, Conneau et al.'s k).
CSLS_K = 10


class PoolAlignment(AffineMap, abstract=True):
    """What the three pool estimators share: the checked pairs and pools, the subsample of each pool, the weighted
    Procrustes fit and the affine map it gives (``coef_``, ``intercept_``, ``rotation_``, ``scale_``)."""

    def _inputs(self, source: ArrayLike, target: ArrayLike, source_pool: Any, target_pool: Any) -> Any:
        """The checked pairs and (subsampled) pools in float64, each side multiplied by the power of two that brings
        its largest magnitude (pairs and pool together) into [0.5, 1): exact, and no square, cross-product or spread
        of the fit can overflow or underflow (1e+200 or 1e-200 inputs fit as ordinary ones; ``_finish`` scales the
        map back). Returns ``(s, t, pools or None, exponents)``: the given rows are ``2^exponent`` times these."""
        s = space(source, "source", min_rows=2)
        t = space(target, "target", min_rows=2)
        check_same_rows(s, t, "source", "target")
        s64, t64 = s.detach().double(), t.detach().double().to(s.device)
        if (source_pool is None) != (target_pool is None):
            raise ValueError("source_pool, target_pool: give both pools (unpaired vectors of each model), or neither")
        pools = None
        if source_pool is not None:
            rng = np.random.default_rng([check_seed(self.random_state, "random_state"), 31])
            pools = tuple(
                _pool(pool, name, like.shape[1], side, cap, rng, like.device)
                for pool, name, like, side, cap in (
                    (source_pool, "source_pool", s64, "source", self.subsample),
                    (target_pool, "target_pool", t64, "target", self.target_subsample),
                )
            )
        exponents = tuple(
            _magnitude_exponent(rows, *(() if pools is None else (pools[i],))) for i, rows in enumerate((s64, t64))
        )
        s64, t64 = _times_power_of_two(s64, -exponents[0]), _times_power_of_two(t64, -exponents[1])
        if pools is not None:
            pools = tuple(_times_power_of_two(pool, -e) for pool, e in zip(pools, exponents, strict=True))
        return s64, t64, pools, exponents

    def _finish(
        self, rotation: torch.Tensor, centre: tuple[torch.Tensor, ...], like: ArrayLike, exponents: tuple[int, int]
    ) -> None:
        """The affine map from the rotation and the two sides' means and spreads (``centre``: mean_s, mean_t,
        spread_s, spread_t, of the rows ``_inputs`` returned), at the inputs' magnitudes (``exponents``)."""
        mean_s, mean_t, spread_s, spread_t = centre
        scale = 1.0
        if spread_s > 0:
            try:
                scale = math.ldexp(float(spread_t / spread_s), exponents[1] - exponents[0])
            except OverflowError:
                scale = math.inf
        coef = rotation * scale
        mean_s, mean_t = (_times_power_of_two(m, e) for m, e in zip((mean_s, mean_t), exponents, strict=True))
        intercept = mean_t - mean_s @ coef
        if not (math.isfinite(scale) and (scale > 0 or spread_t == 0) and bool(torch.isfinite(intercept).all())):
            raise ValueError(
                "source, target: the map between their magnitudes (largest values near "
                f"2^{exponents[0]} and 2^{exponents[1]}) is out of float64's range; rescale one side"
            )
        self._set_map(coef, intercept, like, 2)
        self.rotation_ = wrap_like(rotation, like)
        self.scale_ = scale

    def _check_loaded(self) -> None:
        super()._check_loaded()
        check_rotation_shape(self)


def _pool(
    pool: Any, name: str, width: int, side: str, cap: int, rng: np.random.Generator, device: torch.device
) -> torch.Tensor:
    """A checked pool (float64, on the pairs' device): at least one row, the pairs' width, finite; above ``cap`` rows,
    ``cap`` of them drawn at random (in the pool's order)."""
    rows = space(pool, name, min_rows=1)
    if rows.shape[1] != width:
        model = "new" if side == "source" else "old"
        raise ValueError(
            f"{name}: has {rows.shape[1]} features but {side} has {width}; give the {model} model's vectors"
        )
    if rows.shape[0] > cap:
        rows = rows[torch.as_tensor(np.sort(rng.choice(rows.shape[0], size=cap, replace=False)), device=rows.device)]
    return rows.detach().to(device=device, dtype=torch.float64)


def _magnitude_exponent(*sides: torch.Tensor) -> int:
    """``e`` with the largest magnitude of the rows of ``sides`` in [2^(e-1), 2^e) (0 for all-zero rows)."""
    top = max(float(rows.abs().amax()) for rows in sides)
    return math.frexp(top)[1] if top > 0 else 0


def _times_power_of_two(t: torch.Tensor, exponent: int) -> torch.Tensor:
    """``t * 2^exponent``, exact (in two factors: ``2^1074``, which subnormal data need, is not a float64)."""
    if exponent == 0:
        return t
    half = exponent // 2
    return t * 2.0**half * 2.0 ** (exponent - half)


def side_centre(pairs: torch.Tensor, pool: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and root-mean-square spread (about it) of one side's rows: the pairs and the pool together."""
    rows = pairs if pool is None else torch.cat([pairs, pool])
    mean = rows.mean(dim=0)
    return mean, (rows - mean).pow(2).sum(dim=1).mean().sqrt()


def weighted_rotation(
    x: torch.Tensor, y: torch.Tensor, px: torch.Tensor | None = None, py: torch.Tensor | None = None, weights=None
) -> torch.Tensor:
    """The orthogonal W maximising ``sum w_i <x_i W, y_i>`` over the pairs (x, y) and the pseudo-pairs (px, py),
    centred rows: each pair weighs 1 alone, and together ``ANCHOR_SHARE`` of the total when the pseudo-pairs'
    weight (``weights``, default 1 each) is larger than their count."""
    cross = matmul(x.T, y)
    if px is not None and px.shape[0]:
        w = torch.ones(px.shape[0], dtype=px.dtype, device=px.device) if weights is None else weights
        total = float(w.sum())
        each = max(1.0, ANCHOR_SHARE / (1.0 - ANCHOR_SHARE) * total / x.shape[0])
        cross = each * cross + matmul((px * w[:, None]).T, py)
    return orthogonal_factor(cross)


def _matching_rows(x: torch.Tensor) -> torch.Tensor:
    """Float32 unit rows for the nearest-neighbour searches (the fits stay in float64)."""
    return unit_rows(x, "pool", eps=1e-30).float()


class PoolProcrustes(PoolAlignment):
    """Procrustes from a few pairs, refined over two unpaired pools (Rosetta-style: the pairs as constraints inside
    an unsupervised alignment).

    1. Each side is centred on the mean of its pairs and pool; ``W`` starts as the orthogonal Procrustes map of the
       pairs.
    2. The (subsampled) source pool is mapped by ``W`` and matched to the target pool: mutual nearest neighbours
       under CSLS (k = ``CSLS_K``; Conneau et al. 2018) are the pseudo-pairs.
    3. ``W`` is refitted on the pairs, each weighted so that together they carry ``ANCHOR_SHARE`` of the weight, plus
       the pseudo-pairs; back to 2 until the matching stops changing (at most ``tol`` of the pseudo-pairs differ
       from the round before) or after ``max_iter`` refits.

    Parameters
    ----------
    max_iter : int
        Refits at most (0: Procrustes on the pairs alone).
    tol : float
        The matching "stops changing" when at most this share of its pairs differs from the previous round's.
    subsample, target_subsample : int
        Rows of the source pool and of the target pool the matching works on (seeded random draws above them). The
        target's is larger: two independent draws share few items (a tenth of each of two 10k pools share a
        hundredth), so every drawn source row is matched against a larger share of the target pool.
    random_state : int
        Seed of the draws.

    Attributes
    ----------
    coef_, intercept_ : ``transform(x) = x @ coef_ + intercept_`` (float64, of the input's type).
    rotation_ : (p, q) orthogonal ``W``; ``scale_``: the target's spread over the source's.
    n_pseudo_pairs_ : int
        Pseudo-pairs of the last refit (0 without pools).
    n_iter_ : int
        Refits run.
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "max_iter": rule(check_positive_int, minimum=0),
        "tol": rule(check_probability),
        "subsample": rule(check_positive_int, minimum=2),
        "target_subsample": rule(check_positive_int, minimum=2),
        "random_state": rule(check_seed),
    }

    def __init__(
        self,
        max_iter: int = 10,
        tol: float = 0.01,
        subsample: int = 800,
        target_subsample: int = 3200,
        random_state: int = 0,
    ):
        self.max_iter = max_iter
        self.tol = tol
        self.subsample = subsample
        self.target_subsample = target_subsample
        self.random_state = random_state

    def fit(
        self, source: ArrayLike, target: ArrayLike, source_pool: ArrayLike | None = None, target_pool=None
    ) -> PoolProcrustes:
        """Fit on the pairs (``source``, ``target``: the same items' rows in the same order) and, optionally, the
        two pools (unpaired rows of each model). Returns ``self``."""
        self._check_params()
        s, t, pools, exponents = self._inputs(source, target, source_pool, target_pool)
        centres, rotation, _ = self._align(s, t, pools)
        self._finish(rotation, centres, source, exponents)
        return self

    def _align(
        self, s: torch.Tensor, t: torch.Tensor, pools: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Steps 1-3 on the pairs (``s``, ``t``) and the pools as ``_inputs`` gives them: each side's mean and
        spread (pairs and pool together: ``(mean_s, mean_t, spread_s, spread_t)``), the last rotation and the last
        matching (rows of each pool; empty without pools); sets ``n_pseudo_pairs_`` and ``n_iter_``."""
        (mean_s, spread_s), (mean_t, spread_t) = (
            side_centre(side, None if pools is None else pools[i]) for i, side in enumerate((s, t))
        )
        x, y = s - mean_s, t - mean_t
        rotation = weighted_rotation(x, y)
        self.n_pseudo_pairs_, self.n_iter_ = 0, 0
        matched = (torch.zeros(0, dtype=torch.int64, device=s.device),) * 2
        if pools is not None:
            rotation, matched = self._refine(x, y, pools[0] - mean_s, pools[1] - mean_t, rotation)
        return (mean_s, mean_t, spread_s, spread_t), rotation, matched

    def _refine(
        self, x: torch.Tensor, y: torch.Tensor, px: torch.Tensor, py: torch.Tensor, rotation: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Steps 2-3 on centred pairs (x, y) and pools (px, py) from ``rotation``: the last rotation and the last
        matching (rows of px, rows of py); sets ``n_pseudo_pairs_`` and ``n_iter_``. The same inputs give the same
        result, remembered (``_MATCHINGS``): ``ridge_pools`` refines exactly as ``procrustes_pools`` on each fold."""
        key = _matching_key((x, y, px, py, rotation), (self.max_iter, self.tol))
        with _MATCHINGS_LOCK:
            known = None if key is None else _MATCHINGS.get(key)
            if known is not None:
                _MATCHINGS.move_to_end(key)
        if known is not None:
            rotation, (i, j), pseudo, rounds = known
            self.n_pseudo_pairs_, self.n_iter_ = pseudo, self.n_iter_ + rounds
            return rotation.clone(), (i.clone(), j.clone())
        start = self.n_iter_
        rotation, (i, j) = self._refine_now(x, y, px, py, rotation)
        if key is not None:
            kept = (rotation.clone(), (i.clone(), j.clone()), self.n_pseudo_pairs_, self.n_iter_ - start)
            with _MATCHINGS_LOCK:
                _MATCHINGS[key] = kept
                while len(_MATCHINGS) > MATCHINGS_KEPT:
                    _MATCHINGS.popitem(last=False)
        return rotation, (i, j)

    def _refine_now(
        self, x: torch.Tensor, y: torch.Tensor, px: torch.Tensor, py: torch.Tensor, rotation: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        unit_x, unit_y = _matching_rows(px), _matching_rows(py)
        previous: set[tuple[int, int]] | None = None
        i = j = torch.zeros(0, dtype=torch.int64, device=px.device)
        for _ in range(self.max_iter):
            i, j = csls_nearest(_matching_rows(matmul(unit_x, rotation.float())), unit_y, CSLS_K).mutual()
            pairs = set(zip(i.tolist(), j.tolist(), strict=True))
            if previous is not None and len(pairs ^ previous) <= self.tol * max(len(pairs), 1):
                break
            previous = pairs
            rotation = weighted_rotation(x, y, px[i], py[j])
            self.n_pseudo_pairs_, self.n_iter_ = len(pairs), self.n_iter_ + 1
        return rotation, (i, j)


#: The last ``MATCHINGS_KEPT`` pool matchings (``PoolProcrustes._refine``), keyed by the bytes of their inputs and
#: their parameters: a ``Bridge`` fits ``procrustes_pools`` and ``ridge_pools`` on the same folds, and the second
#: reads each fold's matching instead of repeating it (about 0.65 s CPU a fold at 100 anchors + 10k pools). Only
#: the rotation and the matched row numbers are kept (a few MiB at most).
_MATCHINGS: OrderedDict[bytes, tuple] = OrderedDict()
_MATCHINGS_LOCK = threading.Lock()
MATCHINGS_KEPT = 8


def _matching_key(tensors: tuple[torch.Tensor, ...], params: tuple) -> bytes | None:
    """A digest of the tensors' values, dtypes and shapes and of ``params``; None off the CPU (hashing would copy
    the tensors to the host, and there the matching is cheap)."""
    if any(t.device.type != "cpu" for t in tensors):
        return None
    digest = hashlib.sha256(repr(params).encode())  # twice blake2b's speed here (the CPU's SHA instructions)
    for t in tensors:
        digest.update(f"{t.dtype}{tuple(t.shape)}".encode())
        digest.update(memoryview(t.detach().contiguous().numpy()).cast("B"))
    return digest.digest()


class SelfLearning(PoolAlignment):
    """VecMap's semi-supervised self-learning (Artetxe et al., ACL 2018; official code artetxem/vecmap,
        ``map_embeddings.py``) with the pairs as its seed dictionary, the pools as its vocabulary.

        As VecMap: both sides are normalised unit, centre, unit (``--normalize unit center unit``); every round fits an
        orthogonal map on the dictionary, then re-induces the dictionary from the union of both directions' nearest
        neighbours under CSLS (``--direction union --csls 10``) with stochastic dictionary induction (each candidate
        kept with probability ``keep``, which starts at ``stochastic_initial`` and is multiplied by
        ``stochastic_multiplier`` whenever the objective, the mean best cosine of both directions, has not improved by
        ``threshold`` for ``stochastic_interval`` rounds); it stops when that happens with ``keep`` already 1.

        Where this departs from VecMap, and why: the pairs stay in the dictionary every round (VecMap keeps its seed
        only for the first fit; here they are known-true pairs); the schedule is compressed (VecMap's semi-supervised
        preset starts at keep 0.1 with an interval of 50 rounds: hundreds of rounds, too many for the bridge's
        cross-validation, which fits a route once per fold) and capped by ``max_iter`` (the last round allowed induces
    with every candidate kept); the final map stays orthogonal
        (VecMap's last step whitens, re-weights and de-whitens both sides, which moves the target out of its own space,
        where the old model's index reads it); and the vocabulary cut-off (``--vocabulary_cutoff 20000``, the most
        frequent words) is a seeded random ``subsample``.

        Parameters
        ----------
        max_iter : int
            Rounds at most (0: Procrustes on the pairs alone).
        threshold : float
            The objective's least improvement that counts (VecMap's 1e-6).
        stochastic_initial, stochastic_multiplier : float
            The first keep probability, and its factor (VecMap's 2).
        stochastic_interval : int
            Rounds without improvement before ``keep`` grows.
        subsample, target_subsample : int
            Rows of the source pool and of the target pool the induction works on (as ``PoolProcrustes``).
        random_state : int
            Seed of the draw and of the stochastic induction.

        Attributes
        ----------
        coef_, intercept_, rotation_, scale_ : as ``PoolProcrustes``.
        n_pseudo_pairs_ : int
            Induced pairs of the last dictionary (0 without pools).
        n_iter_ : int
            Rounds run.
        objective_ : float
            The last round's objective (NaN without pools).
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "max_iter": rule(check_positive_int, minimum=0),
        "threshold": rule(check_nonnegative),
        "stochastic_initial": rule(check_probability, low_open=True),
        "stochastic_multiplier": rule(check_number, low=1.0, low_open=True),
        "stochastic_interval": rule(check_positive_int),
        "subsample": rule(check_positive_int, minimum=2),
        "target_subsample": rule(check_positive_int, minimum=2),
        "random_state": rule(check_seed),
    }

    def __init__(
        self,
        max_iter: int = 4,
        threshold: float = 1e-6,
        stochastic_initial: float = 0.5,
        stochastic_multiplier: float = 2.0,
        stochastic_interval: int = 1,
        subsample: int = 800,
        target_subsample: int = 3200,
        random_state: int = 0,
    ):
        self.target_subsample = target_subsample
        self.max_iter = max_iter
        self.threshold = threshold
        self.stochastic_initial = stochastic_initial
        self.stochastic_multiplier = stochastic_multiplier
        self.stochastic_interval = stochastic_interval
        self.subsample = subsample
        self.random_state = random_state

    def fit(
        self, source: ArrayLike, target: ArrayLike, source_pool: ArrayLike | None = None, target_pool=None
    ) -> SelfLearning:
        """Fit on the pairs and, optionally, the two pools (as ``PoolProcrustes.fit``). Returns ``self``."""
        self._check_params()
        s, t, pools, exponents = self._inputs(source, target, source_pool, target_pool)
        (mean_s, spread_s), (mean_t, spread_t) = (
            side_centre(side, None if pools is None else pools[i]) for i, side in enumerate((s, t))
        )
        self.n_pseudo_pairs_, self.n_iter_, self.objective_ = 0, 0, math.nan
        if pools is None:
            rotation = weighted_rotation(s - mean_s, t - mean_t)
        else:
            rotation = self._learn(_vecmap_normal(s, pools[0]), _vecmap_normal(t, pools[1]))
        self._finish(rotation, (mean_s, mean_t, spread_s, spread_t), source, exponents)
        return self

    def _learn(self, sides_s: tuple[torch.Tensor, torch.Tensor], sides_t: tuple[torch.Tensor, torch.Tensor]):
        """VecMap's training loop on normalised (pairs, pool) rows of each side; returns the last orthogonal map."""
        (x, px), (y, py) = sides_s, sides_t
        unit_x, unit_y = px.float(), py.float()
        generator = torch.Generator(device=px.device).manual_seed(check_seed(self.random_state, "random_state"))
        keep, best, last_improvement, it, end = self.stochastic_initial, -math.inf, 0, 1, False
        i = j = None
        cross = matmul(x.T, y)  # the pairs stay in the dictionary; the induced pairs join them
        while True:
            if it - last_improvement > self.stochastic_interval:
                end = keep >= 1.0
                keep, last_improvement = min(1.0, self.stochastic_multiplier * keep), it
            rotation = orthogonal_factor(cross if i is None else cross + matmul(px[i].T, py[j]))
            if end or it > self.max_iter:
                break
            # the last round allowed is deterministic, so the map is not fitted on a randomly thinned dictionary
            final = 1.0 if it == self.max_iter else keep
            match = csls_nearest(matmul(unit_x, rotation.float()), unit_y, CSLS_K, final, generator)
            i, j = match.union()
            objective = float((match.forward_similarity.mean() + match.backward_similarity.mean()) / 2)
            if objective - best >= self.threshold:
                best, last_improvement = objective, it
            self.n_pseudo_pairs_, self.n_iter_, self.objective_ = int(i.numel()), it, objective
            it += 1
        return rotation


def _vecmap_normal(pairs: torch.Tensor, pool: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """VecMap's ``--normalize unit center unit`` over one side's rows (pairs and pool together), split back."""
    rows = unit_rows(torch.cat([pairs, pool]), "rows", eps=1e-30)
    rows = unit_rows(rows - rows.mean(dim=0), "rows", eps=1e-30)
    return rows[: pairs.shape[0]], rows[pairs.shape[0] :]


class BootstrappedProcrustes(PoolAlignment):
    """Procrustes on the pairs grown over the pools by ``bootstrap_anchors`` (Cannistraci et al. 2023).

    The pairs are the seeds; the (subsampled) pools are the rows they grow into: every row is described by its
    cosines to the current anchors, the two sides' relative vectors are matched by entropic optimal transport and the
    most confident mutual matches join the anchors, over ``n_rounds`` rounds, up to ``grow`` times the smaller pool
    (fewer when fewer match mutually). The map is Procrustes on the pairs (together ``ANCHOR_SHARE`` of the weight)
    and the grown pairs, each weighted by its confidence.

    Parameters
    ----------
    grow : float
        New pairs asked for, as a share of the smaller (subsampled) pool.
    n_rounds : int
        Rounds of ``bootstrap_anchors``.
    subsample, target_subsample : int
        Rows of the source pool and of the target pool the bootstrap works on (as ``PoolProcrustes``; its transport
        plan is subsample x target_subsample float64).
    random_state : int
        Seed of the draw.

    Attributes
    ----------
    coef_, intercept_, rotation_, scale_ : as ``PoolProcrustes``.
    n_pseudo_pairs_ : int
        Grown pairs the map was fitted on (0 without pools).
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "grow": rule(check_probability, low_open=True),
        "n_rounds": rule(check_positive_int),
        "subsample": rule(check_positive_int, minimum=2),
        "target_subsample": rule(check_positive_int, minimum=2),
        "random_state": rule(check_seed),
    }

    def __init__(
        self,
        grow: float = 0.5,
        n_rounds: int = 3,
        subsample: int = 500,
        target_subsample: int = 2000,
        random_state: int = 0,
    ):
        self.target_subsample = target_subsample
        self.grow = grow
        self.n_rounds = n_rounds
        self.subsample = subsample
        self.random_state = random_state

    def fit(
        self, source: ArrayLike, target: ArrayLike, source_pool: ArrayLike | None = None, target_pool=None
    ) -> BootstrappedProcrustes:
        """Fit on the pairs and, optionally, the two pools (as ``PoolProcrustes.fit``). Returns ``self``."""
        self._check_params()
        s, t, pools, exponents = self._inputs(source, target, source_pool, target_pool)
        (mean_s, spread_s), (mean_t, spread_t) = (
            side_centre(side, None if pools is None else pools[i]) for i, side in enumerate((s, t))
        )
        x, y = s - mean_s, t - mean_t
        self.n_pseudo_pairs_ = 0
        rotation = weighted_rotation(x, y)
        wanted = 0 if pools is None else int(self.grow * min(pools[0].shape[0], pools[1].shape[0]))
        if wanted >= 1 and s.shape[0] >= 2:
            n = s.shape[0]
            seeds = np.stack([np.arange(n), np.arange(n)], axis=1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # fewer mutual matches than asked for: the ones found are used
                grown = bootstrap_anchors(
                    torch.cat([s, pools[0]]), torch.cat([t, pools[1]]), seeds, wanted, n_rounds=self.n_rounds
                )
            if len(grown.pairs):
                rows = torch.as_tensor(grown.pairs - n, device=x.device)
                weights = torch.as_tensor(grown.confidence, dtype=x.dtype, device=x.device)
                px, py = pools[0][rows[:, 0]] - mean_s, pools[1][rows[:, 1]] - mean_t
                rotation = weighted_rotation(x, y, px, py, weights)
                self.n_pseudo_pairs_ = len(grown.pairs)
        self._finish(rotation, (mean_s, mean_t, spread_s, spread_t), source, exponents)
        return self


class PoolRidge(PoolAlignment):
    """Ridge regression on a few pairs and the pseudo-pairs ``PoolProcrustes`` matches over two unpaired pools: an
    affine map, not an orthogonal one, so it can rescale and mix the features (what a classifier head reading the
    bridged vectors needs when the two models spread their features differently).

    1. ``PoolProcrustes``'s alignment (same parameters): Procrustes on the pairs refined by matching the pools; its
       last matching (mutual nearest neighbours under CSLS of the mapped source pool and the target pool) gives the
       pseudo-pairs.
    2. Weighted ridge least squares with an unpenalised intercept, ``target ~ source @ M + c``, on the pairs and the
       pseudo-pairs as they are (raw vectors, not centred by the matching): the pairs together carry
       ``anchor_share`` of the weight, the pseudo-pairs the rest, equally.
    3. The ridge (``ridges``, in "relative" units: fractions of the mean eigenvalue of the weighted centred Gram
       matrix) is the one of least leave-one-out error *of the pairs* (exact, from one SVD:
       ``_core.least_squares.ridge_loo_errors``; each target feature's error divided by its spread over the pairs and
       the target pool, so every feature counts alike, as a standard-scaled head reads them): the guessed
       pseudo-pairs help fit the map but never judge it.

    Without pools it is the same ridge on the pairs alone (with at most as many pairs as features: an
    underdetermined map the ridge shrinks).

    Parameters
    ----------
    ridges : sequence of numbers >= 0, optional
        Candidate ridges in relative units (default ``latentstitch.stitching.DEFAULT_RIDGES``, 1e-4 to 1e2).
    anchor_share : float in (0, 1)
        The pairs' share of the total weight when there are pseudo-pairs.
    max_iter, tol, subsample, target_subsample, random_state :
        The matching's, as ``PoolProcrustes``.

    Attributes
    ----------
    coef_, intercept_ : ``transform(x) = x @ coef_ + intercept_`` (float64, of the input's type).
    ridge_ : float
        The chosen ridge (relative units).
    loo_mse_ : list
        The pairs' leave-one-out error (per-feature scaled) of each candidate ridge.
    n_pseudo_pairs_ : int
        Pseudo-pairs the map was fitted on (0 without pools).
    n_iter_ : int
        Refits of the matching.
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "ridges": optional(check_ridges),
        "anchor_share": rule(check_probability, low_open=True, high_open=True),
        **PoolProcrustes._parameter_constraints,
    }

    def __init__(
        self,
        ridges: Any = None,
        anchor_share: float = 0.5,
        max_iter: int = 10,
        tol: float = 0.01,
        subsample: int = 800,
        target_subsample: int = 3200,
        random_state: int = 0,
    ):
        self.ridges = ridges
        self.anchor_share = anchor_share
        self.max_iter = max_iter
        self.tol = tol
        self.subsample = subsample
        self.target_subsample = target_subsample
        self.random_state = random_state

    def fit(
        self, source: ArrayLike, target: ArrayLike, source_pool: ArrayLike | None = None, target_pool=None
    ) -> PoolRidge:
        """Fit on the pairs and, optionally, the two pools (as ``PoolProcrustes.fit``). Returns ``self``."""
        self._check_params()
        ridges = check_ridges(DEFAULT_RIDGES if self.ridges is None else self.ridges, "ridges")
        s, t, pools, exponents = self._inputs(source, target, source_pool, target_pool)
        self.n_pseudo_pairs_, self.n_iter_ = 0, 0
        a, b, weights = s, t, None
        if pools is not None:
            matcher = PoolProcrustes(self.max_iter, self.tol, self.subsample, self.target_subsample, self.random_state)
            _, _, (i, j) = matcher._align(s, t, pools)
            self.n_pseudo_pairs_, self.n_iter_ = int(i.numel()), matcher.n_iter_
            if i.numel():
                a, b = torch.cat([s, pools[0][i]]), torch.cat([t, pools[1][j]])
                each = self.anchor_share / (1.0 - self.anchor_share) * i.numel() / s.shape[0]
                weights = torch.ones(a.shape[0], dtype=a.dtype, device=a.device)
                weights[: s.shape[0]] = each
        spread = (t if pools is None else torch.cat([t, pools[1]])).std(dim=0)
        spread = torch.where(spread > 0, spread, torch.ones_like(spread))
        scored = torch.zeros(a.shape[0], dtype=torch.bool, device=a.device)
        scored[: s.shape[0]] = True
        trace = float(_weighted_trace(a, weights))
        alphas = ridges * trace / a.shape[1]
        decomposed = ridge_svd(a, b, weights)  # one SVD for the path and the chosen map
        errors = loo_errors_from_svd(decomposed, alphas, scored=scored, column_scale=spread)
        # the larger of equal ones: the stabler fit (a ridge of 0 that leaves a pair all its own weight scores inf)
        finite = np.where(np.isfinite(errors), errors, np.inf)
        best = int(np.flatnonzero(finite == finite.min()).max())
        coef, intercept = ridge_from_svd(decomposed, float(alphas[best]))
        self._finish_affine(coef, intercept, source, exponents)
        self.ridge_ = float(ridges[best])
        self.loo_mse_ = errors.tolist()
        return self

    def _finish_affine(
        self, coef: torch.Tensor, intercept: torch.Tensor, like: ArrayLike, exponents: tuple[int, int]
    ) -> None:
        """The map at the inputs' magnitudes (``_inputs`` divided each side by ``2^exponent``)."""
        try:
            factor = math.ldexp(1.0, exponents[1] - exponents[0])
        except OverflowError:
            factor = math.inf
        coef, intercept = coef * factor, _times_power_of_two(intercept, exponents[1])
        if not (
            sys.float_info.min <= factor < math.inf
            and bool(torch.isfinite(coef).all())
            and bool(torch.isfinite(intercept).all())
        ):
            raise ValueError(
                "source, target: the map between their magnitudes (largest values near "
                f"2^{exponents[0]} and 2^{exponents[1]}) is out of float64's range; rescale one side"
            )
        self._set_map(coef, intercept, like, 2)

    def _check_loaded(self) -> None:
        AffineMap._check_loaded(self)


def _weighted_trace(a: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """Trace of the weighted centred Gram matrix of ``a`` (what ``ridge_loo_errors`` adds the ridge to)."""
    w = torch.ones(a.shape[0], dtype=a.dtype, device=a.device) if weights is None else weights
    centred = a - (w @ a) / w.sum()
    return (w[:, None] * centred**2).sum()
