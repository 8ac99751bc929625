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

Closed form (``--only closed-form``; ``--measures`` picks linear and/or debiased CKA):
``permutation_test(x, y, measure, method="moments")`` (value and exact permutation mean and variance from one pass of
moments, as ``cka`` computes them; skewness from clamp(d / 4, 128, 256) rows sampled beyond n = 2048, half in
proportion to |x_i|^3; Pearson type III p-value; no permutation drawn) timed against one ``cka(x, y)`` call on the
same data in the same run, interleaved (``--rounds`` rounds, medians): the target is <= 2x one CKA computation at
N = 50k, d = 768.

Calibration (``--only calibration``): for linear CKA, the false-positive rate at 0.05 of the closed form over
``--pairs`` (200) independent pairs (N = 100, widths 8 and 5, Gaussian and exponential), with its binomial 99%
interval; and the agreement of the closed form with ``--drawn`` (10,000) drawn permutations on pairs of increasing
dependence (digits features vs a noisy transform; synthetic Gaussian; N = 3000 heavy-tailed data, where the
skewness comes from sampled rows): |log p_closed - log p_drawn| next to the Monte Carlo standard error of
log p_drawn, ``sqrt((1 - p) / (p K))`` (a drawn p at its floor 1 / (K + 1) is only a bound and is reported so).

Measured (shared 2-core machine, load ~20, one thread, commit "clamp(d/4, 128, 256) rows by size"):
``python -m benchmarks permutation_null --only closed-form --measures linear_cka debiased_cka``, N = 50,000,
d = 768, two runs: linear CKA closed form 2.20 / 2.22 CPU s against one ``cka()`` 1.35 / 1.40 CPU s: 1.63x and
1.58x; debiased CKA 2.31 / 2.19 against 1.40 / 1.37: 1.64x and 1.62x (median per-round ratios; wall time on
this load is 5-10x the CPU time and too noisy to compare).
``--only calibration`` (about 3 minutes): 11 of 200 independent pairs below 0.05 (rate 0.055, binomial 99% interval of
the count [3, 19], KS p 0.73); tail agreement with 10,000 drawn permutations within 1.3 Monte Carlo standard errors
on digits and Gaussian pairs (p from 0.64 down to 3e-4), drawn p at its floor where the closed form gives < 1e-5;
on N = 3000 heavy-tailed data (null skewness 2.4) the closed form's p is 0.0134 / 0.0097 against 0.016 / 0.0127
drawn (2.3 / 3.0 standard errors, linear / debiased): the three-moment fit's limit on very skewed nulls, not the
row sampling (all 3000 rows give 0.0133 / 0.0095).
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
import torch

from latentstitch import similarity
from latentstitch.similarity.inference import Permutations, batch_size_for, null_kernel

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
    group.add_argument("--only", choices=("all", "drawn", "closed-form", "calibration"), default="all")
    group.add_argument("--pairs", type=int, default=200, help="independent pairs of the calibration (default 200)")
    group.add_argument("--drawn", type=int, default=10_000, help="drawn permutations of the agreement (default 10,000)")


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


def closed_form_rows(x: torch.Tensor, y: torch.Tensor, rounds: int, measures: list[str]) -> list:
    """One cka() and one closed-form test per round, interleaved; on the CPU timed by this process's CPU time (one
    thread: steadier than wall time on a shared machine), the ratio the median of the per-round ratios."""
    from benchmarks._harness import interleaved_times, median_ratio

    clock = time.process_time if x.device.type == "cpu" else time.perf_counter
    rows = []
    for name, options in (("linear_cka", {}), ("debiased_cka", {"debiased": True})):
        if name not in measures:
            continue
        results = []

        def closed(name=name, results=results):
            results.append(similarity.permutation_test(x, y, name, method="moments"))
            if x.device.type == "cuda":
                torch.cuda.synchronize()

        def one_cka(options=options):
            float(similarity.cka(x, y, **options))

        times = interleaved_times({"cka": one_cka, "closed": closed}, rounds, warmup=0, clock=clock)
        test = results[-1]
        rows.append(
            [
                f"{name} ({x.device.type})",
                f"{statistics.median(times['cka']):.2f}",
                f"{statistics.median(times['closed']):.2f}",
                f"{median_ratio(times, 'closed', 'cka'):.2f}x",
                f"p = {test.p_value:.3g}, z = {test.z_score:.3g}, skew {test.null_skewness:.3g}",
            ]
        )
        print("  " + " | ".join(rows[-1]), flush=True)
    return rows


def calibration(args) -> None:
    from scipy import stats

    from benchmarks._harness import print_table

    rng = np.random.default_rng(0)
    p_values = []
    for _ in range(args.pairs):
        a, b = rng.standard_normal((100, 8)), rng.exponential(size=(100, 5))
        p_values.append(similarity.permutation_test(a, b, "linear_cka", method="moments").p_value)
    p_values = np.array(p_values)
    low, high = stats.binom.interval(0.99, args.pairs, 0.05)
    rejected = int(np.sum(p_values < 0.05))
    print_table(
        f"Calibration: linear CKA closed form on {args.pairs} independent pairs (N = 100, 8 vs 5 features)",
        ["level", "false positives", "rate", "binomial 99% interval of the count", "KS p (uniform)"],
        [[0.05, rejected, rejected / args.pairs, f"[{low:.0f}, {high:.0f}]", stats.kstest(p_values, "uniform").pvalue]],
    )
    from sklearn.datasets import load_digits

    digits = load_digits().data[:300].astype(np.float32)
    transformed = np.tanh(digits @ rng.standard_normal((64, 16)).astype(np.float32) / 30)
    cases = [
        (
            f"digits vs tanh transform + {k:g} sd noise",
            digits,
            transformed + k * transformed.std() * rng.standard_normal(transformed.shape).astype(np.float32),
        )
        for k in (12, 6, 5, 4)
    ]
    gauss = rng.standard_normal((300, 12))
    cases += [
        (f"Gaussian, y = {s:g} x + noise", gauss, s * gauss[:, :6] + rng.standard_normal((300, 6)))
        for s in (0.05, 0.1, 0.15)
    ]
    # beyond EXACT_ROWS samples the skewness comes from sampled rows: heavy-tailed rows, a power-law spectrum
    spectrum = (1 + np.arange(64)) ** -1.0
    heavy = (rng.standard_normal((3000, 64)) ** 3 * spectrum).astype(np.float32)
    other = (rng.standard_exponential((3000, 32)) * spectrum[:32]).astype(np.float32)
    cases += [
        (f"N = 3000 heavy-tailed, y += {s:g} x (sampled skewness)", heavy, other + s * heavy[:, :32] / heavy.std())
        for s in (0.01, 0.02)
    ]
    rows = []
    for label, a, b in cases:
        for name in ("linear_cka", "debiased_cka"):
            closed = similarity.permutation_test(a, b, name, method="moments")
            drawn = similarity.permutation_test(a, b, name, method="batched", permutations=args.drawn, seed=1)
            p = drawn.p_value
            floor = 1 / (args.drawn + 1)
            if p <= floor:  # no drawn value reached the observed one: p_drawn is a bound, not an estimate
                gap, error, ratio = "-", "-", f"p drawn at its floor; closed {'<' if closed.p_value < p else '>='} it"
            else:
                error = math.sqrt((1 - p) / (p * args.drawn))
                gap = abs(math.log(closed.p_value) - math.log(p))
                gap, error, ratio = f"{gap:.3f}", f"{error:.3f}", f"{gap / error:.2f}"
            rows.append([label, name, f"{closed.p_value:.3g}", f"{p:.3g}", gap, error, ratio])
            print("  " + " | ".join(rows[-1]), flush=True)
    print_table(
        f"Tail agreement: closed form vs {args.drawn:,} drawn permutations (N = 300 unless said)",
        ["data", "measure", "p closed", "p drawn", "|log ratio|", "MC s.e. of log p drawn", "gap / s.e."],
        rows,
    )


def run(args) -> None:
    from benchmarks._harness import print_table

    if args.only in ("all", "calibration"):
        calibration(args)
        if args.only == "calibration":
            return
    n, d = SIZES["quick" if args.quick else "full"]
    x, y = (torch.from_numpy(v) for v in setup(n, d))
    if args.only in ("all", "closed-form"):
        rows = closed_form_rows(x, y, args.rounds or 3, args.measures)
        print_table(
            f"Closed form vs one CKA computation, N={n:,}, d={d} vs {d}, float32, {torch.get_num_threads()} thread(s), "
            "CPU seconds of this process (interleaved rounds)",
            ["measure", "one cka() s", "permutation_test(method='moments') s", "median ratio", "result"],
            rows,
        )
        if args.only == "closed-form":
            return
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
