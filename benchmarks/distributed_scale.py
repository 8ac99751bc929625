"""Streaming linear CKA and ``LeastSquares`` over N x 768 float32 rows generated chunk by chunk: a Dask
``LocalCluster`` of worker processes against the single-process loop, both measured in the same run.

Data: pairs ``x`` (N, d) standard normal and ``y = 0.5 roll(x) + noise + 3``, float32, generated chunk by chunk from
a seed per chunk, identically on both paths and never held whole (10M x 768 is 2 x 29 GiB).

- single process (the baseline): a Python loop over the chunks calling ``StreamingCKA.update`` and
  ``LeastSquares.partial_fit`` (which re-solves after every chunk, as a user's loop does; the table shows what
  those solves cost). Peak memory: the benchmark process's peak resident set during the loop.
- cluster: the same chunks as dask arrays (``map_blocks`` of the generator: each task generates its chunk),
  ``StreamingCKA().update(x, y)`` and ``LeastSquares().fit(x, y)`` on a ``LocalCluster`` of ``--workers`` processes
  with one thread each; every chunk becomes d x d float64 statistics on a worker, merged in a tree. Peak memory:
  each worker process's peak resident set (VmHWM, its whole life, imports included), the largest reported.

Targets (issue 10): peak memory per worker under 1 GiB; throughput (rows/s, wall clock) of the cluster against the
single process (ideal: the number of workers, on that many idle cores); results equal (1e-6 relative). CPU seconds
are shown beside wall time: on a shared machine the wall-clock ratio depends on the other load, while the CPU ratio
shows what the distribution itself costs (tasks, transfers, the scheduler).

Full size: ``python -m benchmarks distributed_scale --rows 10000000`` (on 2 cores the single-process loop alone
takes well over an hour); ``--quick`` streams 200,000 rows of width 256.
"""

from __future__ import annotations

import importlib
import time

import numpy as np

RUN_BY_DEFAULT = False  # an hour at full size on two cores: run it by name
SIZES = {"full": (10_000_000, 768), "quick": (200_000, 256)}
SEED = 20_240_101


def add_arguments(parser) -> None:
    group = parser.add_argument_group("distributed_scale")
    group.add_argument("--rows", type=int, default=None, help="rows streamed (default 10,000,000; --quick 200,000)")
    group.add_argument("--chunk", type=int, default=20_000, help="rows per generated chunk (default 20,000)")
    group.add_argument("--workers", type=int, default=2, help="worker processes of the LocalCluster (default 2)")
    group.add_argument(
        "--worker-threads",
        type=int,
        default=1,
        help="BLAS/torch threads per worker (default 1; --threads sets the single process's)",
    )


def generate(index: int, rows: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ``index``: ``rows`` pairs of float32 rows, from seeds of its own."""
    x = _x_chunk(index, rows, d)
    return x, _y_chunk(x, index)


def _x_chunk(index: int, rows: int, d: int) -> np.ndarray:
    return np.random.default_rng([SEED, index, 0]).standard_normal((rows, d), dtype=np.float32)


def _y_chunk(x: np.ndarray, index: int) -> np.ndarray:
    y = np.random.default_rng([SEED, index, 1]).standard_normal(x.shape, dtype=np.float32)
    y += 0.5 * np.roll(x, 1, axis=1)
    y += 3.0
    return y


def chunk_sizes(total: int, chunk: int) -> list[int]:
    return [min(chunk, total - start) for start in range(0, total, chunk)]


def _x_block(d: int, block_info=None) -> np.ndarray:
    (start, stop), _ = block_info[None]["array-location"]
    return _x_chunk(block_info[None]["chunk-location"][0], stop - start, d)


def _y_block(x: np.ndarray, block_info=None) -> np.ndarray:
    return _y_chunk(x, block_info[None]["chunk-location"][0])


def generated_arrays(total: int, chunk: int, d: int):
    """The chunks of ``generate`` as two dask arrays; y's block i is computed from x's block i (one fused task
    per chunk generates both)."""
    import dask.array as da

    meta = np.empty((0, 0), dtype=np.float32)
    x = da.map_blocks(_x_block, d, chunks=(tuple(chunk_sizes(total, chunk)), (d,)), dtype=np.float32, meta=meta)
    return x, x.map_blocks(_y_block, dtype=np.float32, meta=meta)


def peak_rss_mib() -> float:
    """This process's peak resident set size (VmHWM), MiB."""
    with open("/proc/self/status") as status:
        line = next(v for v in status if v.startswith("VmHWM"))
    return int(line.split()[1]) / 1024


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the peak (VmHWM) restarts from the current RSS


def single_process(total: int, chunk: int, d: int) -> dict[str, object]:
    from latentstitch import similarity
    from latentstitch._core.least_squares import solve_least_squares
    from latentstitch.stitching import LeastSquares

    def cka() -> float:
        accumulator = similarity.StreamingCKA()
        for index, rows in enumerate(chunk_sizes(total, chunk)):
            accumulator.update(*generate(index, rows, d))
        return accumulator.compute()

    def least_squares() -> np.ndarray:
        stitch = LeastSquares()
        for index, rows in enumerate(chunk_sizes(total, chunk)):
            stitch.partial_fit(*generate(index, rows, d))
        out["moments"] = stitch.moments_
        return stitch.coef_

    out: dict[str, object] = {}
    reset_peak()
    for key, method in (("cka", cka), ("ls", least_squares)):
        cpu, wall = time.process_time(), time.perf_counter()
        out[key] = method()
        out[f"{key}_s"], out[f"{key}_cpu"] = time.perf_counter() - wall, time.process_time() - cpu
    out["peak_mib"] = peak_rss_mib()
    start = time.perf_counter()
    solve_least_squares(out.pop("moments"))
    out["solve_s"] = time.perf_counter() - start
    return out


def cluster(total: int, chunk: int, d: int, workers: int, threads: int) -> dict[str, object]:
    from benchmarks._harness import set_threads
    from latentstitch import similarity
    from latentstitch.distributed import get_client
    from latentstitch.stitching import LeastSquares

    out: dict[str, object] = {}
    start = time.perf_counter()
    client = get_client(workers=workers)
    try:
        out["worker_threads"] = sorted(set(client.run(set_threads, threads).values()))
        for module in ("latentstitch.stitching", "latentstitch.similarity"):  # imports on the workers, not timed
            client.run(importlib.import_module, module)
        out["start_s"] = time.perf_counter() - start
        x, y = generated_arrays(total, chunk, d)
        methods = {
            "cka": lambda: similarity.StreamingCKA().update(x, y).compute(),
            "ls": lambda: LeastSquares().fit(x, y).coef_,
        }
        for key, method in methods.items():
            # CPU time of the workers, and of this process (which also runs the LocalCluster's scheduler)
            cpu = sum(client.run(time.process_time).values()) + time.process_time()
            wall = time.perf_counter()
            out[key] = method()
            out[f"{key}_s"] = time.perf_counter() - wall
            out[f"{key}_cpu"] = sum(client.run(time.process_time).values()) + time.process_time() - cpu
        out["peak_mib"] = client.run(peak_rss_mib)
    finally:
        client.close()
    return out


def run(args) -> None:
    from benchmarks._harness import print_table

    total, d = SIZES["quick" if args.quick else "full"]
    total = args.rows or total
    chunk = min(args.chunk, total)
    print(f"distributed_scale: {total:,} x {d} float32 pairs in chunks of {chunk:,}; {args.workers} workers")
    single = single_process(total, chunk, d)
    spread = cluster(total, chunk, d, args.workers, args.worker_threads)
    worker_peak = max(spread["peak_mib"].values())
    cka_error = abs(spread["cka"] - single["cka"]) / abs(single["cka"])
    ls_error = float(np.linalg.norm(spread["ls"] - single["ls"]) / np.linalg.norm(single["ls"]))
    n_chunks = len(chunk_sizes(total, chunk))
    rows = []
    for name, key, error in (("StreamingCKA (linear)", "cka", cka_error), ("LeastSquares", "ls", ls_error)):
        one, many = single[f"{key}_s"], spread[f"{key}_s"]
        one_cpu, many_cpu = single[f"{key}_cpu"], spread[f"{key}_cpu"]
        ratios = f"{one / many:.2f}", f"{many_cpu / one_cpu:.2f}"
        rows.append([f"{name}: single process", one, one_cpu, total / one, "1.00", "1.00", single["peak_mib"], ""])
        rows.append([f"{name}: cluster", many, many_cpu, total / many, *ratios, worker_peak, f"{error:.1e}"])
    print_table(
        f"{total:,} x {d} float32 rows in {n_chunks} chunks of {chunk:,}, generated on the fly; cluster: "
        f"{args.workers} worker processes (threads each: {spread['worker_threads']}); single process: "
        f"{args.threads} threads, started in "
        f"{spread['start_s']:.1f} s (not timed); one run. CPU s: of the process, or of the workers + the client "
        "(which runs the scheduler)",
        ["path", "wall s", "CPU s", "rows/s", "throughput / single", "CPU / single", "peak MiB", "rel. diff"],
        rows,
    )
    peaks = ", ".join(f"{v:.0f}" for v in sorted(spread["peak_mib"].values()))
    print(
        f"peak resident MiB per worker: {peaks} (target < 1024). The single-process LeastSquares loop re-solves "
        f"after each of its {n_chunks} partial_fit calls: about {n_chunks * single['solve_s']:.1f} s of its time "
        f"({single['solve_s']:.2f} s per solve); the cluster solves once."
    )
    if total < SIZES["full"][0]:
        scale = SIZES["full"][0] / total
        print(
            f"extrapolated linearly to {SIZES['full'][0]:,} rows: single process "
            f"{(single['cka_s'] + single['ls_s']) * scale / 60:.0f} min, cluster "
            f"{(spread['cka_s'] + spread['ls_s']) * scale / 60:.0f} min (CKA + LeastSquares)"
        )
