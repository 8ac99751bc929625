"""Device-aware checking and data movement.

Checking a tensor's values (finite? zero rows?) needs a read of the result on the host. On the CPU that read is
free; on an accelerator it waits for the device. ``check_finite`` reads at once on the CPU and, on an
accelerator, records a flag in the active ``collect_flags`` context (``DeferredChecks``) so that a whole
computation waits once at its end. ``chunk_rows`` sizes chunked computations to the device, ``HostToDevice``
overlaps host-to-device copies with computation, ``set_threads`` sets the CPU thread count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch

from latentstitch._core.errors import NonFiniteError
from latentstitch._core.params import check_positive_int


def _sum_dtype(t: torch.Tensor) -> torch.dtype:
    # Half-precision sums overflow float16's range (65504) long before the data holds an inf.
    return torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else t.dtype


def finite_flag(t: torch.Tensor) -> torch.Tensor:
    """A 0-d boolean tensor on ``t``'s device: true when ``t`` holds no NaN or inf (reading it is the only sync).

    Any NaN or inf makes the sum non-finite, and a sum is one vectorised pass (``torch.isfinite`` on the CPU is
    ~40x slower). A sum of finite values can overflow: a false flag is a hint, confirmed by ``check_finite``.
    """
    return torch.isfinite(t.sum(dtype=_sum_dtype(t)))


def check_finite(t: torch.Tensor, name: str, *, row_offset: int = 0, checks: DeferredChecks | None = None) -> None:
    """Raise a ``NonFiniteError`` naming ``name`` and the first row holding NaN or inf.

    With ``checks``, the test is queued on the device (``DeferredChecks.add``) and the error is raised when the
    checks are resolved, still naming the first bad row; on the CPU it runs at once either way.
    """
    if t.numel() == 0:
        return

    def locate() -> None:
        ok = torch.isfinite(t)
        if bool(ok.all()):
            return  # the sum overflowed; the values are finite
        bad = (~ok).reshape(t.shape[0], -1).any(dim=1).nonzero()[0, 0].item() if t.ndim > 0 else 0
        raise NonFiniteError(name, bad + row_offset)

    if checks is None or reading_is_free(t.device):
        if not bool(finite_flag(t)):
            locate()
        return
    # Deferred: find the first bad row on the device now (an exact pass, cheap there), keeping only that index, so
    # that the data need not stay alive until the checks are resolved.
    rows_ok = torch.isfinite(t.reshape(t.shape[0], -1)).all(dim=1) if t.ndim > 0 else torch.isfinite(t)[None]
    first = (~rows_ok).int().argmax()
    ok = rows_ok.all()

    def report() -> None:
        raise NonFiniteError(name, int(first) + row_offset)

    checks.add(ok, report)


# --- checks that do not stall the device -----------------------------------------------------------------------

# Tests set this to run the accelerator paths on the CPU: checks deferred, no loop stopped early by reading a flag.
DEFER_ON_CPU = False


def reading_is_free(device: torch.device) -> bool:
    """Whether reading a tensor of ``device`` on the host costs nothing (the CPU): code may then check flags and stop
    loops early. On an accelerator a read waits for every queued kernel, so such code takes its no-wait path."""
    return device.type == "cpu" and not DEFER_ON_CPU


class DeferredChecks:
    """Checks whose outcome is a device flag, read together with one host synchronisation.

    Reading a GPU tensor on the host (``bool(flag)``, ``.item()``) waits for every queued kernel, so a check per
    chunk of a computation serialises the host and the device (issue 21 measured 736 such waits in one projection).
    ``add(ok, on_failure)`` queues a 0-d boolean tensor; ``resolve()`` reads all queued flags at once and, for each
    false one in the order they were added, calls its ``on_failure``, which raises the precise error (naming the
    first bad row) or repairs the result it guards. Flags on the CPU, where reading costs nothing, are read at once,
    so CPU errors surface before any further work.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[torch.Tensor, Callable[[], None]]] = []

    def add(self, ok: torch.Tensor, on_failure: Callable[[], None]) -> None:
        if reading_is_free(ok.device):
            if not bool(ok):
                on_failure()
            return
        self._pending.append((ok.reshape(()), on_failure))

    def __len__(self) -> int:
        return len(self._pending)

    def resolve(self) -> None:
        """Read every queued flag (one synchronisation per device) and handle the failures in order."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        device = pending[0][0].device
        if bool(torch.stack([ok.to(device) for ok, _ in pending]).all()):
            return
        for ok, on_failure in pending:
            if not bool(ok):
                on_failure()


_FLAGS: ContextVar[list[torch.Tensor] | None] = ContextVar("latentstitch_validity_flags", default=None)


@contextmanager
def collect_flags() -> Iterator[list[torch.Tensor]]:
    """Within the block, ``report_flag`` hands its flags to the yielded list instead of asking for a check now.

    A chunked computation uses it to learn, without waiting for the device, whether a function's fast path was
    valid for a chunk (e.g. the cosine similarity's row norms were within the range its arithmetic is exact in);
    the caller then checks the flags once and redoes only the failing chunks carefully.
    """
    flags: list[torch.Tensor] = []
    token = _FLAGS.set(flags)
    try:
        yield flags
    finally:
        _FLAGS.reset(token)


def report_flag(ok: torch.Tensor) -> bool:
    """Give ``ok`` (0-d boolean: "the fast path was valid") to the enclosing ``collect_flags`` block. Returns
    False when there is none: the caller then reads the flag itself and falls back to its careful path."""
    flags = _FLAGS.get()
    if flags is None:
        return False
    flags.append(ok.reshape(()))
    return True


@contextmanager
def careful_mode() -> Iterator[None]:
    """Inside, ``report_flag`` finds no collector: functions check themselves and take their careful paths."""
    token = _FLAGS.set(None)
    try:
        yield
    finally:
        _FLAGS.reset(token)


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

    threads = check_positive_int(threads, "threads")
    torch.set_num_threads(threads)
    threadpool_limits(threads)
    pools = ", ".join(f"{p['internal_api']}={p['num_threads']}" for p in threadpool_info())
    return f"threads: torch={torch.get_num_threads()}, {pools}"
