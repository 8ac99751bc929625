"""Independent pieces of work (pairs of representations, grid points) as tasks on a ``dask.distributed`` cluster."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from latentstitch._core.extras import require
from latentstitch._core.params import check_positive_int
from latentstitch._core.progress import new_progress


def get_client(client: Any = None, workers: int | None = None) -> Any:
    """A ``dask.distributed.Client`` to run tasks on.

    Parameters
    ----------
    client : Client, str or None
        A client is returned as it is. A string is a scheduler address (``"tcp://scheduler:8786"``): a new client
        connected to that existing cluster. None: without ``workers``, connect to dask's configured
        ``scheduler-address`` (environment variable ``DASK_SCHEDULER_ADDRESS``) if set; else start a
        ``LocalCluster`` on this machine.
    workers : int, optional
        Worker processes of the local cluster (default: the number of CPU cores); each runs one task at a time
        with one torch thread (``pin_torch_threads``).

    The caller owns a client it did not pass in: ``client.close()`` also stops a local cluster started here.
    Needs the ``dask`` extra (``pip install 'latentstitch[dask]'``).
    """
    distributed = require("distributed", "dask")
    if isinstance(client, distributed.Client):
        return client
    if isinstance(client, str):
        return distributed.Client(client)
    if client is not None:
        raise TypeError(f"client: expected a distributed.Client or a scheduler address, got {type(client).__name__}")
    import dask

    address = dask.config.get("scheduler-address", None)
    if address and workers is None:
        return distributed.Client(address)
    workers = (os.cpu_count() or 1) if workers is None else check_positive_int(workers, "workers")
    started = distributed.Client(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0")
    pin_torch_threads(started)
    return started


def pin_torch_threads(client: Any, threads: int = 1) -> None:
    """Register a worker plugin that sets torch's intra-op threads on every worker of ``client``'s cluster, now and
    on workers that join or restart later. Clusters started by ``get_client`` have it (one thread)."""
    from latentstitch.distributed._worker import TorchThreads  # imports distributed: only where it is installed

    client.register_plugin(TorchThreads(threads))


@contextlib.contextmanager
def client_scope(client: Any = None, workers: int | None = None) -> Iterator[Any]:
    """``get_client(client, workers)`` for the duration of a ``with`` block; a client created here is closed at the
    end (with the local cluster it started), a client passed in is left open."""
    distributed = require("distributed", "dask")
    active = get_client(client, workers)
    try:
        yield active
    finally:
        if not isinstance(client, distributed.Client):
            active.close()


def map_tasks(
    fn: Callable[[Any], Any],
    items: Iterable[Any],
    *,
    client: Any = None,
    workers: int | None = None,
    progress: bool = True,
    description: str = "tasks",
) -> list[Any]:
    """``[fn(item) for item in items]``, each call an independent task on a ``dask.distributed`` cluster.

    ``client`` and ``workers`` pick the cluster as ``get_client`` does (a local cluster started here is closed when
    done). Items may hold futures (``client.scatter`` large shared inputs once and pass their futures: workers fetch
    each only once). A rich progress bar counts finished tasks. Results come back in the order of ``items``; the
    first task that fails cancels the others and its exception is raised here. Lost workers are handled by dask:
    their tasks are recomputed elsewhere.

    ``fn`` and the items travel to the workers with cloudpickle (dask's transport); they should be importable
    functions and plain data.
    """
    distributed = require("distributed", "dask")
    items = list(items)
    with client_scope(client, workers) as active:
        futures = [active.submit(fn, item, pure=False) for item in items]
        try:
            with new_progress(disable=not progress) as bar:
                task = bar.add_task(description, total=len(futures))
                for future in distributed.as_completed(futures):
                    if future.status == "error":
                        future.result()  # raises the task's exception
                    bar.advance(task)
            return active.gather(futures)
        finally:
            active.cancel([f for f in futures if not f.done()])
