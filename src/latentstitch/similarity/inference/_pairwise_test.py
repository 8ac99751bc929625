"""Honest p-values for "the best layer match": ``pairwise_test``, a permutation test over every pair of layers (or
models) at once.

Searching a grid of layer pairs for the most similar one and testing that pair alone overstates significance: with
enough pairs one of them always looks special. The correction here (Westfall & Young's single-step max-T) applies
the *same* permutation of samples to every representation of the second set, computes every pair's statistic under
it, and keeps the maximum over pairs: a pair's corrected p-value is the share of permutations whose maximum reaches
the pair's own statistic. The family-wise error over the whole grid is then controlled, and the best pair's
corrected p-value is the p-value of the search itself. With ``correction="mean"`` the statistic is the mean over
pairs instead (one omnibus test: are the two sets related at all?).

Max-T needs the *joint* null of all pairs under one permutation, which only drawn permutations give: the closed-form
moments (``permutation_test(method="moments")``) describe each pair's null alone. So for the measures with a closed
form (linear, debiased, RBF CKA) the default (``correction="auto"``) is Holm's step-down correction of each pair's
closed-form p-value: it controls the family-wise error under any dependence between pairs and needs no draw, at the
price of being conservative when the pairs are strongly correlated (neighbouring layers), where max-T adapts to the
correlation. ``correction="max"`` keeps max-T with drawn permutations for every measure.

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
from latentstitch._core.params import check_choice, check_positive_int, check_seed
from latentstitch.distributed import client_scope, map_tasks
from latentstitch.similarity._pairwise import labelled
from latentstitch.similarity.inference._closed_form import has_closed_form
from latentstitch.similarity.inference._common import Result, add_one_p_value, more_alike_sign, quiet, tie_tolerance
from latentstitch.similarity.inference._null_kernels import batch_size_for
from latentstitch.similarity.inference._permutation_test import METHODS, null_distribution, permutation_test
from latentstitch.similarity.inference._resampling import Permutations
from latentstitch.similarity.measures._registry import get_measure, prepare_pair
from latentstitch.similarity.measures._sample_size import is_trivial

CORRECTIONS = ("auto", "max", "mean", "holm", "bonferroni")
PER_PAIR = ("holm", "bonferroni")
STATISTICS = ("standardized", "raw")


@dataclass(frozen=True)
class PairwiseTest(Result):
    """What ``pairwise_test`` returns.

    ``values[i, j]``: the measure between representation i and representation j of ``against``. ``p_values``: with
    ``correction="max"``, family-wise corrected p-values (max-T over all pairs); ``"holm"``/``"bonferroni"``, each
    pair's own p-value so corrected (``null_statistic`` is then empty); with ``"mean"``, the per-pair (uncorrected)
    ones. ``p_values_uncorrected``: each pair's own permutation p-value. ``global_p_value``: the
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

    method: str = "batched"

    @property
    def permutations(self) -> int:
        """Permutations drawn for the max or mean (0 for the per-pair corrections)."""
        return int(self.null_statistic.shape[0])

    def __str__(self) -> str:
        i, j = self.best
        what = "mean over pairs" if self.correction == "mean" else "best pair"
        return (
            f"{self.measure}: best pair {self.labels[i]} ~ {self.labels_against[j]} = {self.values[i, j]:.4g}; "
            f"{what}: p = {self.global_p_value:.4g} ({self.correction}-corrected over {self.values.size} pairs, "
            f"{'closed-form moments' if self.method == 'moments' else f'{self.permutations} permutations'})"
        )


def pair_null(task: tuple) -> tuple[float, np.ndarray, bool]:
    """One pair's observed value, permutation null and triviality (a task: runs on a worker as well)."""
    spec, x, y, options, permutations, seed, groups, group_mode, batch_size, method = task
    value = quiet(lambda: float(spec(x, y, **options)))
    xt, yt = prepare_pair(x, y, min_rows=spec.min_samples, measure=spec.name)
    size = batch_size or batch_size_for(xt.shape[1], yt.shape[1])
    generator = Permutations(xt.shape[0], seed, groups, group_mode)
    batched = None if method == "auto" else method == "batched"
    null, _ = null_distribution(spec, xt, yt, options, generator.batches(permutations, size), batched=batched)
    return value, null, is_trivial(spec, xt.shape[0], xt.shape[1], yt.shape[1], options)


def pair_test(task: tuple) -> tuple[float, float, float, float, bool, str]:
    """One pair's own permutation test (closed form where it exists): value, p-value, null mean and std, triviality,
    the method used (a task: runs on a worker as well)."""
    spec, x, y, options, permutations, seed, groups, group_mode, batch_size, method = task
    test = quiet(
        lambda: permutation_test(
            x,
            y,
            spec.name,
            permutations=permutations,
            seed=seed,
            groups=groups,
            group_mode=group_mode,
            batch_size=batch_size,
            method=method,
            **options,
        )
    )
    return test.value, test.p_value, test.null_mean, test.null_std, test.trivial, test.method


def step_down(p_values: np.ndarray, correction: str) -> np.ndarray:
    """Holm's step-down (or Bonferroni's single-step) family-wise correction of a set of p-values."""
    flat = p_values.ravel()
    m = flat.shape[0]
    if correction == "bonferroni":
        return np.minimum(1.0, flat * m).reshape(p_values.shape)
    order = np.argsort(flat, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(flat[order] * (m - np.arange(m))))
    out = np.empty_like(flat)
    out[order] = adjusted
    return out.reshape(p_values.shape)


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
    correction: str = "auto",
    statistic: str = "standardized",
    method: str = "auto",
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
    correction : ``"auto"`` (default): ``"holm"`` for the measures with a closed-form null (linear, debiased, RBF CKA,
        no ``groups``, ``method`` "auto" or "moments"), else ``"max"``. ``"max"``: family-wise corrected p-values
        (max-T: a pair's p-value is the share of permutations whose best pair does as well, drawn permutations), so
        "the best layer match" gets an honest p-value; ``"holm"`` / ``"bonferroni"``: each pair's own p-value
        (``permutation_test(method=method)``: closed form where it exists) corrected by Holm's step-down or
        Bonferroni's rule, valid under any dependence between pairs, conservative when pairs are strongly
        correlated; ``"mean"``: one test of the mean over pairs (are the two sets related at all?).
    statistic : ``"standardized"`` (default): each pair's value relative to its own null (z-score) before the max
        or mean, so that wide layers, whose null values are higher, do not dominate; ``"raw"``: the values.
    method : how each pair's null is obtained, as in ``permutation_test`` (``"auto"``, ``"moments"``, ``"batched"``,
        ``"loop"``); ``"max"`` and ``"mean"`` need drawn permutations (not ``"moments"``).
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
    seed = check_seed(seed)
    check_choice(correction, "correction", CORRECTIONS)
    check_choice(statistic, "statistic", STATISTICS)
    check_choice(method, "method", METHODS)
    if correction == "auto":
        closed = groups is None and method in ("auto", "moments") and has_closed_form(spec, options)
        correction = "holm" if closed else "max"
    if correction in ("max", "mean") and method == "moments":
        raise ValueError(
            f"method: correction={correction!r} needs the joint null of all pairs, which only drawn permutations give; "
            "use correction='holm' with method='moments', or method='batched'"
        )
    m, k = len(reps), len(against)
    pairs = [(i, j) for i in range(m) for j in range(k)]
    tasks = [
        (spec, reps[i], against[j], options, permutations, seed, groups, group_mode, batch_size, method)
        for i, j in pairs
    ]
    run = pair_test if correction in PER_PAIR else pair_null
    if client is None and workers is None:
        outcomes = [run(task) for task in tasks]
    else:
        with client_scope(client, workers) as active:
            outcomes = map_tasks(run, tasks, client=active, progress=bool(progress), description="pairwise nulls")
    if correction in PER_PAIR:
        return _per_pair_result(spec, outcomes, (m, k), correction, statistic, labels, labels_against)
    values = np.array([o[0] for o in outcomes]).reshape(m, k)
    null = np.stack([o[1] for o in outcomes]).reshape(m, k, permutations)
    trivial = np.array([o[2] for o in outcomes]).reshape(m, k)
    sign = more_alike_sign(spec)
    uncorrected = np.array(
        [
            add_one_p_value(values[i, j], null[i, j], sign, tie_tolerance(values[i, j], _dtype(reps[i])))
            for i, j in pairs
        ]
    ).reshape(m, k)
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
        method="loop" if method == "loop" else "batched",
    )


def _dtype(representation: Any) -> Any:
    return getattr(representation, "dtype", None)


def _per_pair_result(spec, outcomes, shape, correction, statistic, labels, labels_against) -> PairwiseTest:
    values, uncorrected, mean, std = (np.array([o[field] for o in outcomes]).reshape(shape) for field in range(4))
    trivial = np.array([o[4] for o in outcomes]).reshape(shape)
    methods = {o[5] for o in outcomes}
    corrected = step_down(uncorrected, correction)
    sign = more_alike_sign(spec)
    z = np.where(std > 0, sign * (values - mean) / np.where(std > 0, std, 1.0), 0.0)
    best = np.unravel_index(int(np.lexsort((-z.ravel(), corrected.ravel()))[0]), shape)
    return PairwiseTest(
        measure=spec.name,
        values=values,
        p_values=corrected,
        p_values_uncorrected=uncorrected,
        global_p_value=float(corrected.min()),
        best=(int(best[0]), int(best[1])),
        null_mean=mean,
        null_std=std,
        null_statistic=np.empty(0),
        labels=labels,
        labels_against=labels_against,
        correction=correction,
        statistic=statistic,
        trivial=trivial,
        method="moments" if methods <= {"moments", "exact"} else "/".join(sorted(methods)),
    )
