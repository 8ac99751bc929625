"""One index over many representations: ``pairwise`` computes the matrix of a measure over every pair of
representations (layers, models), in this process or as tasks on a Dask cluster. Its permutation test over the
pairs is ``pairwise_test``; ``heatmap`` draws either."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from latentstitch._core.arrays import ArrayLike
from latentstitch.distributed import client_scope, map_tasks
from latentstitch.similarity.measures._registry import get_measure

# Arguments that pairwise no longer takes, and where they went (else they would reach the measure as options).
_MOVED = {
    "permutations": "the test over pairs is pairwise_test(representations, against, measure, permutations=...)",
    "correction": "the test over pairs is pairwise_test(representations, against, measure, correction=...)",
    "statistic": "the test over pairs is pairwise_test(representations, against, measure, statistic=...)",
    "group_mode": "the test over pairs is pairwise_test(representations, against, measure, group_mode=...)",
    "seed": "the test over pairs is pairwise_test(representations, against, measure, seed=...)",
    "plot": "draw the matrix with heatmap(matrix, path, labels=...)",
    "title": "draw the matrix with heatmap(matrix, path, labels=..., title=...)",
}


def pairwise(
    representations: Sequence[ArrayLike] | Mapping[str, ArrayLike],
    measure: str = "linear_cka",
    *,
    against: Sequence[ArrayLike] | Mapping[str, ArrayLike] | None = None,
    client: Any = None,
    workers: int | None = None,
    progress: bool = True,
    **options: Any,
) -> np.ndarray:
    """The matrix ``M[i, j] = measure(reps[i], reps[j])`` over a list of representations (layers, models), or
    ``measure(reps[i], against[j])`` between two lists.

    Parameters
    ----------
    representations : a sequence of (n, ...) arrays/tensors of the same n samples, or a mapping from labels to them.
    measure : a registered measure name. Symmetric measures are computed once per unordered pair (one list).
    against : a second sequence or mapping (e.g. the layers of another model): the matrix is then rectangular,
        ``M[i, j] = measure(representations[i], against[j])``.
    client, workers : run every pair as a task on a ``dask.distributed`` cluster (``latentstitch.distributed``):
        ``client`` a ``Client`` or a scheduler address (``"tcp://scheduler:8786"``), or ``workers`` the number of
        worker processes of a ``LocalCluster`` started (and closed) here. Each representation is sent once to the
        cluster. By default everything runs in this process. Needs ``pip install 'latentstitch[dask]'``.
    progress : show a progress bar of the finished pairs when running on a cluster.
    **options : keyword arguments for the measure.

    Returns
    -------
    (m, m) or (m, k) float64 numpy array. ``pairwise_test`` tests it (permutations, corrected over the pairs);
    ``heatmap(matrix, path, labels=list(representations))`` draws it.
    """
    for name in sorted(set(options) & set(_MOVED)):
        raise TypeError(f"pairwise: {name}= is not an argument of pairwise any more; {_MOVED[name]}")
    spec = get_measure(measure)
    _, reps = labelled(representations, "representations")
    if against is not None:
        _, others = labelled(against, "against")
        pairs = [(i, j) for i in range(len(reps)) for j in range(len(others))]
        matrix = np.full((len(reps), len(others)), np.nan)
        values = _pair_values(spec, reps, others, pairs, options, client, workers, progress)
        for (i, j), value in zip(pairs, values, strict=True):
            matrix[i, j] = value
        return matrix
    m = len(reps)
    pairs = [(i, j) for i in range(m) for j in range(i if spec.symmetric else 0, m)]
    values = _pair_values(spec, reps, reps, pairs, options, client, workers, progress)
    matrix = np.full((m, m), np.nan)
    for (i, j), value in zip(pairs, values, strict=True):
        matrix[i, j] = value
        if spec.symmetric:
            matrix[j, i] = value
    return matrix


def labelled(representations: Any, name: str) -> tuple[list[str], list[ArrayLike]]:
    """Labels and representations of a sequence or mapping; one array alone is refused (its rows would be taken
    for representations), naming ``name``."""
    shape = getattr(representations, "shape", None)
    if shape is not None and not isinstance(representations, Mapping):
        raise ValueError(
            f"{name}: expected a list (or mapping) of representations, each an (n, d) array of the same n samples; "
            f"got one array of shape {tuple(shape)}: pass [X] for one representation, or [X, Y, ...]"
        )
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
    with client_scope(client, workers) as active:
        # hash=False: content-hashed keys would collide with a previous call's release of the same inputs (two
        # pairwise calls in a row on one client: "lost dependencies")
        sent_rows = active.scatter(rows, hash=False)
        sent_columns = sent_rows if columns is rows else active.scatter(columns, hash=False)
        tasks = [(spec, sent_rows[i], sent_columns[j], options) for i, j in pairs]
        return map_tasks(_pair_value, tasks, client=active, progress=progress, description=f"pairwise {spec.name}")


def _pair_value(task: tuple[Any, ArrayLike, ArrayLike, Mapping[str, Any]]) -> float:
    spec, x, y, options = task
    return float(spec(x, y, **options))
