"""The same computations on a laptop or a cluster, on Dask (``pip install 'latentstitch[dask]'``).

Dask arrays are accepted where the data can be big, and computed block by block on dask's current scheduler (the
active ``distributed.Client`` if there is one, else dask's local threads):

- ``relative_projection(x_dask, anchors)`` returns a lazy dask array (``map_rows``: a fitted row-wise function mapped
  over the row chunks of ``x``; errors name rows of the whole array).
- ``fit`` / ``partial_fit`` of the stitchers built on sufficient statistics (``LeastSquares``, ``Procrustes``,
  ``ReducedRank``, ``SparseLasso``) and ``update`` of the streaming similarity measures (``StreamingCKA``,
  ``StreamingR2``, ``StreamingCCA``...) turn every row block into float64 statistics (d x d per block, whatever
  its number of rows) and merge them in a tree; the solve or the index then runs on the same statistics as in
  memory (equal up to float64 rounding).

Independent pieces (the pairs of ``similarity.pairwise(..., client=...)``, points of a grid) run as tasks with
``map_tasks`` on a client from ``get_client`` (a given client, a scheduler address, or a ``LocalCluster``).

Importing this package does not import dask; see ``docs/distributed.md``.
"""

from latentstitch.distributed._arrays import (
    dask_pair,
    dask_rows,
    is_dask_array,
    map_rows,
    reduce_blocks,
    update_blocks,
)
from latentstitch.distributed._tasks import client_scope, get_client, map_tasks, pin_torch_threads

__all__ = [
    "client_scope",
    "dask_pair",
    "dask_rows",
    "get_client",
    "is_dask_array",
    "map_rows",
    "map_tasks",
    "pin_torch_threads",
    "reduce_blocks",
    "update_blocks",
]
