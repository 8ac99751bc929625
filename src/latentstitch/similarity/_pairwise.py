"""Several indices at once (``compare``) and one index over many representations (``pairwise``), with a
permutation test over the whole grid of pairs (``pairwise(..., against=..., permutations=...)``)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.callsite import warn_at_caller
from latentstitch.similarity._catalog import DEFAULT_MEASURES, SAME_SPACE_MEASURES
from latentstitch.similarity._multiple import PairwiseTest, pairwise_test
from latentstitch.similarity._registry import as_rows, get_measure
from latentstitch.similarity._sample_size import SmallSampleWarning, is_trivial, trivial_message


class Comparison(dict):
    """``compare``'s ``{name: value}``, with what a reader needs to trust it: ``samples`` (n), ``widths`` (p, q)
    and ``trivial``, the names of the measures that reach "identical" on any data at this sample size
    (``is_trivial``; their values say nothing)."""

    samples: int
    widths: tuple[int, int]
    trivial: tuple[str, ...]


def compare(
    x: ArrayLike, y: ArrayLike, measures: Sequence[str] | Mapping[str, Mapping[str, Any]] | None = None
) -> Comparison:
    """Several similarity indices between x and y, as ``{name: value}`` (floats; a ``dict`` whose ``trivial``
    attribute names the measures that are trivial at this sample size, with a ``SmallSampleWarning``).

    Parameters
    ----------
    x, y : (n, p), (n, q) arrays or tensors of the same samples.
    measures : names of registered measures (``latentstitch.similarity.MEASURES``), or a mapping from names to
        keyword arguments (``{"mutual_knn": {"k": 5}, "linear_cka": {}}``). By default ``DEFAULT_MEASURES``
        (every CKA/CCA/shape/RSA/k-NN index), plus ``jaccard_at_k``, ``mrr`` and ``matched_cosine`` when x and y
        have the same width. RBF CKA, RSA and mutual k-NN need O(n^2) time (and the first two O(n^2) memory): for
        many thousands of samples, name the measures you want.

    Each value follows its measure's conventions (``MEASURES[name]``: kind, range, centring, invariances). For the
    fitted measures (``MEASURES[name].trivial_when_n_le_d``: R^2, the CCA family, GULP...) check
    ``result.trivial``: with no more samples than features + 1 they read "identical" whatever the data.
    """
    xt, yt = as_rows(x, "x"), as_rows(y, "y")
    n, p, q = xt.shape[0], xt.shape[1], yt.shape[1]
    if measures is None:
        measures = DEFAULT_MEASURES + (SAME_SPACE_MEASURES if p == q else ())
    options = dict(measures) if isinstance(measures, Mapping) else {name: {} for name in measures}
    specs = {name: get_measure(name) for name in options}
    trivial = tuple(name for name, spec in specs.items() if is_trivial(spec, n, p, q, dict(options[name])))
    if trivial:
        warn_at_caller(trivial_message(list(trivial), n, p, q), SmallSampleWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)  # said once above, for all of them
        result = Comparison((name, float(specs[name](x, y, **dict(kwargs)))) for name, kwargs in options.items())
    result.samples, result.widths, result.trivial = n, (p, q), trivial
    return result


def pairwise(
    representations: Sequence[ArrayLike] | Mapping[str, ArrayLike],
    measure: str = "linear_cka",
    *,
    against: Sequence[ArrayLike] | Mapping[str, ArrayLike] | None = None,
    permutations: int | None = None,
    seed: int = 0,
    correction: str = "max",
    statistic: str = "standardized",
    groups: ArrayLike | None = None,
    group_mode: str = "within",
    batch_size: int | None = None,
    plot: str | Path | None = None,
    title: str | None = None,
    client: Any = None,
    workers: int | None = None,
    progress: bool = True,
    **options: Any,
) -> np.ndarray | PairwiseTest:
    """The matrix ``M[i, j] = measure(reps[i], reps[j])`` over a list of representations (layers, models), or
    ``measure(reps[i], against[j])`` between two lists; with ``permutations``, a permutation test of every pair with
    a correction for the search over pairs.

    Parameters
    ----------
    representations : a sequence of (n, ...) arrays/tensors of the same n samples, or a mapping from labels to them
        (the labels then name the heatmap's rows and columns).
    measure : a registered measure name. Symmetric measures are computed once per unordered pair (one list).
    against : a second sequence or mapping (e.g. the layers of another model): the matrix is then rectangular,
        ``M[i, j] = measure(representations[i], against[j])``.
    permutations : with ``against``: run a permutation test over the grid. Every permutation reorders the samples of
        *all* of ``against`` at once (the layers of one model keep their relation to each other; only the pairing
        with ``representations`` is broken), every pair is recomputed, and ``correction`` turns the grid into one
        family: ``"max"`` (default) gives family-wise corrected p-values (max-T: a pair's p-value is the share of
        permutations whose best pair does as well), so "the best layer match" gets an honest p-value; ``"mean"``
        tests the mean over pairs (are the two sets related at all?). Returns a ``PairwiseTest``.
    seed, groups, group_mode, batch_size : the permutations, as in ``permutation_test``.
    statistic : ``"standardized"`` (default): each pair's value relative to its own null (z-score) before the max
        or mean, so that wide layers, whose null values are higher, do not dominate; ``"raw"``: the values.
    plot : optional path of a PNG heatmap to write (labelled axes, title, colour bar; with a test, pairs with a
        corrected p < 0.05 are starred).
    title : heatmap title (default: the measure's name).
    client, workers : run every pair as a task on a ``dask.distributed`` cluster (``latentstitch.distributed``):
        ``client`` a ``Client`` or a scheduler address (``"tcp://scheduler:8786"``), or ``workers`` the number of
        worker processes of a ``LocalCluster`` started (and closed) here. Without a test each representation is sent
        once to the cluster; with a test each pair's null is one task (the permutations are re-drawn from the seed
        on the worker). By default everything runs in this process. Needs ``pip install 'latentstitch[dask]'``.
    progress : show a progress bar of the finished pairs when running on a cluster.
    **options : keyword arguments for the measure.

    Returns
    -------
    (m, m) or (m, k) float64 numpy array; a ``PairwiseTest`` with ``permutations``.
    """
    spec = get_measure(measure)
    labels, reps = _labelled(representations, "representations")
    if against is None and permutations is not None:
        raise ValueError(
            "permutations: a test over pairs needs against= (the other model's layers): the null permutes the "
            "samples of every representation in against with one permutation and keeps representations as they are"
        )
    if against is not None:
        labels_against, others = _labelled(against, "against")
        if permutations is not None:
            test = pairwise_test(
                spec,
                reps,
                others,
                options,
                permutations=permutations,
                seed=seed,
                correction=correction,
                statistic=statistic,
                groups=groups,
                group_mode=group_mode,
                batch_size=batch_size,
                client=client,
                workers=workers,
                progress=progress,
                labels=labels,
                labels_against=labels_against,
            )
            if plot is not None:
                heatmap(
                    test.values,
                    labels,
                    plot,
                    title=title or f"{spec.name} ({test.correction}-corrected, * p < 0.05)",
                    kind=spec.kind,
                    value_range=spec.value_range,
                    column_labels=labels_against,
                    marks=test.p_values < 0.05,
                )
            return test
        pairs = [(i, j) for i in range(len(reps)) for j in range(len(others))]
        matrix = np.full((len(reps), len(others)), np.nan)
        values = _pair_values(spec, reps, others, pairs, options, client, workers, progress)
        for (i, j), value in zip(pairs, values, strict=True):
            matrix[i, j] = value
        if plot is not None:
            heatmap(
                matrix,
                labels,
                plot,
                title=title or spec.name,
                kind=spec.kind,
                value_range=spec.value_range,
                column_labels=labels_against,
            )
        return matrix
    m = len(reps)
    pairs = [(i, j) for i in range(m) for j in range(i if spec.symmetric else 0, m)]
    values = _pair_values(spec, reps, reps, pairs, options, client, workers, progress)
    matrix = np.full((m, m), np.nan)
    for (i, j), value in zip(pairs, values, strict=True):
        matrix[i, j] = value
        if spec.symmetric:
            matrix[j, i] = value
    if plot is not None:
        heatmap(matrix, labels, plot, title=title or spec.name, kind=spec.kind, value_range=spec.value_range)
    return matrix


def _labelled(representations: Any, name: str) -> tuple[list[str], list[ArrayLike]]:
    if isinstance(representations, Mapping):
        labels, reps = [str(k) for k in representations], list(representations.values())
    else:
        reps = list(representations)
        labels = [str(i) for i in range(len(reps))]
    if not reps:
        raise ValueError(f"{name}: expected at least one representation")
    return labels, reps


def _pair_values(spec, rows, columns, pairs, options, client, workers, progress) -> list[float]:
    if client is None and workers is None:
        return [_pair_value((spec, rows[i], columns[j], options)) for i, j in pairs]
    from latentstitch.distributed import client_scope, map_tasks

    with client_scope(client, workers) as active:
        sent_rows = active.scatter(rows)
        sent_columns = sent_rows if columns is rows else active.scatter(columns)
        tasks = [(spec, sent_rows[i], sent_columns[j], options) for i, j in pairs]
        return map_tasks(_pair_value, tasks, client=active, progress=progress, description=f"pairwise {spec.name}")


def _pair_value(task: tuple[Any, ArrayLike, ArrayLike, Mapping[str, Any]]) -> float:
    spec, x, y, options = task
    return float(spec(x, y, **options))


def heatmap(
    matrix: np.ndarray,
    labels: Sequence[str],
    path: str | Path,
    *,
    title: str = "",
    kind: str = "similarity",
    value_range: tuple[float, float] = (0.0, 1.0),
    column_labels: Sequence[str] | None = None,
    marks: np.ndarray | None = None,
) -> Path:
    """Write ``matrix`` as a labelled heatmap PNG (rows: first argument, columns: second; ``column_labels`` when
    they differ from ``labels``). ``marks``: a boolean matrix of cells to star (e.g. significant pairs)."""
    from matplotlib.figure import Figure  # no pyplot: no global backend or state is touched

    m, k = matrix.shape
    column_labels = list(labels) if column_labels is None else list(column_labels)
    size = min(3.0 + 0.45 * max(m, k), 16.0)
    figure = Figure(figsize=(size + 1.5, size))
    axes = figure.add_subplot()
    finite = [v for v in value_range if math.isfinite(v)]
    low = finite[0] if len(finite) == 2 else np.nanmin(matrix)
    high = finite[-1] if len(finite) == 2 else np.nanmax(matrix)
    image = axes.imshow(matrix, cmap="viridis" if kind == "similarity" else "viridis_r", vmin=low, vmax=high)
    axes.set_xticks(range(k), column_labels, rotation=90 if k > 6 else 0)
    axes.set_yticks(range(m), labels)
    axes.set_xlabel("representation (second argument)")
    axes.set_ylabel("representation (first argument)")
    axes.set_title(title)
    if max(m, k) <= 12:
        for i in range(m):
            for j in range(k):
                star = "*" if marks is not None and marks[i, j] else ""
                axes.text(j, i, f"{matrix[i, j]:.2f}{star}", ha="center", va="center", color="w", fontsize=8)
    figure.colorbar(image, ax=axes, label=kind)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path
