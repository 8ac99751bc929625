"""Exact linear and debiased CKA (float32, d = 768 vs 768) against a plain numpy floor and an N x N Gram method.

Floor (``numpy_floor_*``), what any exact feature-space CKA must at least do, all in float32 numpy on the whole
arrays: centre both (``x - x.mean(0)``), form ``Xc^T Yc``, ``Xc^T Xc``, ``Yc^T Yc`` (numpy runs the last two as
SYRK, half a GEMM each) and take Frobenius norms; the debiased floor adds the squared row norms
(``einsum('ij,ij->i')``) and Kornblith et al.'s feature-space correction. Its extra memory is the two centred
copies (O(N d)).

Gram (``gram_*``): the N x N formulation used by popular CKA packages in exact mode, float32 numpy: ``K = Xc Xc^T``,
``L = Yc Yc^T``, ``<K, L> / (|K| |L|)`` (debiased: U-centred K, L). It needs two N x N arrays, so it is skipped when
they would exceed ``GRAM_LIMIT_GIB``, and timed once (no repeat) above N = 5,000.

Ours: ``latentstitch.similarity.cka`` (one ``StreamingCKA``-style update over blocks of rows, float32 products
accumulated in float64; extra memory O(d^2) + one block). Streaming: ``StreamingCKA`` over 1M rows fed in chunks of
10k generated on the fly, peak memory measured by the harness.

Targets (issue 4): ours / floor <= 1.1 at every N for linear and debiased; streaming 1M rows under 1 GiB peak.
"""

from __future__ import annotations

import statistics

import numpy as np

from latentstitch import similarity

SIZES = {"full": ((5_000, 20_000, 50_000), 768), "quick": ((2_000, 5_000), 256)}
STREAM = {"full": (1_000_000, 10_000), "quick": (100_000, 10_000)}
GRAM_LIMIT_GIB = 4.0


def setup(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d), dtype=np.float32)
    y = 0.5 * np.roll(x, 1, axis=1) + rng.standard_normal((n, d), dtype=np.float32) + 3.0
    return x, y


def numpy_floor_linear(inputs: tuple[np.ndarray, np.ndarray]) -> float:
    x, y = inputs
    xc, yc = x - x.mean(0), y - y.mean(0)
    return float(np.linalg.norm(xc.T @ yc) ** 2 / (np.linalg.norm(xc.T @ xc) * np.linalg.norm(yc.T @ yc)))


def numpy_floor_debiased(inputs: tuple[np.ndarray, np.ndarray]) -> float:
    x, y = inputs
    n = x.shape[0]
    xc, yc = x - x.mean(0), y - y.mean(0)
    sx, sy = np.einsum("ij,ij->i", xc, xc), np.einsum("ij,ij->i", yc, yc)

    def hsic(frobenius_sq, a, b):
        return frobenius_sq - n / (n - 2) * a.dot(b) + a.sum() * b.sum() / ((n - 1) * (n - 2))

    xy = hsic(np.linalg.norm(xc.T @ yc) ** 2, sx, sy)
    xx = hsic(np.linalg.norm(xc.T @ xc) ** 2, sx, sx)
    yy = hsic(np.linalg.norm(yc.T @ yc) ** 2, sy, sy)
    return float(xy / np.sqrt(xx * yy))


def gram_linear(inputs: tuple[np.ndarray, np.ndarray]) -> float:
    x, y = inputs
    xc, yc = x - x.mean(0), y - y.mean(0)
    k = xc @ xc.T
    del xc
    gram_y = yc @ yc.T
    return float(np.vdot(k, gram_y) / (np.linalg.norm(k) * np.linalg.norm(gram_y)))


def _u_center(gram: np.ndarray) -> np.ndarray:
    n = gram.shape[0]
    np.fill_diagonal(gram, 0)
    means = gram.sum(0, dtype=np.float64) / (n - 2)
    means -= means.sum() / (2 * (n - 1))
    gram -= means[:, None].astype(gram.dtype)
    gram -= means[None, :].astype(gram.dtype)
    np.fill_diagonal(gram, 0)
    return gram


def gram_debiased(inputs: tuple[np.ndarray, np.ndarray]) -> float:
    x, y = inputs
    k = _u_center(x @ x.T)
    gram_y = _u_center(y @ y.T)
    return float(np.vdot(k, gram_y) / (np.linalg.norm(k) * np.linalg.norm(gram_y)))


def latentstitch_linear(inputs: tuple[np.ndarray, np.ndarray]) -> float:
    return similarity.cka(*inputs)


def latentstitch_debiased(inputs: tuple[np.ndarray, np.ndarray]) -> float:
    return similarity.cka(*inputs, debiased=True)


def setup_stream(rows: int, chunk: int, d: int) -> dict[str, int]:
    return {"rows": rows, "chunk": chunk, "d": d}


def _stream(spec: dict[str, int], debiased: bool) -> float:
    accumulator = similarity.StreamingCKA(debiased=debiased)
    for start in range(0, spec["rows"], spec["chunk"]):
        accumulator.update(*setup_chunk(start, spec["chunk"], spec["d"]))
    return accumulator.compute()


def setup_chunk(start: int, rows: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(start)
    x = rng.standard_normal((rows, d), dtype=np.float32)
    return x, 0.5 * np.roll(x, 1, axis=1) + rng.standard_normal((rows, d), dtype=np.float32) + 3.0


def stream_linear(spec: dict[str, int]) -> float:
    return _stream(spec, debiased=False)


def stream_debiased(spec: dict[str, int]) -> float:
    return _stream(spec, debiased=True)


def _row(variant: str, n: int, d: int, args) -> list:
    from benchmarks._harness import interleaved_times, median_ratio, median_time, peak_memory_mib

    floor, ours, gram = (globals()[f"{kind}_{variant}"] for kind in ("numpy_floor", "latentstitch", "gram"))
    inputs = setup(n, d)
    error = abs(ours(inputs) - floor(inputs))
    memory = {f: peak_memory_mib(__name__, "setup", f.__name__, args.threads, n=n, d=d) for f in (floor, ours)}
    rounds = interleaved_times({"floor": lambda: floor(inputs), "ours": lambda: ours(inputs)}, args.repeats)
    times = {floor: statistics.median(rounds["floor"]), ours: statistics.median(rounds["ours"])}
    gram_gib = 2 * n * n * 4 / 2**30
    if gram_gib <= GRAM_LIMIT_GIB:
        small = n <= 5_000
        gram_time = median_time(lambda: gram(inputs), args.repeats if small else 1, warmup=1 if small else 0)
        gram_memory = peak_memory_mib(__name__, "setup", gram.__name__, args.threads, n=n, d=d)
        gram_cells = [gram_time, gram_time / times[floor], gram_memory]
    else:
        gram_cells = [f"skipped (needs >= {gram_gib:.0f} GiB)", "-", "-"]
    return [
        f"{n:,}",
        times[floor],
        memory[floor],
        times[ours],
        median_ratio(rounds, "ours", "floor"),
        memory[ours],
        *gram_cells,
        f"{error:.1e}",
    ]


def run(args) -> None:
    from benchmarks._harness import median_time, peak_memory_mib, print_table

    sizes, d = SIZES["quick" if args.quick else "full"]
    header = ["N", "floor s", "floor MiB", "ours s", "ours / floor", "ours MiB", "gram s", "gram / floor", "gram MiB"]
    for variant in ("linear", "debiased"):
        print_table(
            f"{variant} CKA, float32, d={d} vs {d}; medians of {args.repeats} interleaved rounds of floor and ours "
            "(ours / floor: median of the per-round ratios; Gram above 5k: one run); MiB = peak memory added",
            [*header, "|ours - floor|"],
            [_row(variant, n, d, args) for n in sizes],
        )

    total, chunk = STREAM["quick" if args.quick else "full"]
    spec = setup_stream(total, chunk, d)
    rows = []
    for method in (stream_linear, stream_debiased):
        seconds = median_time(lambda method=method: method(spec), 1, warmup=0)
        memory = peak_memory_mib(__name__, "setup_stream", method.__name__, args.threads, rows=total, chunk=chunk, d=d)
        rows.append([method.__name__, seconds, memory, f"{total * d * 4 * 2 / 2**30:.1f} GiB"])
    print_table(
        f"StreamingCKA over {total:,} rows in chunks of {chunk:,} (generated on the fly), d={d}; one run",
        ["method", "seconds", "peak extra MiB", "data streamed"],
        rows,
    )
