"""Fitting stitching layers (float32 activations, N=200k, 768 -> 768) against numpy's and scipy's solvers.

Baselines, measured in the same run: ``numpy.linalg.lstsq`` (LAPACK gelsd; numpy solves float32 data in float64) for
``LeastSquares``, and ``scipy.linalg.orthogonal_procrustes`` for ``Procrustes``. Also shown:
``torch.linalg.lstsq`` with its default cutoff (what a popular peer library calls), which silently drops
directions at large N. Error: relative Frobenius error of the fitted map against a float64 solution computed here
independently (float64 normal equations accumulated with numpy; the data's condition number is printed, so the
reference's own error, about cond^2 * 1e-16, can be read off).

Times: wall-clock (the harness's measure) and CPU seconds of this process, the methods of a group called in turn
round after round; ratios are medians of the per-round ratios. Every method runs on one thread here, so on a quiet
machine the two agree; on a shared one the CPU time is the steadier of the two.

Targets (issue 3): LeastSquares <= 0.35x lstsq's time, <= 1e-6 error, peak memory independent of N;
Procrustes <= 1.0x scipy's time. Full size: ``python -m benchmarks stitching_fit --threads 1 --repeats 1``
(about 5 minutes on one core, lstsq alone 30-45 s and 4.7 GB).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import scipy.linalg
import torch

from latentstitch.stitching import LeastSquares, Procrustes

SIZES = {"full": (200_000, 768, 768), "quick": (20_000, 256, 256)}
_ROWS = 8192  # rows generated (and, for the reference, accumulated) at a time


def setup(n: int, d: int, q: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Correlated float32 activations (condition number 100) and a noisy affine function of them, made chunkwise."""
    rng = np.random.default_rng(seed)
    left = np.linalg.qr(rng.standard_normal((d, d)))[0]
    mixing = (left * np.geomspace(1.0, 0.01, d)).astype(np.float32) @ np.linalg.qr(rng.standard_normal((d, d)))[0].T
    mixing = mixing.astype(np.float32)
    offset = rng.standard_normal(d).astype(np.float32)
    true_map = (rng.standard_normal((d, q)) / np.sqrt(d)).astype(np.float32)
    a = np.empty((n, d), dtype=np.float32)
    b = np.empty((n, q), dtype=np.float32)
    for start in range(0, n, _ROWS):
        stop = min(start + _ROWS, n)
        a[start:stop] = rng.standard_normal((stop - start, d), dtype=np.float32) @ mixing + offset
        b[start:stop] = a[start:stop] @ true_map + 0.1 * rng.standard_normal((stop - start, q), dtype=np.float32)
    return a, b


def numpy_lstsq(inputs):
    a, b = inputs
    return np.linalg.lstsq(a, b, rcond=None)[0]


def torch_lstsq(inputs):
    a, b = inputs
    return torch.linalg.lstsq(torch.from_numpy(a), torch.from_numpy(b)).solution.numpy()


def least_squares(inputs):
    return LeastSquares(bias=False).fit(*inputs).coef_


def least_squares_bias(inputs):
    return LeastSquares().fit(*inputs).coef_


def scipy_procrustes(inputs):
    return scipy.linalg.orthogonal_procrustes(*inputs)[0]


def procrustes(inputs):
    return Procrustes().fit(*inputs).coef_


def interleaved_wall_and_cpu(fns, repeats: int, warmup: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall-clock and process CPU times of every function over ``repeats`` interleaved rounds (each round calls
    each function once, in turn), after ``warmup`` rounds: load on a shared machine then hits all methods alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - start_wall)
            cpu[name].append(time.process_time() - start_cpu)
    return wall, cpu


def float64_references(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """Float64 solutions by plain numpy: normal equations (raw and centred) and the Procrustes polar factor."""
    d = a.shape[1]
    aa, ab = np.zeros((d, d)), np.zeros((d, b.shape[1]))
    sum_a, sum_b = np.zeros(d), np.zeros(b.shape[1])
    for start in range(0, a.shape[0], _ROWS):
        chunk_a, chunk_b = a[start : start + _ROWS].astype(np.float64), b[start : start + _ROWS].astype(np.float64)
        aa += chunk_a.T @ chunk_a
        ab += chunk_a.T @ chunk_b
        sum_a, sum_b = sum_a + chunk_a.sum(0), sum_b + chunk_b.sum(0)
    n = a.shape[0]
    centred_aa, centred_ab = aa - np.outer(sum_a, sum_a) / n, ab - np.outer(sum_a, sum_b) / n
    u, _, vt = np.linalg.svd(ab)
    return {
        "raw": np.linalg.solve(aa, ab),
        "centred": np.linalg.solve(centred_aa, centred_ab),
        "procrustes": u @ vt,
        "condition": _condition(aa),
        "centred_condition": _condition(centred_aa),
    }


def _condition(gram: np.ndarray) -> float:
    eigenvalues = np.linalg.eigvalsh(gram)
    return float(np.sqrt(eigenvalues[-1] / eigenvalues[0]))


def run(args) -> None:
    from benchmarks._harness import median_ratio, peak_memory_mib, print_table, set_threads

    # Pin again: scipy's own OpenBLAS is loaded by this module's import, after the runner pinned the others
    print(set_threads(args.threads))
    n, d, q = SIZES["quick" if args.quick else "full"]
    inputs = setup(n, d, q)
    references = float64_references(*inputs)
    groups = [
        ("numpy_lstsq", [numpy_lstsq, least_squares, least_squares_bias, torch_lstsq]),
        ("scipy_procrustes", [scipy_procrustes, procrustes]),
    ]
    reference_of = {"least_squares_bias": "centred", "scipy_procrustes": "procrustes", "procrustes": "procrustes"}
    warmup = 1 if args.quick else 0
    rows = []
    for baseline, methods in groups:
        errors = {}
        for method in methods:
            reference = references[reference_of.get(method.__name__, "raw")]
            errors[method.__name__] = float(np.linalg.norm(method(inputs) - reference) / np.linalg.norm(reference))
        wall, cpu = interleaved_wall_and_cpu({m.__name__: lambda m=m: m(inputs) for m in methods}, args.repeats, warmup)
        memory = {
            m.__name__: peak_memory_mib(__name__, "setup", m.__name__, args.threads, n=n, d=d, q=q) for m in methods
        }
        for name in wall:
            rows.append(
                [
                    name,
                    statistics.median(wall[name]),
                    median_ratio(wall, name, baseline),
                    statistics.median(cpu[name]),
                    median_ratio(cpu, name, baseline),
                    memory[name],
                    memory[name] / memory[baseline],
                    f"{errors[name]:.1e}",
                ]
            )
    small = peak_memory_mib(__name__, "setup", "least_squares", args.threads, n=n // 4, d=d, q=q)
    print_table(
        f"Stitching fit, float32 N={n:,} {d} -> {q}; medians of {args.repeats} interleaved rounds (ratios: median "
        f"of the per-round ratios); cond(A) = "
        f"{references['condition']:.0f} ({references['centred_condition']:.0f} centred); ratios against "
        "numpy_lstsq (least squares) and scipy_procrustes",
        [
            "method",
            "seconds",
            "time / baseline",
            "CPU s",
            "CPU / baseline",
            "peak extra MiB",
            "memory / baseline",
            "rel. error vs float64",
        ],
        rows,
    )
    print(f"LeastSquares peak extra memory at N/4 = {n // 4:,}: {small:.0f} MiB (independent of N)")
