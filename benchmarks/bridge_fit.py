"""``Bridge.fit`` on 5,000 parallel anchors x 768 features (synthetic float32 embeddings), against one plain
translation fit of the same data.

The bridge cross-validates every "auto" route (ridge with its own inner 5-fold ridge path, two Procrustes variants,
three relative routes) over 5 folds, scores each held-out fold, then fits the chosen route on all anchors. The
baseline, measured in the same run, is what a user does by hand without any checking: one
``LatentTranslator(LeastSquares(ridge=1, ridge_units="relative"))`` fit on all anchors. The ratio says how many such
fits the checked choice costs. Also shown: the time per route (from ``routes_``).

Data: a 768-d source with a decaying spectrum and a target that is a noisy random linear map of it plus a shift
(synthetic: only the sizes matter for the timing). ``--quick``: 1,000 x 256.
Full size: ``python -m benchmarks bridge_fit --threads 1 --repeats 1`` (about a minute on one quiet core).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

SIZES = {"full": (5000, 768), "quick": (1000, 256)}


def setup(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    source = (rng.standard_normal((n, d)) * np.geomspace(1.0, 0.05, d)).astype(np.float32)
    mixing = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    target = source @ mixing + 0.5 + 0.05 * rng.standard_normal((n, d)).astype(np.float32)
    return source, target.astype(np.float32)


def plain_translation(inputs):
    from latentstitch.stitching import LatentTranslator, LeastSquares

    return LatentTranslator(LeastSquares(ridge=1.0, ridge_units="relative")).fit(*inputs)


def bridge_fit(inputs):
    from latentstitch.bridge import Bridge

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Bridge().fit(*inputs)


def run(args) -> None:
    from benchmarks._harness import median_time, print_table, set_threads

    print(set_threads(args.threads))
    n, d = SIZES["quick" if args.quick else "full"]
    inputs = setup(n, d)
    warmup = 1 if args.quick else 0
    base = median_time(lambda: plain_translation(inputs), args.repeats, warmup)
    started = time.perf_counter()
    bridge = bridge_fit(inputs)
    first = time.perf_counter() - started
    seconds = first if args.repeats == 1 else median_time(lambda: bridge_fit(inputs), args.repeats - 1, 0)
    rows = [
        ["plain LatentTranslator(LeastSquares) fit", base, 1.0],
        ["Bridge().fit (6 routes, 5 folds)", seconds, seconds / base],
    ]
    rows += [[f"  route {row['route']} (5 folds)", row["seconds"], row["seconds"] / base] for row in bridge.routes_]
    print_table(
        f"Bridge fit, {n:,} anchors x {d} (synthetic float32), {args.threads} thread(s); chosen route "
        f"{bridge.route_}; median of {args.repeats}",
        ["what", "seconds", "time / plain fit"],
        rows,
    )
