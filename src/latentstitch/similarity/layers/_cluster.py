"""``layer_moments`` over data spread across machines: each partition's pass runs as a task on a Dask cluster and
the partitions' ``LayerMoments`` are merged (exactly: the moments move to one shift, ``CrossMoments.merge``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from latentstitch.distributed import client_scope, map_tasks
from latentstitch.similarity.layers._moments import LayerMoments
from latentstitch.similarity.layers._similarity import layer_moments


def layer_moments_on_cluster(
    model_a: nn.Module,
    model_b: nn.Module,
    partitions: Sequence[Iterable[Any] | Callable[[], Iterable[Any]]],
    *,
    client: Any = None,
    workers: int | None = None,
    progress: bool = True,
    **options: Any,
) -> LayerMoments:
    """``layer_moments(model_a, model_b, partition, **options)`` of every partition as a task on a ``dask.distributed``
    cluster, merged in the order of ``partitions``; ``layer_similarity_from_moments`` finishes it.

    ``partitions``: each an iterable of batches, or a function of no argument returning one, called on the worker
    (to read that machine's share of the data there instead of sending it). The models are sent to each worker
    once. ``client``, ``workers``: as ``latentstitch.distributed.get_client`` (a client, a scheduler address, or
    a local cluster of ``workers`` processes). ``options``: ``layer_moments``'s (``layers_a``, ``pooling``...).
    """
    partitions = list(partitions)
    if not partitions:
        raise ValueError("partitions: expected at least one partition of the data")
    with client_scope(client, workers) as active:
        # Wrapped, the modules travel by pickle: dask's own torch serialiser rebuilds them without their hook tables.
        (models,) = active.scatter([_Models(model_a, model_b)], broadcast=True, hash=False)
        # Each partition draws its own sample keys (the merged sample is then uniform over all rows).
        seed = options.pop("seed", 0)
        tasks = [(models, partition, {**options, "seed": seed + k}) for k, partition in enumerate(partitions)]
        parts = map_tasks(_partition, tasks, client=active, progress=progress, description="layer moments")
    return functools.reduce(LayerMoments.merge, parts)


@dataclass(frozen=True)
class _Models:
    a: nn.Module
    b: nn.Module


def _partition(task: tuple[_Models, Any, dict[str, Any]]) -> LayerMoments:
    models, partition, options = task
    data = partition() if callable(partition) else partition
    return layer_moments(models.a, models.b, data, **options)
