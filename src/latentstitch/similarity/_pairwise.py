"""Several indices at once (``compare``) and one index over many representations (``pairwise``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._validation import ArrayLike
from latentstitch.similarity._catalog import DEFAULT_MEASURES, SAME_SPACE_MEASURES
from latentstitch.similarity._registry import as_rows, get_measure


def compare(
    x: ArrayLike, y: ArrayLike, measures: Sequence[str] | Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, float]:
    """Several similarity indices between x and y, as ``{name: value}`` (floats).

    Parameters
    ----------
    x, y : (n, p), (n, q) arrays or tensors of the same samples.
    measures : names of registered measures (``latentstitch.similarity.MEASURES``), or a mapping from names to
        keyword arguments (``{"mutual_knn": {"k": 5}, "linear_cka": {}}``). By default ``DEFAULT_MEASURES``
        (every CKA/CCA/shape/RSA/k-NN index), plus ``jaccard_at_k``, ``mrr`` and ``matched_cosine`` when x and y
        have the same width. RBF CKA, RSA and mutual k-NN need O(n^2) time (and the first two O(n^2) memory): for
        many thousands of samples, name the measures you want.

    Each value follows its measure's conventions (``MEASURES[name]``: kind, range, centring, invariances).
    """
    if measures is None:
        same = as_rows(x, "x").shape[1] == as_rows(y, "y").shape[1]
        measures = DEFAULT_MEASURES + (SAME_SPACE_MEASURES if same else ())
    options = dict(measures) if isinstance(measures, Mapping) else {name: {} for name in measures}
    return {name: float(get_measure(name)(x, y, **dict(kwargs))) for name, kwargs in options.items()}


def pairwise(
    representations: Sequence[ArrayLike] | Mapping[str, ArrayLike],
    measure: str = "linear_cka",
    *,
    plot: str | Path | None = None,
    title: str | None = None,
    client: Any = None,
    workers: int | None = None,
    progress: bool = True,
    **options: Any,
) -> np.ndarray:
    """The matrix ``M[i, j] = measure(reps[i], reps[j])`` over a list of representations (layers, models).

    Parameters
    ----------
    representations : a sequence of (n, ...) arrays/tensors of the same n samples, or a mapping from labels to them
        (the labels then name the heatmap's rows and columns).
    measure : a registered measure name. Symmetric measures are computed once per unordered pair.
    plot : optional path of a PNG heatmap to write (labelled axes, title, colour bar).
    title : heatmap title (default: the measure's name).
    client, workers : run every pair as a task on a ``dask.distributed`` cluster (``latentstitch.distributed``):
        ``client`` a ``Client`` or a scheduler address (``"tcp://scheduler:8786"``), or ``workers`` the number of
        worker processes of a ``LocalCluster`` started (and closed) here. Each representation is sent once to the
        cluster. By default everything runs in this process. Needs ``pip install 'latentstitch[dask]'``.
    progress : show a progress bar of the finished pairs when running on a cluster.
    **options : keyword arguments for the measure.

    Returns
    -------
    (m, m) float64 numpy array.
    """
    spec = get_measure(measure)
    if isinstance(representations, Mapping):
        labels, reps = [str(k) for k in representations], list(representations.values())
    else:
        reps = list(representations)
        labels = [str(i) for i in range(len(reps))]
    if not reps:
        raise ValueError("representations: expected at least one representation")
    m = len(reps)
    pairs = [(i, j) for i in range(m) for j in range(i if spec.symmetric else 0, m)]
    if client is None and workers is None:
        values = [_pair_value((spec, reps[i], reps[j], options)) for i, j in pairs]
    else:
        from latentstitch.distributed import client_scope, map_tasks

        with client_scope(client, workers) as active:
            data = active.scatter(reps)
            tasks = [(spec, data[i], data[j], options) for i, j in pairs]
            label = f"pairwise {spec.name}"
            values = map_tasks(_pair_value, tasks, client=active, progress=progress, description=label)
    matrix = np.full((m, m), np.nan)
    for (i, j), value in zip(pairs, values, strict=True):
        matrix[i, j] = value
        if spec.symmetric:
            matrix[j, i] = value
    if plot is not None:
        heatmap(matrix, labels, plot, title=title or spec.name, kind=spec.kind, value_range=spec.value_range)
    return matrix


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
) -> Path:
    """Write ``matrix`` as a labelled heatmap PNG (rows: first argument, columns: second)."""
    from matplotlib.figure import Figure  # no pyplot: no global backend or state is touched

    m = matrix.shape[0]
    size = min(3.0 + 0.45 * m, 16.0)
    figure = Figure(figsize=(size + 1.5, size))
    axes = figure.add_subplot()
    finite = [v for v in value_range if math.isfinite(v)]
    low = finite[0] if len(finite) == 2 else np.nanmin(matrix)
    high = finite[-1] if len(finite) == 2 else np.nanmax(matrix)
    image = axes.imshow(matrix, cmap="viridis" if kind == "similarity" else "viridis_r", vmin=low, vmax=high)
    axes.set_xticks(range(m), labels, rotation=90 if m > 6 else 0)
    axes.set_yticks(range(m), labels)
    axes.set_xlabel("representation (second argument)")
    axes.set_ylabel("representation (first argument)")
    axes.set_title(title)
    if m <= 12:
        for i in range(m):
            for j in range(m):
                axes.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", color="w", fontsize=8)
    figure.colorbar(image, ax=axes, label=kind)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path
