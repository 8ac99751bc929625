"""Is this similarity more than chance? The permutation test of every registered measure.

``permutation_test``: the null distribution of a measure when the pairing of samples is broken (y's rows permuted,
x's kept), its add-one p-value, mean, spread, and the value calibrated against it. Unrelated representations of
finite width and sample size do not score 0: linear CKA of independent Gaussian data is about ``p q / n^2``-ish, k-NN
measures about ``k / n``; the null says what "nothing" scores here.

Three ways to the null (``method``): closed form (``"moments"``, ``_closed_form``: the exact permutation mean,
variance and third moment of the kernel-alignment measures and a Pearson type III tail, no permutation drawn; with
n <= 7 every one of the n! permutations is enumerated instead, an exact p-value), drawn permutations in batches
(``"batched"``, ``_null_kernels``: a batch costs one GEMM or one relabelling instead of a full evaluation), or a loop
over the measure (``"loop"``, the reference).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.callsite import warn_at_caller
from latentstitch._core.device import check_finite
from latentstitch._core.params import check_choice, check_positive_int, check_seed
from latentstitch._core.progress import progress_bar
from latentstitch.similarity.inference._closed_form import closed_form_test, has_closed_form
from latentstitch.similarity.inference._common import (
    Result,
    add_one_p_value,
    more_alike_sign,
    observed,
    quiet,
    summarize_null,
    tie_tolerance,
)
from latentstitch.similarity.inference._null_kernels import NULL_KERNELS, batch_size_for, finite_ideal, null_kernel
from latentstitch.similarity.inference._resampling import Permutations
from latentstitch.similarity.measures._registry import MeasureSpec, get_measure, prepare_pair
from latentstitch.similarity.measures._sample_size import SmallSampleWarning, warn_if_trivial

METHODS = ("auto", "moments", "batched", "loop")
# Below this many samples the closed form enumerates every permutation instead (7! = 5,040 evaluations).
ENUMERATED_UP_TO = 7
# Below this many samples there are too few orders for a permutation test to reach p < 0.05 (4! = 24).
FEWEST_TO_PERMUTE = 5
# The closed form (a three-moment fit) is the default from this many samples on; fewer draw permutations.
MOMENTS_FROM = 20


@dataclass(frozen=True)
class PermutationTest(Result):
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
    method: str = "batched"
    null_skewness: float = math.nan

    @property
    def permutations(self) -> int:
        """Permutations drawn or enumerated (0 for the closed form)."""
        return int(self.null.shape[0])

    def __str__(self) -> str:
        flag = " [trivial at this sample size]" if self.trivial else ""
        how = {
            "moments": "closed-form permutation moments, Pearson type III",
            "exact": f"all {self.permutations} permutations",
        }.get(self.method, f"{self.permutations} permutations")
        return (
            f"{self.measure} = {self.value:.4g} (null {self.null_mean:.4g} ± {self.null_std:.4g}, "
            f"z = {self.z_score:.3g}, calibrated {self.calibrated:.3g}), p = {self.p_value:.4g} "
            f"({how}, n = {self.samples}){flag}"
        )


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


def resolve_method(spec: MeasureSpec, n: int, options: dict[str, Any], method: str, groups: Any) -> str:
    """The concrete method of ``method`` (``"auto"``: the closed form where it exists and n >= MOMENTS_FROM, else
    the batched kernel where it exists, else the loop)."""
    closed = groups is None and has_closed_form(spec, options)
    if method == "moments":
        if not closed:
            reason = "restricted (grouped) permutations" if groups is not None else f"the measure {spec.name!r}"
            raise ValueError(
                f"method: no closed-form permutation null for {reason}; closed forms exist for linear, debiased and "
                "RBF CKA without groups; use method='batched' or 'loop'"
            )
        return "moments"
    if method == "batched" and spec.name not in NULL_KERNELS:
        raise ValueError(f"method: the measure {spec.name!r} has no batched permutation null; use 'auto' or 'loop'")
    if method == "auto":
        if closed and (n >= MOMENTS_FROM or n <= ENUMERATED_UP_TO):
            return "moments"
        return "batched" if spec.name in NULL_KERNELS else "loop"
    return method


def warn_if_too_few_to_permute(n: int, measure: str) -> bool:
    """A ``SmallSampleWarning`` (at the user's line) when n samples have too few orders for a permutation test."""
    if n >= FEWEST_TO_PERMUTE:
        return False
    warn_at_caller(
        f"x, y: {n} samples have only {math.factorial(n)} orders, so a permutation test of {measure} cannot reach "
        f"p < 0.05 (the smallest p-value is about 1/{math.factorial(n)}) and says nothing; use at least "
        f"{FEWEST_TO_PERMUTE} samples (more for a useful test)",
        SmallSampleWarning,
    )
    return True


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
    method: str = "auto",
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
    permutations : number of random permutations drawn (``"batched"``/``"loop"``; the smallest possible p-value is
        ``1 / (permutations + 1)``). The closed form draws none.
    seed : seeds the permutations (drawn on the CPU: the same on every device and for every measure) and the rows
        sampled for the closed form's skewness when n > 2048; an integer in [0, 2**32 - 1].
    groups : optional (n,) labels for structured data (classes, images with several crops, subjects...).
    group_mode : with ``groups``: ``"within"`` permutes rows only within their group (the null keeps the group
        structure, so the test asks whether x and y agree beyond it, e.g. beyond class membership); ``"whole"``
        exchanges whole groups of equal size, keeping rows of a group together and in order (for dependent rows).
    batch_size : permutations per batch (default: from the widths, bounded memory).
    method : ``"auto"`` (default): the closed form for linear, debiased and RBF CKA without ``groups`` when
        n >= 20 or n <= 7, otherwise drawn permutations (batched where a kernel exists, else looped).
        ``"moments"``: the closed form (exact permutation mean and variance, exact or estimated skewness, Pearson
        type III tail; O(n d^2) in feature space for linear and debiased CKA, see ``similarity/inference/_closed_form``;
        with n <= 7 all n! permutations are enumerated: an exact p-value). ``"batched"``: drawn permutations through
        the measure's batched kernel (linear/debiased/RBF CKA, R^2, CCA, SVCCA, Procrustes, ENSD, GULP, eigenspace
        overlap, correlation match, permutation metric, RSA, distance correlation, mutual/cycle k-NN, CKNNA, k-NN
        Jaccard). ``"loop"``: drawn permutations, the measure called on each (the reference).
    batched : older spelling: True is ``method="batched"``, False ``method="loop"``.
    progress : show a progress bar (True), use a rich ``Progress`` of the caller, or nothing (False).
    **options : keyword arguments of the measure (``k=5``, ``debiased=True``, ``confounder=inputs``...).

    Returns
    -------
    PermutationTest (``value``, ``p_value``, ``null_mean``, ``null_std``, ``z_score``, ``calibrated``, ``method``...).

    Notes
    -----
    Drawn p-values are exact under exchangeability of y's rows (or of the groups); values equal to the observed one
    up to the data's rounding (``tie_tolerance``) count as at least as extreme, the same for every method. The closed
    form approximates the p-value of all n! permutations by three exact-or-estimated moments: accurate in the tails
    well beyond 1 / (permutations + 1) (benchmarks/permutation_null.py measures it against 10,000 drawn permutations).
    With fewer than 5 samples a ``SmallSampleWarning`` says that no permutation test can be significant; when the
    measure is trivial at this sample size (N <= d + 1 for the fitted measures) the result is flagged and warned.
    """
    spec = get_measure(measure)
    permutations = check_positive_int(permutations, "permutations")
    seed = check_seed(seed)
    check_choice(method, "method", METHODS)
    if batched is not None:
        legacy = "batched" if batched else "loop"
        if method not in ("auto", legacy):
            raise ValueError(f"batched: {batched} contradicts method={method!r}; give only method")
        method = legacy
    # NaN/inf: the feature-space closed form finds them in its sums (as cka does, saving two passes over the data)
    finite_later = groups is None and method in ("auto", "moments") and has_closed_form(spec, options)
    finite_later = finite_later and {**spec.options, **options}.get("kernel", "linear") == "linear"
    xt, yt = prepare_pair(x, y, min_rows=spec.min_samples, measure=spec.name, finite=not finite_later)
    n = xt.shape[0]
    method = resolve_method(spec, n, options, method, groups)
    if finite_later and not (method == "moments" and n > ENUMERATED_UP_TO):
        check_finite(xt, "x")
        check_finite(yt, "y")
    if method == "moments" and n > ENUMERATED_UP_TO:  # the closed form computes the value from its own moments
        trivial = warn_if_trivial(spec, n, xt.shape[1], yt.shape[1], options)
        return _closed_form_result(spec, xt, yt, options, seed, trivial)
    value = observed(spec, x, y, options)
    trivial = warn_if_trivial(spec, n, xt.shape[1], yt.shape[1], options)
    warn_if_too_few_to_permute(n, spec.name)
    tolerance = tie_tolerance(value, xt.dtype)
    sign = more_alike_sign(spec)
    if method == "moments":  # every permutation, through the batched kernel
        orders = torch.tensor(list(itertools.permutations(range(n))), dtype=torch.int64)
        null, _ = null_distribution(spec, xt, yt, options, orders.split(1024), progress=progress, total=len(orders))
        p_value = np.count_nonzero(sign * null >= sign * value - tolerance) / null.shape[0]
        method = "exact"
    else:
        generator = Permutations(n, seed, groups, group_mode)
        size = batch_size_for(xt.shape[1], yt.shape[1]) if batch_size is None else batch_size
        size = check_positive_int(size, "batch_size")
        batches = generator.batches(permutations, size)
        # below FEWEST_TO_PERMUTE samples (at most 24 orders, already warned) the measure itself computes every null
        # value: a kernel's rounding at the degenerate N = 2..4 must not decide a tie the loop would call one
        use_kernel = method == "batched" and n >= FEWEST_TO_PERMUTE
        null, _ = null_distribution(
            spec, xt, yt, options, batches, batched=use_kernel, progress=progress, total=permutations
        )
        p_value = add_one_p_value(value, null, sign, tolerance)
    mean, std, z, calibrated = summarize_null(spec, value, null)
    centred = null - null.mean()
    spread = float(centred.var()) if null.shape[0] > 2 else 0.0
    skewness = float((centred**3).mean()) / spread**1.5 if spread > 0 else math.nan
    return PermutationTest(
        measure=spec.name,
        value=value,
        p_value=float(p_value),
        null_mean=mean,
        null_std=std,
        z_score=z,
        calibrated=calibrated,
        null=null,
        kind=spec.kind,
        samples=n,
        trivial=trivial,
        batched=method == "batched" and n >= FEWEST_TO_PERMUTE,
        method=method,
        null_skewness=skewness,
    )


#: At or above this p-value of linear CKA's permutation test (``pairing_p_value``), two representations' rows look
#: unpaired: no more alike than with their rows shuffled.
UNPAIRED_P = 0.05
#: Below this many rows the pairing is not checked (too few orders for the closed form).
PAIRING_FROM = 8


def pairing_p_value(x: ArrayLike, y: ArrayLike, seed: int = 0) -> float | None:
    """Are the rows of x and y paired (row i of each the same item)? The closed-form permutation p-value of linear
    CKA (``permutation_test(..., method="moments")``: no permutation drawn); ``UNPAIRED_P`` or more says the rows
    look unpaired. None below ``PAIRING_FROM`` rows or where linear CKA is undefined (a constant side)."""
    import warnings

    seed = check_seed(seed)
    if len(x) < PAIRING_FROM:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return permutation_test(x, y, "linear_cka", method="moments", seed=seed).p_value
    except ValueError:  # a constant side: CKA is undefined, and callers say so in their own words
        return None


def _closed_form_result(spec, xt, yt, options, seed, trivial) -> PermutationTest:
    closed = closed_form_test(spec, xt, yt, options, seed)
    value = closed.value
    ideal = finite_ideal(spec)
    span = ideal - closed.mean
    return PermutationTest(
        measure=spec.name,
        value=value,
        p_value=closed.p_value,
        null_mean=closed.mean,
        null_std=closed.std,
        z_score=closed.z,
        calibrated=(value - closed.mean) / span if span > 0 else math.nan,
        null=np.empty(0),
        kind=spec.kind,
        samples=xt.shape[0],
        trivial=trivial,
        batched=False,
        method="moments",
        null_skewness=closed.skewness,
    )
