"""Shared measuring tools for the benchmarks: thread control, medians of repeated runs, peak memory.

Every benchmark measures its baseline in the same run and prints ratios, so numbers from different machines are
comparable only as ratios. On a shared machine, load comes and goes: ``interleaved_times`` calls the methods in turn,
round after round, so that a burst of load hits them alike, and ``median_ratio`` takes the median of the per-round
ratios, which stays steady where absolute times do not. Peak memory is measured in a fresh subprocess per method:
the growth of the process's maximum resident set size while the method runs, over the level after its inputs were
built.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any


def set_threads(threads: int) -> str:
    """Pin torch and every BLAS/OpenMP pool to ``threads``; return a line describing the setting."""
    from latentstitch._core.device import set_threads as pin

    return pin(threads)


def median_time(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_times(
    fns: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1, clock: Callable[[], float] = time.perf_counter
) -> dict[str, list[float]]:
    """Times of every function over ``repeats`` rounds, each round calling every function once in turn, after
    ``warmup`` untimed rounds. ``clock``: ``time.perf_counter`` (wall) or ``time.process_time`` (CPU time of this
    process, steadier on a shared machine when everything runs on one thread)."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return times


def median_ratio(times: dict[str, list[float]], name: str, baseline: str) -> float:
    """The median over rounds of ``name``'s time over ``baseline``'s time in the same round."""
    return statistics.median(t / b for t, b in zip(times[name], times[baseline], strict=True))


def peak_memory_mib(module: str, setup: str, method: str, threads: int, **kwargs: Any) -> float:
    """Run ``module.setup(**kwargs)`` then ``module.method(inputs)`` in a fresh Python; return the MiB the
    method added to the peak resident set size (Linux: the peak is reset through /proc/self/clear_refs after the
    inputs are built, then read from VmHWM)."""
    code = (
        "import json, sys, importlib\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r})\n"
        "from benchmarks._harness import set_threads\n"
        f"set_threads({threads})\n"
        f"m = importlib.import_module({module!r})\n"
        f"inputs = m.{setup}(**json.loads({json.dumps(kwargs)!r}))\n"
        "def status(key):\n"
        "    line = next(v for v in open('/proc/self/status') if v.startswith(key))\n"
        "    return int(line.split()[1])\n"
        "open('/proc/self/clear_refs', 'w').write('5')  # reset the peak (VmHWM) to the current RSS\n"
        "before = status('VmRSS')\n"
        f"result = m.{method}(inputs)\n"
        "print(json.dumps((status('VmHWM') - before) / 1024))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"memory measurement of {module}.{method} failed:\n{done.stderr}")
    return float(done.stdout.strip().splitlines()[-1])


def print_table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in header:
        table.add_column(column, justify="right" if column != header[0] else "left")
    for row in rows:
        table.add_row(*[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row])
    Console(width=max(120, Console().width)).print(table)
