"""Where the heavy linear algebra runs, and in what pieces.

The math of latentstitch is written in torch. One exception is made for speed: a matrix product on the CPU that
needs no gradient is computed by numpy's BLAS. Torch's CPU wheels bundle Intel MKL, whose SGEMM on AMD processors
measured 1.5x slower than numpy's OpenBLAS on the same data (benchmarks/relative_projection.py prints both). The
result is the same product; set ``LATENTSTITCH_CPU_GEMM=torch`` to keep every product in torch. Row norms on the
CPU go through numpy's ``einsum`` for the same reason (1.7x faster than ``torch.linalg.vector_norm`` here).

Chunked computations ask ``chunk_rows`` how many rows to take at a time: cache-sized pieces on the CPU, and on a
GPU as many rows as the free device memory allows, so that a call launches a few large kernels rather than
hundreds of small ones.
"""

from __future__ import annotations

import os

import numpy as np
import torch

_NUMPY_GEMM = os.environ.get("LATENTSTITCH_CPU_GEMM", "numpy").lower() != "torch"
_NUMPY_DTYPES = (torch.float32, torch.float64)


def _quiet() -> np.errstate:
    return np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore")


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
            with _quiet():  # NaN/inf are the callers' to report (they check the results), as in torch
                np.matmul(a.numpy(), b.numpy(), out=out.numpy())
        else:
            torch.matmul(a, b, out=out)
        return out
    if numpy_path:
        with _quiet():
            return torch.from_numpy(np.matmul(a.numpy(), b.numpy()))
    return a @ b


def svd(m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Thin SVD ``(u, s, vh)`` of a 2-D tensor, by numpy's LAPACK on the CPU when no gradient is needed (gesdd:
    1.2x faster than torch's here on 768 x 768 float64), else ``torch.linalg.svd``."""
    if (
        _NUMPY_GEMM
        and m.device.type == "cpu"
        and m.dtype in _NUMPY_DTYPES
        and not (torch.is_grad_enabled() and m.requires_grad)
    ):
        return tuple(torch.from_numpy(f) for f in np.linalg.svd(m.detach().numpy(), full_matrices=False))
    return torch.linalg.svd(m, full_matrices=False)


def row_norms(t: torch.Tensor, *, squared: bool = False) -> torch.Tensor:
    """Euclidean norm (or, with ``squared``, its square) of every row of a 2-D tensor, shape (n,): float32 for
    float32 and half-precision rows (summed in float32), float64 for float64. Plain ``sqrt(sum x^2)``: callers that
    need exactness at extreme magnitudes check the range (``latentstitch.relative._similarities``). Differentiable."""
    if t.dtype in (torch.float16, torch.bfloat16):
        norms = torch.linalg.vector_norm(t, dim=1, dtype=torch.float32)
    elif (
        _NUMPY_GEMM
        and t.device.type == "cpu"
        and t.dtype in _NUMPY_DTYPES
        and not (torch.is_grad_enabled() and t.requires_grad)
    ):
        rows = t.detach().numpy()
        with _quiet():
            sums = np.einsum("ij,ij->i", rows, rows)
            return torch.from_numpy(sums if squared else np.sqrt(sums))
    else:
        norms = torch.linalg.vector_norm(t, dim=1)
    return norms.square() if squared else norms


def chunk_rows(device: torch.device, bytes_per_row: int, cpu_rows: int) -> int:
    """Rows a chunked computation on ``device`` takes at a time.

    On the CPU, ``cpu_rows``: the caller's cache-sized choice, measured in ``benchmarks/``. On a CUDA device, as many
    rows as half the free device memory holds at ``bytes_per_row`` (the caching allocator's unused blocks count as
    free): kernel launches and waits cost more there than memory, so one large chunk beats many small ones. Other
    accelerators get 16 times the CPU's rows.
    """
    if device.type == "cpu":
        return cpu_rows
    if device.type != "cuda":
        return 16 * cpu_rows
    free, _ = torch.cuda.mem_get_info(device)
    cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return max(cpu_rows, (free + cached) // 2 // max(bytes_per_row, 1))


class HostToDevice:
    """Sends chunks of host memory to a CUDA device so that the copy of one chunk overlaps the computation on the
    previous one.

    ``send(*tensors)`` issues the copies on a side stream of its own (non-blocking: from pinned host memory they run
    on the copy engine while the GPU computes), makes the current stream wait for them on the device, and returns
    the device tensors. The host waits only for the copies of this chunk, never for any computation, so the caller
    may refill or free its host buffers as soon as ``send`` returns. Pinned chunks (``tensor.pin_memory()``,
    ``DataLoader(pin_memory=True)``) are needed for the copies to overlap; pageable memory is copied synchronously,
    as torch does. Tensors already on the device, and devices other than CUDA, are passed through ``.to``.
    """

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self._stream: torch.cuda.Stream | None = None

    def send(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.device.type != "cuda" or all(t.device.type == "cuda" for t in tensors):
            return tuple(t.to(self.device) for t in tensors)
        if self._stream is None:
            self._stream = torch.cuda.Stream(self.device)
        compute = torch.cuda.current_stream(self.device)
        with torch.cuda.stream(self._stream):
            sent = tuple(t.to(self.device, non_blocking=True) for t in tensors)
        copied = torch.cuda.Event()
        copied.record(self._stream)
        compute.wait_event(copied)
        for t in sent:
            t.record_stream(compute)  # the allocator keeps the memory until the computation on it is done
        copied.synchronize()  # this chunk's host memory is free again; the computation still runs on
        return sent


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
