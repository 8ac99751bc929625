"""The worker plugin that pins torch's intra-op threads (imported only where ``distributed`` is installed)."""

from __future__ import annotations

from distributed import WorkerPlugin


class TorchThreads(WorkerPlugin):
    """Set ``torch.set_num_threads(threads)`` on every worker, including workers that (re)start later.

    Dask runs ``threads_per_worker`` tasks at once in each worker process; torch's own thread pool on top of that
    would oversubscribe the cores (and slow small products several-fold on a busy machine).
    """

    name = "latentstitch-torch-threads"

    def __init__(self, threads: int = 1):
        self.threads = threads

    def setup(self, worker) -> None:
        import torch

        torch.set_num_threads(self.threads)
