"""Is this similarity more than chance? The permutation test of every registered measure.

``permutation_test``: the null distribution of a measure when the pairing of samples is broken (y's rows permuted,
x's kept), its add-one p-value, mean, spread, and the value calibrated against it. Unrelated representations of
finite width and sample size do not score 0: linear CKA of independent Gaussian data is about ``p q / n^2``-ish, k-NN
measures about ``k / n``; the null says what "nothing" scores here.

Where the measure's structure allows (``_null_kernels``), a batch of permutations costs one GEMM or one relabelling
instead of a full evaluation; otherwise the measure itself is looped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.params import check_positive_int
from latentstitch._core.progress import progress_bar
from latentstitch.similarity._inference import (
    Result,
    add_one_p_value,
    flag_trivial,
    more_alike_sign,
    observed,
    quiet,
    summarize_null,
)
from latentstitch.similarity._null_kernels import batch_size_for, null_kernel
from latentstitch.similarity._registry import MeasureSpec, get_measure, prepare_pair
from latentstitch.similarity._resampling import Permutations


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
