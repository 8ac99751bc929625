"""Honest p-values for "the best layer match": ``pairwise_test``, a permutation test over every pair of layers (or
models) at once.

Searching a grid of layer pairs for the most similar one and testing that pair alone overstates significance: with
enough pairs one of them always looks special. The correction here (Westfall & Young's single-step max-T) applies
the *same* permutation of samples to every representation of the second set, computes every pair's statistic under
it, and keeps the maximum over pairs: a pair's corrected p-value is the share of permutations whose maximum reaches
the pair's own statistic. The family-wise error over the whole grid is then controlled, and the best pair's
corrected p-value is the p-value of the search itself. With ``correction="mean"`` the statistic is the mean over
pairs instead (one omnibus test: are the two sets related at all?).

Pairs differ in width and so in their null distributions (biased CKA of unrelated data grows with width), so by
default each pair's statistic is standardised by its own null mean and spread before the maximum is taken
(``statistic="standardized"``); ``"raw"`` uses the values as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.params import check_choice, check_positive_int
from latentstitch.distributed import client_scope, map_tasks
from latentstitch.similarity._inference import Result, add_one_p_value, more_alike_sign, quiet
from latentstitch.similarity._null_kernels import batch_size_for
from latentstitch.similarity._pairwise import labelled
from latentstitch.similarity._permutation_test import null_distribution
from latentstitch.similarity._registry import get_measure, prepare_pair
from latentstitch.similarity._resampling import Permutations
from latentstitch.similarity._sample_size import is_trivial

CORRECTIONS = ("max", "mean")
STATISTICS = ("standardized", "raw")


@dataclass(frozen=True)
class PairwiseTest(Result):
    """What ``pairwise_test`` returns.

    ``values[i, j]``: the measure between representation i and representation j of ``against``. ``p_values``: with
    ``correction="max"``, family-wise corrected p-values (max-T over all pairs); with ``"mean"``, the per-pair
    (uncorrected) ones. ``p_values_uncorrected``: each pair's own permutation p-value. ``global_p_value``: the
    p-value of the search (the best pair's corrected p-value) or of the mean over pairs. ``best``: the pair with the
    largest statistic. ``null_mean``, ``null_std``: each pair's null. ``null_statistic``: the max (or mean) over
    pairs for every permutation. ``trivial[i, j]``: the pair's measure is trivial at this sample size.
    """

    measure: str
    values: np.ndarray
    p_values: np.ndarray
    p_values_uncorrected: np.ndarray
    global_p_value: float
    best: tuple[int, int]
    null_mean: np.ndarray
    null_std: np.ndarray
    null_statistic: np.ndarray = field(repr=False)
    labels: list[str] = field(default_factory=list)
    labels_against: list[str] = field(default_factory=list)
    correction: str = "max"
    statistic: str = "standardized"
    trivial: np.ndarray | None = None

    @property
    def permutations(self) -> int:
        return int(self.null_statistic.shape[0])

    def __str__(self) -> str:
        i, j = self.best
        what = "best pair" if self.correction == "max" else "mean over pairs"
        return (
            f"{self.measure}: best pair {self.labels[i]} ~ {self.labels_against[j]} = {self.values[i, j]:.4g}; "
            f"{what}: p = {self.global_p_value:.4g} ({self.correction}-corrected over {self.values.size} pairs, "
            f"{self.permutations} permutations)"
        )


def pair_null(task: tuple) -> tuple[float, np.ndarray, bool]:
    """One pair's observed value, permutation null and triviality (a task: runs on a worker as well)."""
    spec, x, y, options, permutations, seed, groups, group_mode, batch_size = task
    value = quiet(lambda: float(spec(x, y, **options)))
    xt, yt = prepare_pair(x, y, min_rows=spec.min_samples, measure=spec.name)
    size = batch_size or batch_size_for(xt.shape[1], yt.shape[1])
    generator = Permutations(xt.shape[0], seed, groups, group_mode)
    null, _ = null_distribution(spec, xt, yt, options, generator.batches(permutations, size))
    return value, null, is_trivial(spec, xt.shape[0], xt.shape[1], yt.shape[1], options)


def standardized(values: np.ndarray, null: np.ndarray, sign: float) -> tuple[np.ndarray, np.ndarray]:
    """``sign * (v - mean) / std`` of the observed values and of every null draw, pair by pair (a pair with a
    constant null: 0 for its null draws, +-inf or 0 for its value)."""
    mean, std = null.mean(axis=-1), null.std(axis=-1, ddof=1)
    safe = np.where(std > 0, std, 1.0)
    null_z = np.where(std[..., None] > 0, sign * (null - mean[..., None]) / safe[..., None], 0.0)
    difference = sign * (values - mean)
    observed = np.where(std > 0, difference / safe, np.sign(difference) * np.inf)
    return observed, null_z


def pairwise_test(
    representations: Sequence[ArrayLike] | Mapping[str, ArrayLike],
    against: Sequence[ArrayLike] | Mapping[str, ArrayLike],
    measure: str = "linear_cka",
    *,
    permutations: int = 1000,
    seed: int = 0,
    correction: str = "max",
    statistic: str = "standardized",
    groups: ArrayLike | None = None,
    group_mode: str = "within",
    batch_size: int | None = None,
    client: Any = None,
    workers: int | None = None,
    progress: bool = True,
    **options: Any,
) -> PairwiseTest:
    """A permutation test of every pair ``measure(representations[i], against[j])``, corrected for the search over
    pairs: is the best layer match (or are the two sets at all) more alike than with no pairing of samples?

    Every permutation reorders the samples of *all* of ``against`` at once (the layers of one model keep their
    relation to each other; only the pairing with ``representations`` is broken) and every pair is recomputed.

    Parameters
    ----------
    representations, against : sequences of (n, ...) arrays/tensors of the same n samples, or mappings from labels
        to them (e.g. the layers of two models; the labels name the pairs in the result and its heatmap).
    measure : a registered measure name.
    permutations : number of random permutations (the smallest possible p-value is ``1 / (permutations + 1)``).
    correction : ``"max"`` (default): family-wise corrected p-values (max-T: a pair's p-value is the share of
        permutations whose best pair does as well), so "the best layer match" gets an honest p-value; ``"mean"``:
        one test of the mean over pairs (are the two sets related at all?).
    statistic : ``"standardized"`` (default): each pair's value relative to its own null (z-score) before the max
        or mean, so that wide layers, whose null values are higher, do not dominate; ``"raw"``: the values.
    seed, groups, group_mode, batch_size : the permutations, as in ``permutation_test``.
    client, workers : run each pair's null as a task on a ``dask.distributed`` cluster (``client``: a ``Client``
        or a scheduler address; ``workers``: the processes of a ``LocalCluster`` started and closed here); the
        permutations are re-drawn from the seed on the worker. Needs ``pip install 'latentstitch[dask]'``.
    progress : show a progress bar of the finished pairs when running on a cluster.
    **options : keyword arguments for the measure.

    Returns
    -------
    PairwiseTest (``values``, ``p_values``, ``global_p_value``, ``best``...; ``heatmap(test, path)`` draws it).
    """
    spec = get_measure(measure)
    labels, reps = labelled(representations, "representations")
    labels_against, against = labelled(against, "against")
    permutations = check_positive_int(permutations, "permutations")
    check_choice(correction, "correction", CORRECTIONS)
    check_choice(statistic, "statistic", STATISTICS)
    m, k = len(reps), len(against)
    pairs = [(i, j) for i in range(m) for j in range(k)]
    tasks = [(spec, reps[i], against[j], options, permutations, seed, groups, group_mode, batch_size) for i, j in pairs]
    if client is None and workers is None:
        outcomes = [pair_null(task) for task in tasks]
    else:
        with client_scope(client, workers) as active:
            outcomes = map_tasks(pair_null, tasks, client=active, progress=bool(progress), description="pairwise nulls")
    values = np.array([o[0] for o in outcomes]).reshape(m, k)
    null = np.stack([o[1] for o in outcomes]).reshape(m, k, permutations)
    trivial = np.array([o[2] for o in outcomes]).reshape(m, k)
    sign = more_alike_sign(spec)
    uncorrected = np.array([add_one_p_value(values[i, j], null[i, j], sign) for i, j in pairs]).reshape(m, k)
    if statistic == "standardized":
        observed, draws = standardized(values, null, sign)
    else:
        observed, draws = sign * values, sign * null
    flat = draws.reshape(m * k, permutations)
    best = np.unravel_index(int(np.argmax(observed)), observed.shape)
    tolerance = 1e-9 * np.maximum(1.0, np.abs(np.where(np.isfinite(observed), observed, 0.0)))
    if correction == "max":
        null_statistic = flat.max(axis=0)
        p_values = (1 + (null_statistic[None, None, :] >= (observed - tolerance)[..., None]).sum(axis=-1)) / (
            1 + permutations
        )
        global_p = float(p_values[best])
    else:
        null_statistic = flat.mean(axis=0)
        observed_mean = float(np.mean(observed))
        extreme = np.count_nonzero(null_statistic >= observed_mean - 1e-9 * max(1.0, abs(observed_mean)))
        p_values, global_p = uncorrected, (1 + extreme) / (1 + permutations)
    return PairwiseTest(
        measure=spec.name,
        values=values,
        p_values=p_values,
        p_values_uncorrected=uncorrected,
        global_p_value=float(global_p),
        best=(int(best[0]), int(best[1])),
        null_mean=null.mean(axis=-1),
        null_std=null.std(axis=-1, ddof=1),
        null_statistic=null_statistic,
        labels=labels,
        labels_against=labels_against,
        correction=correction,
        statistic=statistic,
        trivial=trivial,
    )
