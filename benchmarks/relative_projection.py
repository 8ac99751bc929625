"""relative_projection (cosine, float32) against a plain numpy normalise-then-matmul of the same shape.

Floor: ``(x / |x|) @ (a / |a|).T`` in numpy, the least work any cosine projection can do. Also shown: the same in
torch (the path a torch-only library takes), and ours with every product kept in torch
(``LATENTSTITCH_CPU_GEMM=torch``), so the effect of routing CPU products to numpy's BLAS is visible.
Target (issue 2): time ratio <= 1.1 and extra peak memory no more than the floor's.
"""

from __future__ import annotations

import statistics

import numpy as np
import torch
from torch.nn.functional import normalize

import latentstitch._core.numerics as backend
from latentstitch import relative_projection

SIZES = {"full": (100_000, 768, 768), "quick": (20_000, 256, 256)}


def setup(n: int, d: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, d), dtype=np.float32), rng.standard_normal((m, d), dtype=np.float32)


def numpy_floor(inputs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    x, a = inputs
    return (x / np.linalg.norm(x, axis=1, keepdims=True)) @ (a / np.linalg.norm(a, axis=1, keepdims=True)).T


def torch_plain(inputs: tuple[np.ndarray, np.ndarray]) -> torch.Tensor:
    x, a = (torch.from_numpy(v) for v in inputs)
    return normalize(x, dim=1) @ normalize(a, dim=1).T


def latentstitch(inputs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return relative_projection(*inputs)


def latentstitch_torch_gemm(inputs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    backend._NUMPY_GEMM = False
    try:
        return relative_projection(*inputs)
    finally:
        backend._NUMPY_GEMM = True


def run(args) -> None:
    from benchmarks._harness import interleaved_times, median_ratio, peak_memory_mib, print_table

    n, d, m = SIZES["quick" if args.quick else "full"]
    inputs = setup(n, d, m)
    reference = numpy_floor(inputs)
    error = float(np.abs(latentstitch(inputs) - reference).max())
    methods = [numpy_floor, latentstitch, latentstitch_torch_gemm, torch_plain]
    times = interleaved_times({f.__name__: lambda f=f: f(inputs) for f in methods}, args.repeats)
    memory = {f.__name__: peak_memory_mib(__name__, "setup", f.__name__, args.threads, n=n, d=d, m=m) for f in methods}
    floor_memory = memory["numpy_floor"]
    rows = [
        [name, statistics.median(times[name]), median_ratio(times, name, "numpy_floor"), memory[name],
         memory[name] / floor_memory]
        for name in times
    ]  # fmt: skip
    print_table(
        f"relative_projection cosine float32, N={n:,} d={d} |A|={m}; medians of {args.repeats} interleaved rounds "
        f"(time / floor: median of the per-round ratios); max |ours - floor| = {error:.1e}; output alone = "
        f"{n * m * 4 / 2**20:.0f} MiB",
        ["method", "seconds", "time / floor", "peak extra MiB", "memory / floor"],
        rows,
    )
