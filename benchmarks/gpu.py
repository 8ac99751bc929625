"""The core computations on a GPU against plain torch floors on the same device, in the same run (issue 21).

``python -m benchmarks gpu`` prints one row per computation: our time and the floor's (medians of interleaved
repeats, each timed with CUDA events around the call, so the GPU work is counted and not only its launch), their
ratio (the median of the per-round ratios), the peak device memory each adds (``torch.cuda.max_memory_allocated``
over the level before the call), and each one's relative error against a float64 computation of the same inputs
(Frobenius norm of the difference over the reference's; the first 65,536 rows for the projections). Shapes: N = 2M
rows, d = 768 features, 768 anchors, float32 data; TF32 as torch's settings have it (off by default; printed).

Floors (the least work any implementation of the computation must do):

- relative_projection cosine: ``normalize(x) @ normalize(anchors).T``; bfloat16 in: the same in bfloat16.
- linear CKA: centre x and y, the three feature-space GEMMs, Frobenius norms; debiased CKA: plus the squared row
  norms and Kornblith's feature-space correction.
- LeastSquares.fit: the centred normal equations (float32 GEMMs), solved in float64.
- Procrustes.fit: the SVD of ``A^T B`` (float32 GEMM), ``U V^T``.
- StreamingCKA from pinned host memory, in chunks: each chunk's copy to the device and its cross GEMM. Also shown:
  the pinned copies alone, and our throughput as a fraction of their bandwidth.
- RelativeProjection forward + backward on 64k rows: ``normalize`` + matmul, forward and backward.
- TopologicalDensificationLoss forward + backward on 8 clouds of 64 points in 768 dimensions: ``cdist`` and the
  batched minimum spanning trees (``losses._topological.minimum_spanning_trees``) of the same batch, the work any
  such loss needs; ``cdist`` alone is shown beside.

Targets: projections and CKA <= 1.1x; the fits <= 1.3x; streaming >= 80% of the copy bandwidth; the topological loss
<= 3x. Where no CUDA device is visible, the benchmark says so and exits; ``--device cpu --quick`` runs the same code
on the CPU (wall-clock timing, no device memory) to check it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.functional import normalize

SIZES = {
    "full": {"n": 2_000_000, "d": 768, "m": 768, "module_rows": 65_536, "chunk": 131_072, "clouds": (8, 64, 768)},
    "quick": {"n": 100_000, "d": 256, "m": 256, "module_rows": 8_192, "chunk": 16_384, "clouds": (4, 32, 64)},
}
ERROR_ROWS = 65_536


def add_arguments(parser) -> None:
    group = parser.add_argument_group("gpu")
    group.add_argument(
        "--device",
        default="cuda",
        help="torch device of the gpu benchmark (default cuda; cpu runs the same code, to check it)",
    )


# --- measuring ---------------------------------------------------------------------------------------------------


class _Clock:
    """Seconds of one call: CUDA events around it on a GPU (the host waits for the end event), else wall time."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def __call__(self, fn: Callable[[], Any]) -> float:
        self.sync()
        if not self.cuda:
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / 1e3


def _interleaved(fns: dict[str, Callable[[], Any]], repeats: int, clock: _Clock) -> dict[str, list[float]]:
    for fn in fns.values():  # warm-up: kernels loaded, handles and workspaces created, allocator filled
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(clock(fn))
    return times


def _peak_mib(fn: Callable[[], Any], device: torch.device) -> float | None:
    """Device memory the call adds at its peak (its outputs included), MiB; None off CUDA."""
    if device.type != "cuda":
        fn()
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    result = fn()
    torch.cuda.synchronize()
    del result
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


def _error(value: Any, reference: torch.Tensor) -> float:
    value = torch.as_tensor(value).detach().to(device=reference.device, dtype=torch.float64)
    return float(torch.linalg.vector_norm(value - reference) / torch.linalg.vector_norm(reference))


class _Table:
    def __init__(self, device: torch.device, repeats: int):
        self.device, self.repeats, self.clock, self.rows = device, repeats, _Clock(device), []

    def compare(
        self,
        name: str,
        ours: Callable[[], Any],
        floor: Callable[[], Any],
        target: str,
        errors: tuple[float | None, float | None],
        times: dict[str, list[float]] | None = None,
    ) -> dict[str, list[float]]:
        times = times or _interleaved({"ours": ours, "floor": floor}, self.repeats, self.clock)
        memory = [_peak_mib(fn, self.device) for fn in (ours, floor)]
        ratio = statistics.median(o / f for o, f in zip(times["ours"], times["floor"], strict=True))
        self.rows.append(
            [
                name,
                statistics.median(times["ours"]) * 1e3,
                statistics.median(times["floor"]) * 1e3,
                f"{ratio:.2f}x",
                target,
                *("-" if v is None else f"{v:,.0f}" for v in memory),
                *("-" if e is None else f"{e:.1e}" for e in errors),
            ]
        )
        return times

    def note(self, name: str, ours: str, floor: str = "", ratio: str = "", target: str = "") -> None:
        self.rows.append([name, ours, floor, ratio, target, "", "", "", ""])


# --- the computations ----------------------------------------------------------------------------------------------


def _paired(n: int, d: int, device: torch.device, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """x standard normal; y = 0.5 roll(x) + noise + 3 (as benchmarks/similarity_cka.py), float32, made on device."""
    generator = torch.Generator(device).manual_seed(seed)
    x = torch.randn(n, d, device=device, generator=generator)
    y = torch.randn(n, d, device=device, generator=generator).add_(x.roll(1, dims=1), alpha=0.5).add_(3.0)
    return x, y


def _moments64(a: torch.Tensor, b: torch.Tensor, rows: int = 131_072) -> dict[str, torch.Tensor]:
    """Float64 centred second moments and raw A^T B, accumulated by chunks (two passes: means, then products)."""
    n = a.shape[0]
    mean_a = sum(a[i : i + rows].double().sum(0) for i in range(0, n, rows)) / n
    mean_b = sum(b[i : i + rows].double().sum(0) for i in range(0, n, rows)) / n
    out = {k: 0.0 for k in ("aa", "ab", "bb", "raw_ab")}
    for i in range(0, n, rows):
        ca, cb = a[i : i + rows].double(), b[i : i + rows].double()
        out["raw_ab"] = out["raw_ab"] + ca.T @ cb
        ca, cb = ca - mean_a, cb - mean_b
        out["aa"], out["ab"], out["bb"] = out["aa"] + ca.T @ ca, out["ab"] + ca.T @ cb, out["bb"] + cb.T @ cb
    return {**out, "mean_a": mean_a, "mean_b": mean_b}


def _cka_from_moments(m: dict[str, torch.Tensor]) -> float:
    xy, xx, yy = (torch.linalg.matrix_norm(m[k]) ** 2 for k in ("ab", "aa", "bb"))
    return float(xy / torch.sqrt(xx * yy))


def _floor_cka(x: torch.Tensor, y: torch.Tensor, debiased: bool) -> torch.Tensor:
    n = x.shape[0]
    xc, yc = x - x.mean(0), y - y.mean(0)
    xy = torch.linalg.matrix_norm(xc.T @ yc) ** 2
    xx = torch.linalg.matrix_norm(xc.T @ xc) ** 2
    yy = torch.linalg.matrix_norm(yc.T @ yc) ** 2
    if debiased:
        sx, sy = xc.square().sum(1), yc.square().sum(1)

        def hsic(frobenius, a, b):
            return frobenius - n / (n - 2) * a.dot(b) + a.sum() * b.sum() / ((n - 1) * (n - 2))

        xy, xx, yy = hsic(xy, sx, sy), hsic(xx, sx, sx), hsic(yy, sy, sy)
    return xy / torch.sqrt(xx * yy)


def _debiased_reference(x: torch.Tensor, y: torch.Tensor, m: dict[str, torch.Tensor], rows: int = 131_072) -> float:
    n = x.shape[0]
    sx = torch.cat([(x[i : i + rows].double() - m["mean_a"]).square().sum(1) for i in range(0, n, rows)])
    sy = torch.cat([(y[i : i + rows].double() - m["mean_b"]).square().sum(1) for i in range(0, n, rows)])

    def hsic(frobenius, a, b):
        return frobenius - n / (n - 2) * a.dot(b) + a.sum() * b.sum() / ((n - 1) * (n - 2))

    xy, xx, yy = (torch.linalg.matrix_norm(m[k]) ** 2 for k in ("ab", "aa", "bb"))
    return float(hsic(xy, sx, sy) / torch.sqrt(hsic(xx, sx, sx) * hsic(yy, sy, sy)))


def _projection_rows(table: _Table, size: dict[str, Any], device: torch.device) -> None:
    from latentstitch import relative_projection

    n, d, m = size["n"], size["d"], size["m"]
    generator = torch.Generator(device).manual_seed(1)
    x = torch.randn(n, d, device=device, generator=generator)
    anchors = torch.randn(m, d, device=device, generator=generator)
    rows = min(ERROR_ROWS, n)
    for dtype, label in ((torch.float32, "float32"), (torch.bfloat16, "bf16")):
        xs, anchors_s = x.to(dtype), anchors.to(dtype)
        reference = normalize(xs[:rows].double(), dim=1) @ normalize(anchors_s.double(), dim=1).T

        def ours(xs=xs, anchors_s=anchors_s):
            return relative_projection(xs, anchors_s)

        def floor(xs=xs, anchors_s=anchors_s):
            return normalize(xs, dim=1) @ normalize(anchors_s, dim=1).T

        errors = (_error(ours()[:rows], reference), _error(floor()[:rows], reference))
        table.compare(f"projection, {label}", ours, floor, "<= 1.1x", errors)
        del xs, anchors_s, reference


def _cka_rows(table: _Table, x: torch.Tensor, y: torch.Tensor, m64: dict[str, torch.Tensor]) -> None:
    from latentstitch.similarity import cka

    references = {False: _cka_from_moments(m64), True: _debiased_reference(x, y, m64)}
    for debiased in (False, True):
        reference = torch.tensor(references[debiased], dtype=torch.float64)

        def ours(debiased=debiased):
            return cka(x, y, debiased=debiased)

        def floor(debiased=debiased):
            return _floor_cka(x, y, debiased)

        errors = (_error(ours(), reference), _error(floor(), reference))
        table.compare(f"{'debiased' if debiased else 'linear'} CKA", ours, floor, "<= 1.1x", errors)


def _fit_rows(table: _Table, a: torch.Tensor, b: torch.Tensor, m64: dict[str, torch.Tensor]) -> None:
    from latentstitch.stitching import LeastSquares, Procrustes

    least_squares = torch.linalg.solve(m64["aa"], m64["ab"])
    u, _, vh = torch.linalg.svd(m64["raw_ab"])
    rotation = u @ vh

    def floor_least_squares():
        ac, bc = a - a.mean(0), b - b.mean(0)
        return torch.linalg.solve((ac.T @ ac).double(), (ac.T @ bc).double())

    def floor_procrustes():
        u, _, vh = torch.linalg.svd(a.T @ b)
        return u @ vh

    def ours_least_squares():
        return LeastSquares().fit(a, b).coef_

    def ours_procrustes():
        return Procrustes().fit(a, b).coef_

    for name, ours, floor, reference in (
        ("LeastSquares.fit", ours_least_squares, floor_least_squares, least_squares),
        ("Procrustes.fit", ours_procrustes, floor_procrustes, rotation),
    ):
        table.compare(name, ours, floor, "<= 1.3x", (None, None))
        table.rows[-1][-2:] = [f"{_error(ours(), reference):.1e}", f"{_error(floor(), reference):.1e}"]


def _streaming_rows(
    table: _Table, x: torch.Tensor, y: torch.Tensor, chunk: int, device: torch.device, reference: float
) -> None:
    from latentstitch.similarity import StreamingCKA

    pin = device.type == "cuda"
    host_x, host_y = x.cpu(), y.cpu()
    if pin:
        host_x, host_y = host_x.pin_memory(), host_y.pin_memory()
    chunks = [(host_x[i : i + chunk], host_y[i : i + chunk]) for i in range(0, x.shape[0], chunk)]
    clock = table.clock

    def copies():
        for cx, cy in chunks:
            cx.to(device, non_blocking=True), cy.to(device, non_blocking=True)
        clock.sync()

    def floor():
        total = torch.zeros(x.shape[1], y.shape[1], device=device)
        for cx, cy in chunks:
            total += cx.to(device, non_blocking=True).T @ cy.to(device, non_blocking=True)
        clock.sync()
        return total

    def ours():
        stream = StreamingCKA(device=device)
        for cx, cy in chunks:
            stream.update(cx, cy)
        return stream.compute()

    times = _interleaved({"ours": ours, "floor": floor, "copies": copies}, table.repeats, clock)
    table.compare(
        "StreamingCKA from host",
        ours,
        floor,
        "",
        (_error(ours(), torch.tensor(reference, dtype=torch.float64)), None),
        times,
    )
    seconds = statistics.median(times["copies"])
    gib = 2 * x.numel() * x.element_size() / 2**30
    fraction = seconds / statistics.median(times["ours"])
    table.note(
        "  copies alone (GiB/s, ms; ours/copies)",
        f"{gib / seconds:.1f} GiB/s",
        f"{seconds * 1e3:.1f} ms",
        f"{fraction:.0%}",
        ">= 80%",
    )


def _module_row(table: _Table, size: dict[str, Any], device: torch.device) -> None:
    from latentstitch import RelativeProjection

    generator = torch.Generator(device).manual_seed(2)
    rows, d, m = size["module_rows"], size["d"], size["m"]
    x = torch.randn(rows, d, device=device, generator=generator, requires_grad=True)
    anchors = torch.randn(m, d, device=device, generator=generator)
    upstream = torch.randn(rows, m, device=device, generator=generator)
    layer = RelativeProjection(anchors=anchors)

    def ours():
        x.grad = None
        layer(x).backward(upstream)
        return x.grad

    def floor():
        x.grad = None
        (normalize(x, dim=1) @ normalize(anchors, dim=1).T).backward(upstream)
        return x.grad

    x64 = x.detach().double().requires_grad_()
    (normalize(x64, dim=1) @ normalize(anchors.double(), dim=1).T).backward(upstream.double())
    errors = (_error(ours(), x64.grad), _error(floor(), x64.grad))
    table.compare("RelativeProjection fwd+bwd", ours, floor, "", errors)


def _topological_rows(table: _Table, size: dict[str, Any], device: torch.device) -> None:
    from latentstitch.losses import TopologicalDensificationLoss, minimum_spanning_trees

    b, n, d = size["clouds"]
    generator = torch.Generator(device).manual_seed(3)
    z = torch.randn(b, n, d, device=device, generator=generator, requires_grad=True)
    loss = TopologicalDensificationLoss(1.0)

    def ours():
        z.grad = None
        loss(z).backward()
        return z.grad

    def cdist():
        with torch.no_grad():
            return torch.cdist(z, z, compute_mode="donot_use_mm_for_euclid_dist")

    def floor():
        with torch.no_grad():
            distances = cdist()
            return minimum_spanning_trees(torch.minimum(distances, distances.mT))

    reference = loss(z.detach().double())
    errors = (_error(loss(z), reference), None)
    times = _interleaved({"ours": ours, "floor": floor, "cdist": cdist}, table.repeats, table.clock)
    table.compare("topological loss fwd+bwd", ours, floor, "<= 3x", errors, times)
    table.note("  cdist alone", f"{statistics.median(times['cdist']) * 1e3:.2f} ms")


# --- the run -------------------------------------------------------------------------------------------------------


def run(args) -> None:
    from benchmarks._harness import print_table

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        built = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        print(
            f"gpu: no CUDA device is visible to torch {torch.__version__} ({built}); nothing measured. Run it on a "
            "machine with an NVIDIA GPU, or check its code paths here with: python -m benchmarks gpu --device cpu "
            "--quick"
        )
        return
    size = SIZES["quick" if args.quick else "full"]
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        tf32 = f"TF32 matmul {'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'}"
        print(f"gpu: {name}, torch {torch.__version__}, CUDA {torch.version.cuda}, {tf32}")
    table = _Table(device, args.repeats)
    _projection_rows(table, size, device)
    x, y = _paired(size["n"], size["d"], device)
    m64 = _moments64(x, y)
    _cka_rows(table, x, y, m64)
    _fit_rows(table, x, y, m64)
    _streaming_rows(table, x, y, size["chunk"], device, _cka_from_moments(m64))
    del x, y, m64
    if device.type == "cuda":
        torch.cuda.empty_cache()
    _module_row(table, size, device)
    _topological_rows(table, size, device)
    b, n, d = size["clouds"]
    print_table(
        f"{device} vs a plain torch floor, same device, same run: N = {size['n']:,}, d = {size['d']}, "
        f"{size['m']} anchors, float32 unless said; medians of {args.repeats} interleaved repeats "
        f"({'CUDA events' if device.type == 'cuda' else 'wall clock'})",
        ["computation", "ours ms", "floor ms", "ours/floor", "target", "ours MiB", "floor MiB", "ours err",
         "floor err"],
        table.rows,
    )  # fmt: skip
    print(
        f"MiB: peak device memory added by the call. err: relative to float64 (projections: first "
        f"{min(ERROR_ROWS, size['n']):,} rows; fits: the fitted coef_ against float64 normal equations / SVD; module: "
        f"the gradient). StreamingCKA: {size['n']:,} rows in chunks of {size['chunk']:,} from "
        f"{'pinned ' if device.type == 'cuda' else ''}host memory; its floor is the copies + one cross GEMM per chunk. "
        f"Module: {size['module_rows']:,} rows. Topological loss: {b} x {n} x {d}; its floor is cdist + the batched "
        "minimum spanning trees (forward only), ours the loss's forward and backward."
    )
