"""Permutation nulls: batched (``permutation_test``) against the naive loop of one measure call per permutation.

For linear CKA, debiased CKA and mutual k-NN at N=50,000, d=768 (float32; ``--quick``: N=5,000, d=256), the time
for ``--permutations`` (1,000) permutations:

- ours: what ``similarity.permutation_test(x, y, measure, permutations=...)`` does: the measure on the data and the
  batched null's set-up (``setup``: centred copies and fixed moments for CKA; both neighbour lists for mutual k-NN),
  then one batch of B permutations after another. Feature-space CKA computes a batch as one GEMM
  ``Xc^T [P_1 Yc | ... | P_B Yc]`` per block of rows and never recomputes ``Xc^T Xc`` and ``Yc^T Yc``; mutual k-NN
  relabels y's neighbour lists instead of two new 50k x 50k searches.
- baseline: the naive loop ``for perm in perms: measure(x, y[perm])`` (``cka``, ``cka(debiased=True)``,
  ``mutual_knn``).

Neither is run to the end at full size on a shared machine (the naive loops take hours: mutual k-NN does two exact
neighbour searches per call). ``--rounds`` rounds (default 10; mutual k-NN 2) each time one batch of ours and one
naive call, interleaved so that both see the same load, and the totals are extrapolated from the medians:
``ours = setup + median(batch) * ceil(permutations / B)``, ``naive = median(call) * permutations``; the output says
so. Every measured naive value is checked against the batched one for the same permutation. The same runs on CUDA
tensors when a GPU is visible (``torch.cuda.is_available()``); otherwise that part is skipped with a message.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
import torch

from latentstitch import similarity
from latentstitch.similarity._null_kernels import batch_size_for, null_kernel
from latentstitch.similarity._resampling import Permutations

RUN_BY_DEFAULT = False  # 35 minutes at full size on one (busy) thread: run it by name
SIZES = {"full": (50_000, 768), "quick": (5_000, 256)}
MEASURES = {
    "linear_cka": (lambda x, y: similarity.cka(x, y), 10),
    "debiased_cka": (lambda x, y: similarity.cka(x, y, debiased=True), 10),
    "mutual_knn": (lambda x, y: similarity.mutual_knn(x, y), 2),
}


def add_arguments(parser) -> None:
    group = parser.add_argument_group("permutation_null")
    group.add_argument("--permutations", type=int, default=1000, help="permutations of the null (default 1,000)")
    group.add_argument(
        "--rounds", type=int, default=None, help="interleaved rounds measured (default 10; mutual k-NN 2)"
    )
    group.add_argument("--measures", nargs="*", default=list(MEASURES), help=f"of {', '.join(MEASURES)}")


def setup(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d), dtype=np.float32)
    y = 0.5 * np.roll(x, 1, axis=1) + rng.standard_normal((n, d), dtype=np.float32) + 3.0
    return x, y


def _timed(fn, device: torch.device):
    start = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return out, time.perf_counter() - start


def measure(x: torch.Tensor, y: torch.Tensor, name: str, permutations: int, rounds: int) -> list:
    spec = similarity.MEASURES[name]
    naive = MEASURES[name][0]
    device = x.device
    kernel, setup_seconds = _timed(lambda: (float(spec(x, y)), null_kernel(spec, x, y, {}))[1], device)
    size = batch_size_for(x.shape[1], y.shape[1])
    batches = Permutations(x.shape[0], 0).batches(rounds * size, size)  # permutation_test's first batches
    batch_times, call_times, errors = [], [], []
    for _ in range(rounds):
        perms = next(batches).to(device)
        null, seconds = _timed(lambda perms=perms: kernel(perms), device)
        batch_times.append(seconds)
        value, seconds = _timed(lambda perms=perms: float(naive(x, y[perms[0]])), device)
        call_times.append(seconds)
        errors.append(abs(float(null[0]) - value))
    ours = setup_seconds + statistics.median(batch_times) * math.ceil(permutations / size)
    baseline = statistics.median(call_times) * permutations
    return [
        f"{name} ({device.type})",
        f"{baseline:.0f} (call {statistics.median(call_times):.2f})",
        f"{ours:.0f} (setup {setup_seconds:.1f} + batch of {size} {statistics.median(batch_times):.2f})",
        baseline / ours,
        f"{max(errors):.1e}",
    ]


def run(args) -> None:
    from benchmarks._harness import print_table

    n, d = SIZES["quick" if args.quick else "full"]
    x, y = (torch.from_numpy(v) for v in setup(n, d))
    header = ["measure", "naive loop s (median call)", "ours s (set-up + median batch)", "speed-up", "max |ours-naive|"]
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    for device in devices:
        xd, yd = x.to(device), y.to(device)
        rows = []
        for name in args.measures:
            rounds = args.rounds or MEASURES[name][1]
            rows.append(measure(xd, yd, name, args.permutations, rounds))
            print("  " + " | ".join(str(cell) for cell in rows[-1]), flush=True)  # each as soon as it is measured
        print_table(
            f"{args.permutations:,} permutations, N={n:,}, d={d} vs {d}, float32, {device.type}, "
            f"{torch.get_num_threads()} thread(s); totals extrapolated from interleaved rounds (one batch of ours, "
            "one naive call each)",
            header,
            rows,
        )
    if not torch.cuda.is_available():
        print("CUDA: no GPU visible (torch.cuda.is_available() is False); the GPU part was skipped.")
