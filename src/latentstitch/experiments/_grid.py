"""Grids of independent runs (trainings of a hyper-parameter grid), in this process or as tasks on a Dask cluster.

``latentstitch reproduce NAME --workers N`` (a ``LocalCluster`` of N worker processes) or ``--scheduler ADDRESS``
(an existing cluster) makes the grid experiments submit each run as a task; without them the runs go one after the
other here (Frankenstein sweeps put each layer on the cluster in the same way). The runs are seeded, so both give
the same numbers.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from latentstitch._core.progress import new_progress
from latentstitch.distributed import client_scope, map_tasks

_CLUSTER: contextvars.ContextVar[Any] = contextvars.ContextVar("latentstitch_grid_cluster", default=None)


@contextlib.contextmanager
def grid_cluster(client: Any = None, workers: int | None = None) -> Iterator[Any]:
    """Within the block, ``map_grid`` runs its items as tasks on ``get_client(client, workers)``.

    With neither argument nothing changes (runs stay in this process). A cluster started here is closed at the end.
    """
    if client is None and workers is None:
        yield None
        return

    with client_scope(client, workers) as active:
        token = _CLUSTER.set(active)
        try:
            yield active
        finally:
            _CLUSTER.reset(token)


def grid_client() -> Any:
    """The client of the enclosing ``grid_cluster`` block, or None: pass it on as ``client=`` (e.g. to
    ``stitching.sweep``) to put other independent pieces on the same cluster."""
    return _CLUSTER.get()


def map_grid(
    fn: Callable[[Any], Any], items: Iterable[Any], *, progress: bool = True, description: str = "runs"
) -> list[Any]:
    """``[fn(item) for item in items]`` with a progress bar; on the cluster of the enclosing ``grid_cluster`` block
    when there is one (``fn`` then travels to the workers: a module-level function or a ``functools.partial``)."""
    items = list(items)
    active = _CLUSTER.get()
    if active is not None:
        return map_tasks(fn, items, client=active, progress=progress, description=description)

    results = []
    with new_progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(description, total=len(items))
        step = max(1, len(items) // 10)
        for done, item in enumerate(items, start=1):
            results.append(fn(item))
            bar.advance(task)
            if progress and not bar.console.is_terminal and (done % step == 0 or done == len(items)):
                bar.console.log(f"{description}: {done}/{len(items)}")  # a line a tenth, for log files
    return results
