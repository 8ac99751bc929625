"""Migrating a retrieval index to a new embedding model (``latentstitch.migrate``): quality, certificate coverage,
``apply`` throughput and query-side overhead. ``python -m benchmarks migration [--quick] [--seeds N]
[--parts quality,apply,query]``.

**quality** (``benchmarks/_migration_data.py`` embeds the sets once, cached under ~/.cache/latentstitch/migration):
BBC News (first sentence -> rest of the article; MiniLM-L3 <-> MiniLM-L6), Bible verses (English query ->
Spanish verse; USE-m3 <-> e5-small) and ``kjv`` (10,000 verses: the World English Bible verse is the document, the
King James verse the query; MiniLM-L3 <-> MiniLM-L6 and MiniLM-L6 <-> USE-m3 where USE's embeddings are cached),
each pair in both directions. For each re-embedded budget (1%, 5%, 10% of the
documents, chosen by k-means coverage; a random 30% of them, at least 10, held out for the certificate) and seed:
the query log is the queries of the re-embedded documents, embedded by both models (the held-out ones are only
used by the certificate). Measured on the queries of the documents nobody re-embedded ("the rest"): Recall@10 of
the re-embedded reference (new model end to end over all documents), of each mode's bridged setup and of the mode
``fit`` chose; their ratio; whether the certificate's 95% interval of Recall@10 covers the realised Recall@10; the
chosen mode refitted on every re-embedded item and query (``refit_migration``, what is deployed); and whether the
certificate's decision (``small_index=0``: judged on its figures) names the best realised arrangement
(``best_arrangement``: keep the old model within 0.01 of a full re-embed and not below the migration, migrate when
it keeps ``KEEP`` of a full re-embed and beats the old model, else re-embed everything).

**apply**: 1M x 768 float32 vectors (``.npy``) through a linear (ridge) bridge into a new ``.npy``, against a floor
measured in the same run: the same chunks read, multiplied by the same matrix with numpy and written to a
memory-mapped ``.npy``. Peak anonymous memory (RssAnon, sampled) shows it is bounded by the chunk. ``--workers N``
also runs it on a local Dask cluster of N worker processes (the cluster's start included; the workers' memory is
not sampled).

**query**: the query-side bridge on batches of 1,000 new-model queries (384 -> 384), time per query.

**ceiling** (a diagnostic, only when named in ``--parts``): each of ``--routes`` fitted on every document and query
of a set, an oracle bound on what the route can reach (``benchmarks/_migration_ceiling.py``).
"""

from __future__ import annotations

import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks._migration_data import PAIRS, recall10


def add_arguments(parser) -> None:
    parser.add_argument("--seeds", type=int, default=3, help="seeds per configuration (migration; default 3)")
    parser.add_argument("--parts", default="quality,apply,query", help="migration parts to run (default: all)")
    parser.add_argument(
        "--routes",
        default="ridge",
        help="bridge routes fit may use, comma-separated (default ridge: the machine is shared)",
    )
    parser.add_argument("--sets", default="bbc,bible,kjv", help="retrieval sets of the quality part (default all)")
    parser.add_argument("--budgets", default="0.01,0.05,0.1", help="re-embedded shares (default 0.01,0.05,0.1)")
    parser.add_argument(
        "--labelled-queries",
        action="store_true",
        help="quality: the fit's query log carries each query's relevant document (scored in fit's cross-validation "
        "and its learning curve; default: fitted on only)",
    )
    parser.add_argument("--pairs", default=None, help="only these old->new pairs, e.g. minilm-l6>use-m3 (default all)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="apply: vectors migrated (default 1,000,000)")
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="apply: also run it on a local Dask cluster of this many worker processes (default 0: not run)",
    )


# --- quality -------------------------------------------------------------------------------------------------------
def one_run(old_q, old_d, new_q, new_d, budget, seed, routes=("ridge",), labelled=False):
    from latentstitch.migrate import (
        QuerySample,
        certify_migration,
        fit_migration,
        plan_sample,
        prepare,
        refit_migration,
    )

    n = len(old_d)
    ids = np.arange(n)
    count = max(round(budget * n), 20)
    plan = plan_sample(ids, old_d, count, strategy="kmeans", holdout=max(0.3, 10 / count), seed=seed)
    fit_ids, held = plan.fit_ids, plan.holdout_ids
    queries_fit = QuerySample(new_q[fit_ids], old_q[fit_ids], fit_ids if labelled else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        migration = fit_migration(
            ids,
            old_d,
            plan.ids,
            new_d[plan.ids],
            queries=queries_fit,
            holdout_ids=held,
            folds=3,
            seed=seed,
            routes=routes,
            inner_folds=2,
        )
    queries_held = QuerySample(new_q[held], old_q[held], held)
    # small_index=0: the decision judged on its figures alone (these corpora are small enough to re-embed)
    certificate = certify_migration(
        migration, ids, old_d, plan.ids, new_d[plan.ids], held, queries=queries_held, seed=seed, small_index=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        deployed = refit_migration(
            migration, ids, old_d, plan.ids, new_d[plan.ids], queries=QuerySample(new_q[plan.ids], old_q[plan.ids])
        )
    rest = np.setdiff1d(ids, plan.ids)
    reference = recall10(new_q[rest], new_d, rest)
    migrated = migration.transform_corpus(old_d)
    migrated[plan.ids] = prepare(new_d[plan.ids], "cosine").numpy()
    bridged = {
        "query": recall10(migration.transform_queries(new_q[rest]), old_d, rest),
        "corpus": recall10(new_q[rest], migrated, rest),
    }
    interval = certificate.recall10("queries")
    realised = bridged[migration.mode]
    refitted = (
        recall10(deployed.transform_queries(new_q[rest]), old_d, rest)
        if migration.mode == "query"
        else recall10(new_q[rest], _migrated(deployed, old_d, plan.ids, new_d), rest)
    )
    old = recall10(old_q[rest], old_d, rest)
    return {
        "decision": certificate.decision["choice"],
        "best": best_arrangement(old, refitted, reference),
        "refitted": refitted,
        "gain_per_doubling": migration.learning_gain()[1],
        "reference": reference,
        "old": old,
        "query": bridged["query"],
        "corpus": bridged["corpus"],
        "chosen": migration.mode,
        "chosen_recall": realised,
        "covered": interval["low"] <= realised <= interval["high"],
        "interval": (interval["low"], interval["high"]),
    }


def _migrated(migration, old_d, sample_ids, new_d):
    from latentstitch.migrate import prepare

    migrated = migration.transform_corpus(old_d)
    migrated[sample_ids] = prepare(new_d[sample_ids], "cosine").numpy()
    return migrated


def best_arrangement(old: float, migrated: float, reference: float, n_index: int = 0, small_index: int = 0) -> str:
    """The best realised arrangement on the untouched rest, by the decision's rule on realised figures: keep the old
    model when it is within 0.01 of a full re-embed and not below the migration; migrate when the migration keeps
    ``KEEP`` of a full re-embed (on an index of at most ``small_index`` items: loses at most 0.01 against it, the
    decision's ``small_index`` rule) and beats the old model; else re-embed everything."""
    from latentstitch.migrate import KEEP

    if old >= reference - 0.01 and old >= migrated:
        return "keep the old model"
    floor = reference - 0.01 if n_index <= small_index else KEEP * reference
    if migrated >= floor and migrated > old:
        return "migrate"
    return "re-embed everything"


def quality(args) -> None:
    from benchmarks._harness import print_table
    from benchmarks._migration_data import embedded

    seeds = 1 if args.quick else args.seeds
    budgets = (0.05,) if args.quick else tuple(float(b) for b in args.budgets.split(","))
    wanted = None if args.pairs is None else {tuple(p.split(">")) for p in args.pairs.split(",")}
    rows, covered, total = [], 0, 0
    for name, pairs in PAIRS.items():
        if name not in args.sets.split(","):
            continue
        for old_name, new_name in pairs:
            if wanted is not None and (old_name, new_name) not in wanted:
                continue
            old_q, old_d = embedded(name, old_name)
            new_q, new_d = embedded(name, new_name)
            for budget in budgets:
                started = time.perf_counter()
                runs = [
                    one_run(old_q, old_d, new_q, new_d, budget, seed, args.routes.split(","), args.labelled_queries)
                    for seed in range(seeds)
                ]
                covered += sum(r["covered"] for r in runs)
                total += len(runs)

                def mean(key, runs=runs):
                    return float(np.mean([r[key] for r in runs]))

                ref = mean("reference")
                chosen = ", ".join(sorted({r["chosen"] for r in runs}))
                rows.append(
                    [
                        name,
                        f"{old_name} -> {new_name}",
                        f"{budget:.0%}",
                        mean("old"),
                        ref,
                        mean("query") / ref,
                        mean("corpus") / ref,
                        f"{chosen}: {mean('chosen_recall') / ref:.3f}",
                        mean("refitted") / ref,
                        f"{sum(r['decision'] == r['best'] for r in runs)}/{len(runs)}: "
                        + ", ".join(sorted({r["decision"] for r in runs})),
                        f"{sum(r['covered'] for r in runs)}/{len(runs)}",
                        mean("gain_per_doubling"),
                        time.perf_counter() - started,
                    ]
                )
                print(rows[-1], flush=True)
    print_table(
        "bridged Recall@10 on the untouched rest, as a share of the re-embedded reference (mean over seeds)",
        [
            "set",
            "old -> new",
            "budget",
            "old R@10",
            "reference R@10",
            "query-side x",
            "corpus-side x",
            "chosen x",
            "refitted x",
            "decision right",
            "cert. covers",
            "curve: R@10 gain per doubling",
            "seconds",
        ],
        rows,
    )
    print(
        f"certificate 95% interval covered the realised Recall@10 in {covered}/{total} runs "
        f"({covered / max(total, 1):.0%}; target >= 90%); target at 5%: chosen >= 0.97x the reference. "
        "'curve': the fit's learning curve (Migration.learning_gain: the chosen mode's held-out Recall@1 of the "
        "re-embedded documents as queries, or with --labelled-queries the queries' Recall@10, fitted on half and on "
        "all of each fold's pairs), per doubling of the pairs: compare with the realised gain from one budget to "
        "twice it"
    )


# --- apply throughput ----------------------------------------------------------------------------------------------
class AnonymousPeak:
    """The peak of this process's anonymous resident memory (RssAnon: not the memory-mapped files), sampled."""

    def __init__(self, every: float = 0.02):
        self.every, self.peak, self._stop = every, 0, threading.Event()

    @staticmethod
    def now() -> int:
        with open("/proc/self/status") as status:
            return int(next(line for line in status if line.startswith("RssAnon")).split()[1]) // 1024

    def _watch(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.now())
            time.sleep(self.every)

    def __enter__(self):
        self.base = self.now()
        self.peak = self.base
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.grown = self.peak - self.base


def linear_migration(width: int, folder: Path):
    """A corpus-side migration whose bridge is a ridge map fitted on 2,000 synthetic pairs (inner product)."""
    from latentstitch.bridge import Bridge
    from latentstitch.migrate import Migration

    rng = np.random.default_rng(0)
    source = rng.standard_normal((2000, width)).astype(np.float32)
    target = source @ (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = Bridge(routes=["ridge"], cv=2).fit(source, target)
    migration = Migration("corpus", "ip", {"corpus": bridge}, {"corpus": [1.0]}, 2000, 0, width, width)
    return migration, migration.save(folder / "migration.json")


def floor(source: Path, output: Path, weight: np.ndarray, bias: np.ndarray, chunk: int) -> None:
    """Read each chunk, one numpy GEMM, write into a memory-mapped .npy: the least any apply can do."""
    data = np.load(source, mmap_mode="r")
    out = np.lib.format.open_memmap(output, mode="w+", dtype=np.float32, shape=data.shape)
    for start in range(0, len(data), chunk):
        block = np.asarray(data[start : start + chunk])
        out[start : start + chunk] = block @ weight + bias
        out.flush()
    del out


def apply_part(args) -> None:
    from benchmarks._harness import print_table
    from latentstitch.migrate import apply_migration, open_store

    rows, width, chunk = (100_000 if args.quick else args.rows), 768, 65_536
    with tempfile.TemporaryDirectory(dir=Path.home() / ".cache") as tmp:
        folder = Path(tmp)
        source = folder / "old.npy"
        data = np.lib.format.open_memmap(source, mode="w+", dtype=np.float32, shape=(rows, width))
        rng = np.random.default_rng(0)
        for start in range(0, rows, chunk):
            data[start : start + chunk] = rng.standard_normal((min(chunk, rows - start), width), dtype=np.float32)
        data.flush()
        del data
        migration, path = linear_migration(width, folder)
        probe = np.eye(width, dtype=np.float32)
        bias = migration.transform_corpus(np.zeros((1, width), np.float32))[0]
        weight = migration.transform_corpus(probe) - bias  # the bridge's own linear map, for the floor
        results = []
        workers = int(getattr(args, "workers", 0) or 0)
        names = ("floor", "apply") + ((f"apply on Dask ({workers} workers)",) if workers else ())
        for repeat in range(args.repeats if not args.quick else 1):
            for name in names:
                output = folder / f"{name}-{repeat}.npy"
                with AnonymousPeak() as memory:
                    started = time.perf_counter()
                    if name == "floor":
                        floor(source, output, weight, bias, chunk)
                    else:
                        on = {"client": "local", "workers": workers} if name != "apply" else {}
                        store = open_store(source, metric="ip")
                        apply_migration(migration, path, store, output, chunk_rows=chunk, **on)
                    seconds = time.perf_counter() - started
                results.append((name, repeat, seconds, memory.grown))
                if name != "floor":
                    check = np.load(output, mmap_mode="r")[:1000]
                    expected = np.load(folder / f"floor-{repeat}.npy", mmap_mode="r")[:1000]
                    assert np.allclose(check, expected, atol=1e-3), f"{name} and the floor disagree"
                    output.unlink()
                    output.with_name(output.name + ".manifest.json").unlink(missing_ok=True)
            (folder / f"floor-{repeat}.npy").unlink()
        table = []
        for name in names:
            times = [s for n, _, s, _ in results if n == name]
            peak = max(m for n, _, _, m in results if n == name)
            median = float(np.median(times))
            table.append([name, median, rows / median * 60, peak])
        per = len(names)
        ratio = float(np.median([results[i + 1][2] / results[i][2] for i in range(0, len(results), per)]))
        print_table(
            f"apply: {rows:,} x {width} float32 through a ridge bridge, chunks of {chunk:,} (median of runs)",
            ["method", "seconds", "vectors / minute", "peak anonymous MiB (this process; Dask workers not counted)"],
            table,
        )
        chunk_mib = chunk * width * 4 / 2**20
        print(
            f"apply / floor (median of per-round ratios): {ratio:.2f} (target <= 1.5); one chunk = "
            f"{chunk_mib:.0f} MiB; index = {rows * width * 4 / 2**20:,.0f} MiB"
        )


# --- query-side overhead ---------------------------------------------------------------------------------------------
def query_part(args) -> None:
    from benchmarks._harness import interleaved_times, print_table

    width, batch = 384, 1000
    migration, _ = linear_migration(width, Path(tempfile.mkdtemp()))
    migration.bridges["query"] = migration.bridges["corpus"]
    queries = np.random.default_rng(1).standard_normal((batch, width)).astype(np.float32)
    bias = migration.transform_queries(np.zeros((1, width), np.float32))[0]
    weight = migration.transform_queries(np.eye(width, dtype=np.float32)) - bias
    methods = {
        "numpy GEMM": lambda: queries @ weight + bias,
        "transform_queries": lambda: migration.transform_queries(queries),
    }
    wall = interleaved_times(methods, repeats=max(args.repeats, 20))
    cpu = interleaved_times(methods, repeats=max(args.repeats, 20), clock=time.process_time)
    rows = [
        [name, float(np.median(wall[name])) / batch * 1e6, float(np.median(cpu[name])) / batch * 1e6]
        for name in methods
    ]
    print_table(
        f"query-side bridge, batches of {batch} queries ({width} -> {width}), medians",
        ["method", "µs per query (wall)", "µs per query (CPU time of this process)"],
        rows,
    )
    print("target: transform_queries <= 10 µs per query")


def run(args) -> None:
    parts = args.parts.split(",")
    if "query" in parts:
        query_part(args)
    if "apply" in parts:
        apply_part(args)
    if "quality" in parts:
        quality(args)
    if "ceiling" in parts:  # a diagnostic, not in the default parts
        from benchmarks._migration_ceiling import ceiling

        ceiling(args)
