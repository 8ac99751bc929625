"""How much would the similarity move with another sample? Bootstrap confidence intervals over samples (rows drawn
with replacement, half-samples, or whole groups), as a percentile, basic or BCa interval, for every measure that can
be resampled.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike, take_rows
from latentstitch._core.callsite import warn_at_caller
from latentstitch._core.params import check_choice, check_positive_int, check_probability, check_seed
from latentstitch._core.progress import progress_bar
from latentstitch.similarity.inference._common import Result, observed, quiet, split_options
from latentstitch.similarity.inference._resampling import (
    bootstrap_indices,
    group_members,
    jackknife_blocks,
    row_weights,
    weighted_indices,
)
from latentstitch.similarity.measures._registry import MeasureSpec, ZeroVarianceError, get_measure, prepare_pair
from latentstitch.similarity.measures._sample_size import SmallSampleWarning, warn_if_trivial

INTERVALS = ("percentile", "basic", "bca")
SCHEMES = ("auto", "multinomial", "poisson", "half")


@dataclass(frozen=True)
class BootstrapCI(Result):
    """What ``bootstrap_ci`` (and ``StreamingBootstrap.compute``) returns.

    ``value``: the measure on the data; ``low``, ``high``: the ``level`` confidence interval (``interval``:
    percentile, basic or BCa); ``replicates``: the measure on every bootstrap sample; ``std_error``: their standard
    deviation; ``bias``: their mean minus ``value``. ``trivial``: see ``PermutationTest``.
    """

    measure: str
    value: float
    low: float
    high: float
    level: float
    interval: str
    replicates: np.ndarray = field(repr=False)
    std_error: float
    bias: float
    samples: int
    trivial: bool
    scheme: str

    def __str__(self) -> str:
        flag = " [trivial at this sample size]" if self.trivial else ""
        return (
            f"{self.measure} = {self.value:.4g}, {100 * self.level:g}% CI [{self.low:.4g}, {self.high:.4g}] "
            f"({self.interval}, {len(self.replicates)} {self.scheme} bootstrap samples, n = {self.samples}){flag}"
        )


def resampling_of(spec: MeasureSpec, options: dict[str, Any]) -> str:
    """The measure's ``resampling``, for these options (``debiased=True`` makes CKA leave out self-pairs)."""
    if spec.resampling == "with_replacement" and options.get("debiased"):
        return "without_replacement"
    return spec.resampling


def choose_scheme(spec: MeasureSpec, options: dict[str, Any], scheme: str) -> str:
    """The bootstrap scheme to use: ``scheme``, or for ``"auto"`` the multinomial bootstrap, or half-samples for
    estimators that leave out self-pairs; refused for neighbourhood measures."""
    resampling = resampling_of(spec, options)
    if resampling == "none":
        raise ValueError(
            f"measure: {spec.name} cannot be bootstrapped over samples: its value depends on n and on who is whose "
            "neighbour, so neither a row drawn twice (its own nearest neighbour) nor a half-sample (sparser "
            "neighbourhoods) estimates its spread. Use permutation_test for its significance."
        )
    if scheme == "auto":
        return "half" if resampling == "without_replacement" else "multinomial"
    if scheme in ("multinomial", "poisson") and resampling == "without_replacement":
        raise ValueError(
            f"scheme: {spec.name}{' (debiased)' if spec.name != 'debiased_cka' else ''} leaves out pairs of a "
            f"sample with itself, so a row drawn twice would bias it (two 'different' samples that agree "
            f"perfectly); use scheme='half' (or 'auto')"
        )
    return scheme


def confidence_interval(
    value: float,
    replicates: np.ndarray,
    level: float,
    interval: str,
    *,
    acceleration: float = 0.0,
    value_range: tuple[float, float] = (-math.inf, math.inf),
) -> tuple[float, float]:
    """``(low, high)`` of a bootstrap interval.

    percentile: the ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of the replicates. basic: ``2 value - q_high``,
    ``2 value - q_low`` (clipped to the measure's range). bca: percentile at quantiles corrected for the median bias
    ``z0 = Phi^-1(#{replicates < value} / B)`` (ties half) and the ``acceleration`` (Efron 1987).
    """
    from scipy.stats import norm

    alpha = (1 - level) / 2
    if interval == "bca":
        below = (np.count_nonzero(replicates < value) + 0.5 * np.count_nonzero(replicates == value)) / len(replicates)
        z0 = norm.ppf(min(max(below, 1e-12), 1 - 1e-12))
        quantiles = []
        for z in (norm.ppf(alpha), norm.ppf(1 - alpha)):
            quantiles.append(float(norm.cdf(z0 + (z0 + z) / (1 - acceleration * (z0 + z)))))
        low, high = np.quantile(replicates, quantiles)
        return float(low), float(high)
    low, high = (float(v) for v in np.quantile(replicates, [alpha, 1 - alpha]))
    if interval == "basic":
        low, high = 2 * value - high, 2 * value - low
        low, high = max(low, value_range[0]), min(high, value_range[1])
    return low, high


def jackknife_acceleration(values: np.ndarray) -> float:
    """Efron's acceleration from (block) jackknife values: ``sum d^3 / (6 (sum d^2)^1.5)``, ``d = mean - value``."""
    d = values.mean() - values
    denominator = 6 * (d @ d) ** 1.5
    return float((d**3).sum() / denominator) if denominator > 0 else 0.0


def _subset(spec: MeasureSpec, xt, yt, row_options, options, index) -> float:
    """The measure on the rows ``index``; NaN where they make a side constant (a resample that drew one row, or
    only copies of one: the measure is undefined there, ``ZeroVarianceError``)."""
    rows = {k: take_rows(v, index) for k, v in row_options.items()}
    index = torch.as_tensor(index, device=xt.device)
    try:
        return quiet(lambda: float(spec(xt[index], yt[index], **rows, **options)))
    except ZeroVarianceError:
        return math.nan


def _defined(replicates: np.ndarray, name: str) -> np.ndarray:
    """The replicates on which the measure is defined; the others (a constant side) are left out, with a warning
    saying how many, and too few left is an error."""
    kept = replicates[np.isfinite(replicates)]
    dropped = replicates.size - kept.size
    if kept.size < 2:
        raise ValueError(
            f"x, y: {dropped} of {replicates.size} {name} resamples have a constant side (every row drawn equal), on "
            "which the measure is undefined; use more (distinct) samples"
        )
    if dropped:
        warn_at_caller(
            f"x, y: {dropped} of {replicates.size} {name} resamples drew rows that are all equal on one side (the "
            "measure is undefined there) and were left out; the interval uses the others. Few distinct samples "
            "make the bootstrap unreliable.",
            SmallSampleWarning,
        )
    return kept


def bootstrap_ci(
    x: ArrayLike,
    y: ArrayLike,
    measure: str = "linear_cka",
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    interval: str = "percentile",
    groups: ArrayLike | None = None,
    scheme: str = "auto",
    jackknife: int = 50,
    progress: Any = False,
    **options: Any,
) -> BootstrapCI:
    """Bootstrap confidence interval of a similarity measure over samples.

    Each replicate recomputes the measure on a resample of the pairs of rows of x and y (with any row option, such
    as a confounder), or, with ``groups``, of whole groups (the cluster bootstrap, for dependent rows).

    Parameters
    ----------
    x, y : (n, p), (n, q) arrays or tensors of the same samples.
    measure : a registered measure name. Neighbourhood measures (``MEASURES[name].resampling == "none"``) are
        refused: their value depends on n and on who is whose neighbour.
    n_boot : bootstrap replicates.
    level : confidence level in (0, 1).
    seed : seeds the draws (an integer in [0, 2**32 - 1]).
    interval : ``"percentile"`` (default), ``"basic"`` (reflected around the value, clipped to the range) or
        ``"bca"`` (bias-corrected and accelerated, Efron 1987; the acceleration from a delete-a-block jackknife over
        ``jackknife`` random blocks of rows or groups, at least 2: ``jackknife`` more evaluations).
    scheme : ``"auto"`` (default): ``"multinomial"``, except ``"half"`` for estimators that leave out pairs of a
        sample with itself (``MEASURES[name].resampling == "without_replacement"``: debiased and minibatch CKA).
        ``"multinomial"``: n rows (or groups) drawn with replacement, the classic bootstrap. ``"poisson"``: every row
        weighted by an independent Poisson(1) count. ``"half"``: every row (or group) kept with probability 1/2,
        without replacement (half-sampling: for smooth estimators its spread matches the full sample's, and no row
        appears twice). The poisson and half weights are ``row_weights(seed, 0, n, n_boot, scheme)``, those of
        ``StreamingBootstrap``, so the two agree exactly.
    progress : show a progress bar (True), use the caller's rich ``Progress``, or nothing.
    **options : keyword arguments of the measure.

    Returns
    -------
    BootstrapCI (``value``, ``low``, ``high``, ``replicates``, ``std_error``, ``bias``...).

    Notes
    -----
    Percentile intervals inherit the estimator's bias: biased linear CKA overestimates its population value at small
    n, and its replicates more so; ``interval="basic"`` or ``"bca"`` correct for it, or use ``debiased_cka``.
    """
    spec = get_measure(measure)
    n_boot = check_positive_int(n_boot, "n_boot", minimum=2)
    level = check_probability(level, "level", low_open=True, high_open=True)
    seed = check_seed(seed)
    check_choice(interval, "interval", INTERVALS)
    jackknife = check_positive_int(jackknife, "jackknife", minimum=2)
    scheme = choose_scheme(spec, options, check_choice(scheme, "scheme", SCHEMES))
    value = observed(spec, x, y, options)
    xt, yt = prepare_pair(x, y, min_rows=spec.min_samples, measure=spec.name)
    n = xt.shape[0]
    trivial = warn_if_trivial(spec, n, xt.shape[1], yt.shape[1], options)
    row_options, other = split_options(spec, options)
    if scheme == "multinomial":
        draws: Iterable[np.ndarray] = bootstrap_indices(n, n_boot, seed, groups)
    else:
        members = None if groups is None else group_members(groups, n)
        units = n if members is None else len(members)
        draws = weighted_indices(row_weights(seed, 0, units, n_boot, scheme), members)
    replicates = []
    with progress_bar(progress) as bar:
        task = bar.add_task(f"{spec.name} bootstrap", total=n_boot) if bar is not None else None
        for index in draws:
            if len(index) < spec.min_samples:
                raise ValueError(
                    f"n_boot: a {scheme} bootstrap sample kept {len(index)} rows, fewer than {spec.name} needs "
                    f"({spec.min_samples}); use more samples"
                )
            replicates.append(_subset(spec, xt, yt, row_options, other, index))
            if bar is not None:
                bar.advance(task)
    replicates = _defined(np.asarray(replicates), "bootstrap")
    acceleration = 0.0
    if interval == "bca":
        kept = jackknife_blocks(n, jackknife, seed, groups)
        values = np.array([_subset(spec, xt, yt, row_options, other, k) for k in kept])
        acceleration = jackknife_acceleration(_defined(values, "jackknife"))
    low, high = confidence_interval(
        value, replicates, level, interval, acceleration=acceleration, value_range=spec.value_range
    )
    return BootstrapCI(
        measure=spec.name,
        value=value,
        low=low,
        high=high,
        level=level,
        interval=interval,
        replicates=replicates,
        std_error=float(replicates.std(ddof=1)),
        bias=float(replicates.mean() - value),
        samples=n,
        trivial=trivial,
        scheme=scheme,
    )
