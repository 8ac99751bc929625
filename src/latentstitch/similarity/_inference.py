"""Is this similarity real? Permutation tests and bootstrap confidence intervals for every registered measure.

- ``permutation_test``: the null distribution of a measure when the pairing of samples is broken (y's rows
  permuted, x's kept), its add-one p-value, mean, spread, and the value calibrated against it. Unrelated
  representations of finite width and sample size do not score 0: linear CKA of independent Gaussian data is about
  ``p q / n^2``-ish, k-NN measures about ``k / n``; the null says what "nothing" scores here.
- ``bootstrap_ci``: how much the value would move with another sample of the same population (rows drawn with
  replacement, or whole groups), as a percentile, basic or BCa interval.

Both evaluate the measure many times. Where the measure's structure allows (``_null_kernels``), a batch of
permutations costs one GEMM or one relabelling instead of a full evaluation; otherwise the measure itself is looped.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike, take_rows
from latentstitch._core.callsite import warn_at_caller
from latentstitch._core.params import check_choice, check_positive_int
from latentstitch._core.progress import progress_bar
from latentstitch.similarity._null_kernels import batch_size_for, finite_ideal, null_kernel
from latentstitch.similarity._registry import MeasureSpec, get_measure, prepare_pair
from latentstitch.similarity._resampling import (
    Permutations,
    bootstrap_indices,
    group_members,
    jackknife_blocks,
    row_weights,
    weighted_indices,
)
from latentstitch.similarity._sample_size import SmallSampleWarning, is_trivial, trivial_message

INTERVALS = ("percentile", "basic", "bca")
SCHEMES = ("auto", "multinomial", "poisson", "half")


# --- results -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PermutationTest:
    """What ``permutation_test`` returns.

    ``value``: the measure on the data. ``null``: its values with y's rows permuted (one per permutation).
    ``p_value``: ``(1 + #{null as extreme as value}) / (1 + permutations)`` (add-one: never 0, exact level under
    the null), one-sided towards "more alike" (larger similarity, smaller distance). ``null_mean``, ``null_std``:
    the null's mean and standard deviation. ``z_score``: ``(value - null_mean) / null_std``, signed so that positive
    means more alike than chance. ``calibrated``: the value rescaled so that the null mean maps to 0 and identical
    representations to 1 (``(value - null_mean) / (ideal - null_mean)``, like the adjusted Rand index; nan for
    measures without a finite "identical" end, e.g. ENSD). ``trivial``: the measure reaches "identical" on any
    data at this sample size (``is_trivial``): then neither the value nor the test says anything. ``batched``:
    whether the null came from a batched kernel or from a loop over the measure.
    """

    measure: str
    value: float
    p_value: float
    null_mean: float
    null_std: float
    z_score: float
    calibrated: float
    null: np.ndarray = field(repr=False)
    kind: str
    samples: int
    trivial: bool
    batched: bool

    @property
    def permutations(self) -> int:
        return int(self.null.shape[0])

    def __str__(self) -> str:
        flag = " [trivial at this sample size]" if self.trivial else ""
        return (
            f"{self.measure} = {self.value:.4g} (null {self.null_mean:.4g} ± {self.null_std:.4g}, "
            f"z = {self.z_score:.3g}, calibrated {self.calibrated:.3g}), p = {self.p_value:.4g} "
            f"({self.permutations} permutations, n = {self.samples}){flag}"
        )


@dataclass(frozen=True)
class BootstrapCI:
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


# --- shared pieces -----------------------------------------------------------------------------------------------


def more_alike_sign(spec: MeasureSpec) -> float:
    """+1 for similarities, -1 for distances: multiplied in, larger always means more alike."""
    return 1.0 if spec.kind == "similarity" else -1.0


def add_one_p_value(value: float, null: np.ndarray, sign: float) -> float:
    """``(1 + #{sign * null >= sign * value}) / (1 + len(null))``, ties (to rounding) counted as extreme."""
    tolerance = 1e-9 * max(1.0, abs(value))
    extreme = np.count_nonzero(sign * null >= sign * value - tolerance)
    return (1 + extreme) / (1 + null.shape[0])


def summarize_null(spec: MeasureSpec, value: float, null: np.ndarray) -> tuple[float, float, float, float]:
    """``(null_mean, null_std, z_score, calibrated)``."""
    mean, std = float(null.mean()), float(null.std(ddof=1)) if null.shape[0] > 1 else 0.0
    sign = more_alike_sign(spec)
    difference = sign * (value - mean)
    z = difference / std if std > 0 else (0.0 if difference == 0 else math.copysign(math.inf, difference))
    ideal = finite_ideal(spec)
    span = sign * (ideal - mean)
    calibrated = difference / span if span > 0 else math.nan
    return mean, std, z, calibrated


def split_options(spec: MeasureSpec, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(options that follow x's rows, the others)."""
    rows = {k: v for k, v in options.items() if k in spec.row_options}
    return rows, {k: v for k, v in options.items() if k not in rows}


def quiet(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` with warnings silenced: resampled evaluations repeat what the observed one already warned."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def observed(spec: MeasureSpec, x: Any, y: Any, options: dict[str, Any]) -> float:
    """The measure on the data as the user would get it, without its own small-sample warning (the caller flags the
    result and warns once, at the user's line)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        return float(spec(x, y, **options))


def flag_trivial(spec: MeasureSpec, n: int, p: int, q: int, options: dict[str, Any]) -> bool:
    trivial = is_trivial(spec, n, p, q, options)
    if trivial:
        warn_at_caller(trivial_message([spec.name], n, p, q), SmallSampleWarning)
    return trivial


# --- permutation test --------------------------------------------------------------------------------------------


def null_distribution(
    spec: MeasureSpec,
    xt: torch.Tensor,
    yt: torch.Tensor,
    options: dict[str, Any],
    batches: Iterable[torch.Tensor],
    *,
    batched: bool | None = None,
    progress: Any = None,
    total: int | None = None,
) -> tuple[np.ndarray, bool]:
    """The measure with y's rows permuted by every permutation of ``batches``: ``(values, batched)``. Row options
    (``spec.row_options``) stay with x. ``batched``: None uses the batched kernel when the measure has one, True
    requires it, False loops over the measure."""
    kernel = None if batched is False else null_kernel(spec, xt, yt, options)
    if batched and kernel is None:
        raise ValueError(f"batched: the measure {spec.name!r} has no batched permutation null; use batched=None")
    values = []
    with progress_bar(progress) as bar:
        task = bar.add_task(f"{spec.name} permutations", total=total) if bar is not None else None
        for perms in batches:
            perms = perms.to(xt.device)
            if kernel is not None:
                with torch.no_grad():
                    values.append(kernel(perms).detach().to(torch.float64).cpu().numpy())
            else:
                with torch.no_grad():
                    values.append(np.array([quiet(lambda p=p: float(spec(xt, yt[p], **options))) for p in perms]))
            if bar is not None:
                bar.advance(task, perms.shape[0])
    return np.concatenate(values) if values else np.empty(0), kernel is not None


def permutation_test(
    x: ArrayLike,
    y: ArrayLike,
    measure: str = "linear_cka",
    *,
    permutations: int = 1000,
    seed: int = 0,
    groups: ArrayLike | None = None,
    group_mode: str = "within",
    batch_size: int | None = None,
    batched: bool | None = None,
    progress: Any = False,
    **options: Any,
) -> PermutationTest:
    """Permutation test of a similarity measure: is x more alike y than representations with no sample-to-sample
    correspondence?

    The null permutes y's rows (x and any row option such as a confounder keep theirs), which keeps each
    representation's own geometry (width, spectrum, clusters) and breaks only their pairing.

    Parameters
    ----------
    x, y : (n, p), (n, q) arrays or tensors of the same samples (any device: the null is computed there).
    measure : a registered measure name (``MEASURES``).
    permutations : number of random permutations (the smallest possible p-value is ``1 / (permutations + 1)``).
    seed : seeds the permutations (drawn on the CPU: the same on every device and for every measure).
    groups : optional (n,) labels for structured data (classes, images with several crops, subjects...).
    group_mode : with ``groups``: ``"within"`` permutes rows only within their group (the null keeps the group
        structure, so the test asks whether x and y agree beyond it, e.g. beyond class membership); ``"whole"``
        exchanges whole groups of equal size, keeping rows of a group together and in order (for dependent rows).
    batch_size : permutations per batch (default: from the widths, bounded memory).
    batched : None (default): a batched kernel when the measure has one (linear/debiased/RBF CKA, R^2, CCA, SVCCA,
        Procrustes, ENSD, GULP, eigenspace overlap, correlation match, permutation metric, RSA, distance
        correlation, mutual/cycle k-NN, CKNNA, k-NN Jaccard), else a loop over the measure; True requires the
        kernel; False always loops (the reference the kernels are tested against).
    progress : show a progress bar (True), use a rich ``Progress`` of the caller, or nothing (False).
    **options : keyword arguments of the measure (``k=5``, ``debiased=True``, ``confounder=inputs``...).

    Returns
    -------
    PermutationTest (``value``, ``p_value``, ``null_mean``, ``null_std``, ``z_score``, ``calibrated``, ``null``...).

    Notes
    -----
    The p-value is exact under exchangeability of y's rows (or of the groups). When the measure is trivial at this
    sample size (N <= d + 1 for the fitted measures) the result is flagged and a ``SmallSampleWarning`` is given.
    """
    spec = get_measure(measure)
    permutations = check_positive_int(permutations, "permutations")
    value = observed(spec, x, y, options)
    xt, yt = prepare_pair(x, y, min_rows=spec.min_samples, measure=spec.name)
    n = xt.shape[0]
    trivial = flag_trivial(spec, n, xt.shape[1], yt.shape[1], options)
    generator = Permutations(n, seed, groups, group_mode)
    size = batch_size_for(xt.shape[1], yt.shape[1]) if batch_size is None else batch_size
    size = check_positive_int(size, "batch_size")
    null, used_kernel = null_distribution(
        spec,
        xt,
        yt,
        options,
        generator.batches(permutations, size),
        batched=batched,
        progress=progress,
        total=permutations,
    )
    mean, std, z, calibrated = summarize_null(spec, value, null)
    return PermutationTest(
        measure=spec.name,
        value=value,
        p_value=add_one_p_value(value, null, more_alike_sign(spec)),
        null_mean=mean,
        null_std=std,
        z_score=z,
        calibrated=calibrated,
        null=null,
        kind=spec.kind,
        samples=n,
        trivial=trivial,
        batched=used_kernel,
    )


# --- bootstrap ---------------------------------------------------------------------------------------------------


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
    rows = {k: take_rows(v, index) for k, v in row_options.items()}
    index = torch.as_tensor(index, device=xt.device)
    return quiet(lambda: float(spec(xt[index], yt[index], **rows, **options)))


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
    seed : seeds the draws.
    interval : ``"percentile"`` (default), ``"basic"`` (reflected around the value, clipped to the range) or
        ``"bca"`` (bias-corrected and accelerated, Efron 1987; the acceleration from a delete-a-block jackknife over
        ``jackknife`` random blocks of rows or groups: ``jackknife`` more evaluations).
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
    if not 0 < level < 1:
        raise ValueError(f"level: expected a confidence level in (0, 1), got {level}")
    check_choice(interval, "interval", INTERVALS)
    scheme = choose_scheme(spec, options, check_choice(scheme, "scheme", SCHEMES))
    value = observed(spec, x, y, options)
    xt, yt = prepare_pair(x, y, min_rows=spec.min_samples, measure=spec.name)
    n = xt.shape[0]
    trivial = flag_trivial(spec, n, xt.shape[1], yt.shape[1], options)
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
    replicates = np.asarray(replicates)
    acceleration = 0.0
    if interval == "bca":
        kept = jackknife_blocks(n, jackknife, seed, groups)
        acceleration = jackknife_acceleration(np.array([_subset(spec, xt, yt, row_options, other, k) for k in kept]))
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
