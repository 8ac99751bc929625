"""Permutation nulls: batched (``permutation_test``) against the naive loop of one measure call per permutation.

For linear CKA, debiased CKA and mutual k-NN at N=50,000, d=768 (float32; ``--quick``: N=5,000, d=256), the time
for ``--permutations`` (1,000) permutations:

- ours: ``similarity.permutation_test(x, y, measure, permutations=...)``, one thread. Feature-space CKA batches the
  permutations as one GEMM ``Xc^T [P_1 Yc | ... | P_B Yc]`` per block of rows and never recomputes ``Xc^T Xc`` and
  ``Yc^T Yc``; mutual k-NN computes both neighbour lists once and relabels y's for every permutation.
- baseline: the naive loop ``for perm in perms: measure(x, y[perm])`` (``cka``, ``cka(debiased=True)``,
  ``mutual_knn``). At full size it takes hours (mutual k-NN: two exact 50k x 50k neighbour searches per call), so
  only ``--naive-calls`` calls (default 10; mutual k-NN 3) are timed and the total is extrapolated linearly (each
  call does the same work); the output says so.

``--batched-subset B`` times only the first B permutations of ours and extrapolates too (for a busy machine); by
default all of them run. The same is repeated on CUDA tensors when a GPU is visible (torch.cuda.is_available());
otherwise that part is skipped with a message. Every null value of ours is checked against the naive one on the
measured permutations.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from latentstitch import similarity
from latentstitch.similarity._resampling import Permutations

RUN_BY_DEFAULT = False  # about an hour at full size on one thread: run it by name
SIZES = {"full": (50_000, 768), "quick": (5_000, 256)}
MEASURES = {
    "linear_cka": (lambda x, y: similarity.cka(x, y), 10),
    "debiased_cka": (lambda x, y: similarity.cka(x, y, debiased=True), 10),
    "mutual_knn": (lambda x, y: similarity.mutual_knn(x, y), 3),
}


def add_arguments(parser) -> None:
    group = parser.add_argument_group("permutation_null")
    group.add_argument("--permutations", type=int, default=1000, help="permutations of the null (default 1,000)")
    group.add_argument(
        "--naive-calls", type=int, default=None, help="naive calls timed and extrapolated (default 10; mutual k-NN 3)"
    )
    group.add_argument(
        "--batched-subset", type=int, default=None, help="time only this many batched permutations and extrapolate"
    )
    group.add_argument("--measures", nargs="*", default=list(MEASURES), help=f"of {', '.join(MEASURES)}")


def setup(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d), dtype=np.float32)
    y = 0.5 * np.roll(x, 1, axis=1) + rng.standard_normal((n, d), dtype=np.float32) + 3.0
    return x, y


def time_batched(x, y, name: str, permutations: int, subset: int | None) -> tuple[float, float, np.ndarray, str]:
    """(seconds for all permutations, seconds measured, the measured null, how)."""
    count = permutations if subset is None else min(subset, permutations)
    start = time.perf_counter()
    result = similarity.permutation_test(x, y, name, permutations=count)
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    measured = time.perf_counter() - start
    assert result.batched, name
    how = "all run" if count == permutations else f"{count} run, extrapolated"
    return measured * permutations / count, measured, result.null, how


def time_naive(x, y, name: str, permutations: int, calls: int) -> tuple[float, float, np.ndarray]:
    fn = MEASURES[name][0]
    perms = next(Permutations(x.shape[0], 0).batches(calls, calls))  # the first permutations of permutation_test
    values = []
    start = time.perf_counter()
    for perm in perms:
        values.append(float(fn(x, y[perm.to(x.device)])))
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    measured = time.perf_counter() - start
    return measured * permutations / calls, measured, np.array(values)


def _rows(x, y, args, device: str) -> list[list]:
    rows = []
    for name in args.measures:
        print(f"  measuring {name} on {device}...", flush=True)
        calls = args.naive_calls or MEASURES[name][1]
        naive_total, naive_measured, naive_null = time_naive(x, y, name, args.permutations, calls)
        ours_total, _, ours_null, how = time_batched(x, y, name, args.permutations, args.batched_subset)
        error = float(np.abs(ours_null[:calls] - naive_null).max())
        rows.append(
            [
                f"{name} ({device})",
                f"{naive_total:.1f} (from {calls} calls: {naive_measured:.1f} s)",
                f"{ours_total:.1f} ({how})",
                naive_total / ours_total,
                f"{error:.1e}",
            ]
        )
        print("  " + " | ".join(str(cell) for cell in rows[-1]), flush=True)  # each row as soon as it is measured
    return rows


def run(args) -> None:
    from benchmarks._harness import print_table

    n, d = SIZES["quick" if args.quick else "full"]
    x, y = (torch.from_numpy(v) for v in setup(n, d))
    header = ["measure", "naive loop s (extrapolated)", "ours s", "speed-up", "max |ours - naive| on measured"]
    title = (
        f"{args.permutations:,} permutations, N={n:,}, d={d} vs {d}, float32, {torch.get_num_threads()} thread(s): "
        "naive = one call per permutation (a measured subset, extrapolated linearly)"
    )
    print_table(title, header, _rows(x, y, args, "cpu"))
    if torch.cuda.is_available():
        xg, yg = x.cuda(), y.cuda()
        print_table(title.replace("thread(s)", "thread(s), CUDA"), header, _rows(xg, yg, args, "cuda"))
    else:
        print("CUDA: no GPU visible (torch.cuda.is_available() is False); the GPU part was skipped.")
