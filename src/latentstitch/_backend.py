"""Where the heavy linear algebra runs.

The math of latentstitch is written in torch. One exception is made for speed: a matrix product on the CPU that
needs no gradient is computed by numpy's BLAS. Torch's CPU wheels bundle Intel MKL, whose SGEMM on AMD processors
measured 1.5x slower than numpy's OpenBLAS on the same data (benchmarks/relative_projection.py prints both). The
result is the same product; set ``LATENTSTITCH_CPU_GEMM=torch`` to keep every product in torch.
"""

from __future__ import annotations

import os

import numpy as np
import torch

_NUMPY_GEMM = os.environ.get("LATENTSTITCH_CPU_GEMM", "numpy").lower() != "torch"
_NUMPY_DTYPES = (torch.float32, torch.float64)


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` for 2-D tensors, routed to numpy's BLAS on the CPU when no gradient is needed.

    ``out``: a contiguous tensor of the result's shape and dtype to write into (no gradient), e.g. a slice of rows
    of a larger output, which saves allocating and copying the result.
    """
    numpy_path = (
        _NUMPY_GEMM
        and a.device.type == "cpu"
        and b.device.type == "cpu"
        and a.dtype == b.dtype
        and a.dtype in _NUMPY_DTYPES
        and not (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad))
    )
    if out is not None:
        if numpy_path and out.is_contiguous() and out.dtype == a.dtype and out.device.type == "cpu":
            np.matmul(a.numpy(), b.numpy(), out=out.numpy())
        else:
            torch.matmul(a, b, out=out)
        return out
    if numpy_path:
        return torch.from_numpy(np.matmul(a.numpy(), b.numpy()))
    return a @ b


def set_threads(threads: int) -> str:
    """Use ``threads`` threads in torch and in every BLAS/OpenMP pool loaded so far (numpy's and scipy's OpenBLAS);
    return a line saying what was set.

    Small models and direct-matching fits on a shared 2-core machine ran 4x to 100x slower when these pools
    oversubscribed the cores, so the CLI pins them (``--threads``, default 1). Libraries loaded *after* this call
    keep their own settings: call it after the imports that matter.
    """
    from threadpoolctl import threadpool_info, threadpool_limits

    from latentstitch._validation import check_positive_int

    threads = check_positive_int(threads, "threads")
    torch.set_num_threads(threads)
    threadpool_limits(threads)
    pools = ", ".join(f"{p['internal_api']}={p['num_threads']}" for p in threadpool_info())
    return f"threads: torch={torch.get_num_threads()}, {pools}"
