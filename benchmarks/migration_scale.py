"""``apply_migration`` and the cascade (``Migration.search``) on an index of ``--rows`` vectors (default 1,000,000):
speed and memory, **not quality**. ``python -m benchmarks migration_scale [--rows N] [--small-rows M] [--queries Q]``.

The data is synthetic, generated chunk by chunk from fixed seeds and never held whole: a 384-d latent drawn from a
mixture of 64 Gaussians (one unit-norm centre each, spread 0.6), the old model's vector its unit-normalised
value, the new model's vector ``normalise(tanh(3 old @ M))`` with ``M`` a fixed random 384 x 384 map (scaled by
1/sqrt(384)): a new model that is a nonlinear function of the old one, so a bridge exists and retrieval is not
trivial, but its figures here are speed and memory only. Written in chunks (``np.lib.format.open_memmap``) to
``old.npy`` (the index ``apply`` reads, as a user's embedding file) and, from it, a FAISS ``IndexIVFFlat`` of
inner product (``nlist`` about sqrt(rows), trained on 65,536 rows, ``nprobe`` 16 saved in the file: the store
searches as it was built), the index the cascade searches, as a user's ANN index. The migration is fitted with
``fit_migration`` (route ``procrustes``) on the first ``--fit-rows`` rows with 10% of them re-embedded, then
recorded on the full index (``record_index``: as ``migrate fit`` does, so every search and apply checks the index's
size and digest).

Measured (one thread per process; CPU seconds beside wall seconds; the host is shared and loaded):

- open: ``open_store`` of the IVF index (FAISS reads it whole) and the digest of its bytes (``VectorStore.digest``:
  apply and search check the index is the one fitted), cold, and again on a second open in the same process.
- apply: ``apply_migration`` of the whole ``.npy`` index into a new ``.npy`` (in place; the re-embedded 5% written
  with their true vectors), in process and on a Dask ``LocalCluster`` of ``--workers`` processes (one thread each,
  ``--worker-memory`` each), at ``--small-rows`` and ``--rows``: vectors per minute (wall), and the peak memory of
  the driver and of each worker, sampled every 0.2 s (psutil) as the resident set (RSS) and its anonymous part (the
  process's own memory: RSS less the file pages it maps, which the kernel can drop; reading and writing memory-mapped
  files puts them in RSS).
- cascade: ``--queries`` queries (200 at 1M), one per call, through ``Migration.search`` at each depth of
  ``--depths`` (k=10) with a FAISS new collection that starts holding the re-embedded 5% (each depth from the same
  start: the cold pass writes what it computes; then the same queries again, warm: every candidate already there;
  then again with ``collection_search="exact"``, every row of the collection read, and the warm top 10's agreement
  with it: the default reads the collection's inverted lists once it holds ``migrate._lists.LIST_ROWS`` fixed rows).
  The candidates' new vectors come from ``new_vectors(ids)``, the synthetic new model (their old vectors read from
  ``old.npy``, the map and tanh): its time is measured inside the callable. Beside it, per query: the store's own
  search (the IVF index, k=10, of the old model's query; what a user runs today). Overhead = cascade - (own search
  + encoding); the goal (issue 40) is overhead <= 2 x (own search + encoding), read on the medians.

Results: printed, and written to ``latentstitch-results/migration-scale/results.json`` (``--output``); the data
lives in ``--folder`` (default: a temporary folder, removed at the end; about 5 GB at 1M rows).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks._harness import print_table

RUN_BY_DEFAULT = False  # minutes and ~5 GB of disk at its default size: run it by name
WIDTH = 384
CENTRES = 64
SEED = 20_261_128
GEN_ROWS = 65_536


def add_arguments(parser) -> None:
    parser.add_argument("--rows", type=int, default=1_000_000, help="vectors in the index (default 1,000,000)")
    parser.add_argument(
        "--small-rows", type=int, default=None, help="the smaller index apply also runs on (default rows / 5)"
    )
    parser.add_argument("--chunk-rows", type=int, default=65_536, help="apply's chunk_rows (default 65,536)")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes (default 2)")
    parser.add_argument("--worker-memory", default="2GiB", help="memory limit per worker (default 2GiB)")
    parser.add_argument(
        "--queries",
        type=int,
        default=None,
        help="queries per depth, one per call (default 200, or rows / 1,000 when fewer: a smoke run stays short)",
    )
    parser.add_argument("--depths", default="50,100,200", help="cascade depths (default 50,100,200)")
    parser.add_argument("--budget", type=float, default=0.05, help="share re-embedded up front (default 0.05)")
    parser.add_argument(
        "--fit-rows", type=int, default=None, help="rows the migration is fitted on (default 20,000, or rows / 10)"
    )
    parser.add_argument("--nprobe", type=int, default=16, help="the IVF index's nprobe, saved in it (default 16)")
    parser.add_argument("--parts", default="open,apply,cascade", help="what to measure (default open,apply,cascade)")
    parser.add_argument("--folder", type=Path, default=None, help="where the data is written (default: a temp folder)")
    parser.add_argument(
        "--output",
        type=Path,
        default=Path("latentstitch-results/migration-scale/results.json"),
        help="the results JSON (default latentstitch-results/migration-scale/results.json)",
    )


# --- the synthetic models ---------------------------------------------------------------------------------------


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


class Synthetic:
    """The mixture and the new model's map, from fixed seeds."""

    def __init__(self, width: int = WIDTH):
        rng = np.random.default_rng([SEED, 0])
        self.centres = _unit(rng.standard_normal((CENTRES, width))).astype(np.float32)
        self.map = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)

    def old_chunk(self, number: int, rows: int) -> np.ndarray:
        rng = np.random.default_rng([SEED, 1, number])
        which = rng.integers(0, CENTRES, rows)
        noise = rng.standard_normal((rows, self.centres.shape[1]), dtype=np.float32) * (0.6 / np.sqrt(WIDTH))
        return _unit(self.centres[which] + noise).astype(np.float32)

    def new_of_old(self, old: np.ndarray) -> np.ndarray:
        """The new model's vectors of documents (or queries) whose old vectors are ``old``."""
        return _unit(np.tanh(3.0 * np.asarray(old, np.float32) @ self.map)).astype(np.float32)

    def queries(self, old_index: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Old and new query vectors: a perturbed copy of ``count`` indexed documents (another wording of them)."""
        rng = np.random.default_rng([SEED, 2])
        rows = np.sort(rng.choice(len(old_index), count, replace=False))
        noise = rng.standard_normal((count, old_index.shape[1]), dtype=np.float32) * (0.3 / np.sqrt(WIDTH))
        old = _unit(np.asarray(old_index[rows]) + noise).astype(np.float32)
        return old, self.new_of_old(old)


def write_index(model: Synthetic, path: Path, rows: int) -> float:
    """``rows`` old vectors written chunk by chunk into ``path`` (.npy); seconds taken."""
    started = time.perf_counter()
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, WIDTH))
    for number, start in enumerate(range(0, rows, GEN_ROWS)):
        stop = min(start + GEN_ROWS, rows)
        out[start:stop] = model.old_chunk(number, stop - start)
    out.flush()
    del out
    return time.perf_counter() - started


def write_ivf(source: Path, path: Path, nprobe: int) -> dict:
    """A FAISS IVF-flat inner-product index of the ``.npy`` at ``source``, built in chunks."""
    import faiss

    old = np.load(source, mmap_mode="r")
    nlist = max(16, round(float(np.sqrt(len(old))) / 16) * 16)
    started = time.perf_counter()
    quantizer = faiss.IndexFlatIP(WIDTH)
    index = faiss.IndexIVFFlat(quantizer, WIDTH, nlist, faiss.METRIC_INNER_PRODUCT)
    step = max(1, len(old) // 65_536)
    index.train(np.ascontiguousarray(old[::step][:65_536]))
    for start in range(0, len(old), GEN_ROWS):
        block = np.ascontiguousarray(old[start : start + GEN_ROWS])
        index.add_with_ids(block, np.arange(start, start + len(block), dtype=np.int64))
    index.nprobe = nprobe
    faiss.write_index(index, str(path))
    seconds = time.perf_counter() - started
    del index, quantizer
    return {"nlist": nlist, "nprobe": nprobe, "build_s": seconds}


# --- memory sampling --------------------------------------------------------------------------------------------


def _memory_of(pid: int) -> tuple[float, float]:
    """(RSS, anonymous RSS) of a process, MiB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        rss = int(fields["VmRSS"].split()[0]) / 1024
        anon = int(fields.get("RssAnon", fields["VmRSS"]).split()[0]) / 1024
        return rss, anon
    except (OSError, KeyError, ValueError):
        return 0.0, 0.0


class Sampler:
    """Every 0.2 s, the RSS of this process and of every process under it (the cluster's nanny and worker
    processes); the peak of each, by pid."""

    def __init__(self, every: float = 0.2):
        self.every, self.peaks, self.stop = every, {}, threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.stop.is_set():
            try:
                pids = [me.pid] + [child.pid for child in me.children(recursive=True)]
            except psutil.Error:
                pids = [me.pid]
            for pid in pids:
                rss, anon = _memory_of(pid)
                old = self.peaks.get(pid, (0.0, 0.0))
                self.peaks[pid] = (max(old[0], rss), max(old[1], anon))
            self.stop.wait(self.every)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


# --- the measurements -------------------------------------------------------------------------------------------


def fit(model: Synthetic, index_path: Path, rows: int, budget: float):
    """A migration fitted on the first ``rows`` of the index with 10% of them re-embedded; with the re-embedded
    ``budget`` share of the whole index (ids, new vectors)."""
    from latentstitch.migrate import fit_migration

    old = np.load(index_path, mmap_mode="r")
    part = np.asarray(old[:rows])
    ids = np.arange(rows)
    sample = np.random.default_rng([SEED, 3]).choice(rows, rows // 10, replace=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        migration = fit_migration(
            ids, part, sample, model.new_of_old(part[sample]), metric="cosine", routes=["procrustes"], folds=2
        )
    chosen = np.sort(np.random.default_rng([SEED, 4]).choice(len(old), int(budget * len(old)), replace=False))
    new = np.concatenate([model.new_of_old(old[chosen[s : s + GEN_ROWS]]) for s in range(0, len(chosen), GEN_ROWS)])
    return migration, chosen, new


def measure_open(path: Path) -> dict:
    from latentstitch.migrate import open_store

    out = {}
    time.sleep(max(0.0, 2.5 - (time.time() - path.stat().st_ctime)))  # an index is opened well after it is written
    for label in ("first", "second"):
        cpu, wall = time.process_time(), time.perf_counter()
        store = open_store(path)
        out[f"open_{label}_s"] = time.perf_counter() - wall
        cpu2, wall2 = time.process_time(), time.perf_counter()
        store.digest()
        out[f"digest_{label}_s"] = time.perf_counter() - wall2
        out[f"digest_{label}_cpu"] = time.process_time() - cpu2
        out[f"open_{label}_cpu"] = cpu2 - cpu
        store.close()
        del store
    out["bytes"] = path.stat().st_size
    store = open_store(path)
    me = os.getpid()
    with Sampler() as sampler:
        before = _memory_of(me)[1]
        wall = time.perf_counter()
        rows = sum(len(ids) for ids, _ in store.batches(65_536))
        out["read_all_s"] = time.perf_counter() - wall
    out["read_all_rows"] = rows
    out["read_all_peak_anon_growth_mib"] = sampler.peaks.get(me, (0, 0))[1] - before
    store.close()
    return out


def measure_apply(migration, index: Path, folder: Path, chunk_rows: int, client, sample) -> dict:
    """One apply of ``index`` into a new ``.npy`` in ``folder``, here (``client`` None) or on the cluster."""
    from latentstitch.migrate import apply_migration, open_store

    store = open_store(index, metric="cosine")
    migration = copy.copy(migration).record_index(store)
    store.digest()  # the digest is measured apart (open); here the apply itself
    corpus = copy.copy(migration)
    corpus.mode = "corpus"
    path = folder / "migration"
    shutil.rmtree(path, ignore_errors=True)
    corpus.save(path)
    output = folder / f"applied-{'cluster' if client else 'here'}.npy"
    output.unlink(missing_ok=True)
    worker_pids = set(client.run(os.getpid).values()) if client is not None else set()
    cpu_workers = _worker_cpu(worker_pids)
    cpu, wall = time.process_time(), time.perf_counter()
    with Sampler() as sampler, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = apply_migration(
            corpus,
            path,
            store,
            output,
            chunk_rows=chunk_rows,
            client=client,
            sample_ids=sample[0],
            sample_new=sample[1],
        )
    seconds, driver_cpu = time.perf_counter() - wall, time.process_time() - cpu
    peaks = sampler.peaks
    me = os.getpid()
    workers = [peaks.get(pid, (0.0, 0.0)) for pid in worker_pids]
    others = [value for pid, value in peaks.items() if pid != me and pid not in worker_pids]
    check = np.load(output, mmap_mode="r")
    assert check.shape == (store.count, migration.new_dimension) and np.isfinite(check[-1000:]).all()
    del check
    output.unlink()
    Path(str(output) + ".manifest.json").unlink(missing_ok=True)
    store.close()
    return {
        "rows": result.rows,
        "mode": "cluster" if client is not None else "in-process",
        "seconds": seconds,
        "vectors_per_min": result.rows / seconds * 60,
        "driver_cpu_s": driver_cpu,
        "workers_cpu_s": _worker_cpu(worker_pids) - cpu_workers if worker_pids else 0.0,
        "driver_peak_rss_mib": peaks.get(me, (0, 0))[0],
        "driver_peak_anon_mib": peaks.get(me, (0, 0))[1],
        "worker_peak_rss_mib": max((w[0] for w in workers), default=0.0),
        "worker_peak_anon_mib": max((w[1] for w in workers), default=0.0),
        "other_peak_rss_mib": sum(o[0] for o in others),
        "chunk_rows": chunk_rows,
        "chunks": result.chunks,
    }


def _worker_cpu(pids) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def _stats(values: list[float]) -> dict:
    array = np.asarray(values) * 1000
    return {"median_ms": float(np.median(array)), "p90_ms": float(np.percentile(array, 90))}


def measure_cascade(migration, model, ivf: Path, npy: Path, folder: Path, queries: int, depths, sample) -> dict:
    """Per query: the store's own search, and the cascade at each depth (cold, then warm), with the candidates'
    encoding timed inside ``new_vectors``."""
    from latentstitch.migrate import open_collection, open_store

    store = open_store(ivf)
    migration = copy.copy(migration).record_index(store)
    old_index = np.load(npy, mmap_mode="r")
    old_q, new_q = model.queries(old_index, queries)
    spent = {"seconds": 0.0, "cpu": 0.0, "rows": 0}

    def new_vectors(ids):
        cpu, wall = time.process_time(), time.perf_counter()
        out = model.new_of_old(old_index[np.sort(np.asarray(ids, np.int64))])
        out = out[np.argsort(np.argsort(np.asarray(ids, np.int64)))]
        spent["seconds"] += time.perf_counter() - wall
        spent["cpu"] += time.process_time() - cpu
        spent["rows"] += len(ids)
        return out

    own, own_cpu = [], []
    for row in range(queries):
        cpu, wall = time.process_time(), time.perf_counter()
        store.search(old_q[row : row + 1], 10)
        own.append(time.perf_counter() - wall)
        own_cpu.append(time.process_time() - cpu)
    seed_path = folder / "seed.index"
    seed = open_collection(seed_path, store, migration.new_dimension, "cosine")
    seed.add_missing(sample[0], sample[1])
    out = {"own_search": {**_stats(own), "cpu_median_ms": float(np.median(own_cpu) * 1000)}, "depths": []}
    for depth in depths:
        path = folder / f"new-{depth}.index"
        shutil.rmtree(path.with_name(path.name + ".parts"), ignore_errors=True)
        for suffix in ("", ".parts", ".cascade.json", ".lock"):
            target = Path(str(seed_path) + suffix)
            destination = Path(str(path) + suffix)
            if target.is_dir():
                shutil.copytree(target, destination, dirs_exist_ok=True)
            elif target.exists():
                shutil.copy2(target, destination)
        collection = open_collection(path, store, migration.new_dimension, "cosine")
        row_out = {"depth": depth}
        answers = {}
        for phase in ("cold", "warm", "exact"):
            total, total_cpu, encoding, encoding_cpu, embedded, answers[phase] = [], [], [], [], 0, []
            for row in range(queries):
                before = dict(spent)
                cpu, wall = time.process_time(), time.perf_counter()
                result = migration.search(
                    new_q[row : row + 1],
                    10,
                    store=store,
                    new_store=collection,
                    depth=depth,
                    new_vectors=new_vectors,
                    collection_search="exact" if phase == "exact" else True,
                )
                total.append(time.perf_counter() - wall)
                total_cpu.append(time.process_time() - cpu)
                encoding.append(spent["seconds"] - before["seconds"])
                encoding_cpu.append(spent["cpu"] - before["cpu"])
                embedded += result.embedded
                answers[phase].append(result.ids[0])
            overhead = np.asarray(total) - np.asarray(encoding) - np.median(own)
            base = np.median(own) + np.median(encoding)
            row_out[phase] = {
                **_stats(total),
                "cpu_median_ms": float(np.median(total_cpu) * 1000),
                "encoding": {**_stats(encoding), "cpu_median_ms": float(np.median(encoding_cpu) * 1000)},
                "overhead": _stats(list(overhead)),
                "overhead_ratio": float(np.median(overhead) / base),
                "embedded_per_query": embedded / queries,
            }
        lists = collection.block_lists
        row_out["lists"] = (
            None
            if lists is None
            else {"lists": len(lists.centroids), "probes": lists.probes(depth), "fitted_rows": lists.fitted_rows}
        )
        # the default (inverted lists once the collection is large) against every row read, same collection state
        row_out["warm_top10_agreement_with_exact"] = float(
            np.mean([len(set(a) & set(b)) / 10 for a, b in zip(answers["warm"], answers["exact"], strict=True)])
        )
        out["depths"].append(row_out)
        del collection
    store.close()
    return out


def run(args) -> None:
    import faiss

    faiss.omp_set_num_threads(1)
    rows = args.rows
    small = args.small_rows or rows // 5
    depths = [int(d) for d in str(args.depths).split(",") if d]
    queries = args.queries or max(10, min(200, rows // 1000))
    parts = set(str(args.parts).split(","))
    owned = args.folder is None
    folder = Path(tempfile.mkdtemp(prefix="migration-scale-")) if owned else args.folder
    folder.mkdir(parents=True, exist_ok=True)
    model = Synthetic()
    results: dict = {"rows": rows, "small_rows": small, "command": getattr(args, "command", None)}
    try:
        npy = folder / "old.npy"
        results["generate_s"] = write_index(model, npy, rows)
        migration, chosen, new = fit(model, npy, args.fit_rows or min(20_000, max(2_000, rows // 10)), args.budget)
        print(f"data: {rows:,} x {WIDTH} in {results['generate_s']:.1f} s; migration fitted ({migration.mode})")
        if "apply" in parts:
            results["apply"] = _applies(args, model, migration, npy, folder, small, chosen, new)
        if "open" in parts or "cascade" in parts:
            ivf = folder / "old.ivf"
            results["ivf"] = write_ivf(npy, ivf, args.nprobe)
            print(f"IVF index: nlist {results['ivf']['nlist']}, built in {results['ivf']['build_s']:.1f} s")
            if "open" in parts:
                results["open"] = measure_open(ivf)
            if "cascade" in parts:
                results["cascade"] = measure_cascade(migration, model, ivf, npy, folder, queries, depths, (chosen, new))
    finally:
        if owned:
            shutil.rmtree(folder, ignore_errors=True)
    _print(results)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written: {args.output}")


def _applies(args, model, migration, npy: Path, folder: Path, small: int, chosen, new) -> list[dict]:
    from distributed import Client, LocalCluster

    from benchmarks._harness import set_threads

    small_npy = folder / "old-small.npy"
    write_index(model, small_npy, small)  # the same first rows (the same seeds per chunk)
    keep = chosen < small
    sizes = [(small_npy, (chosen[keep], new[keep])), (npy, (chosen, new))]
    rows = []
    for index, sample in sizes:
        rows.append(measure_apply(migration, index, folder, args.chunk_rows, None, sample))
        print(rows[-1])
    cluster = LocalCluster(
        n_workers=args.workers,
        threads_per_worker=1,
        processes=True,
        memory_limit=args.worker_memory,
        dashboard_address=":0",
    )
    client = Client(cluster)
    try:
        client.run(set_threads, 1)
        client.run(__import__, "latentstitch.migrate")
        for index, sample in sizes:
            rows.append(measure_apply(migration, index, folder, args.chunk_rows, client, sample))
            print(rows[-1])
    finally:
        client.close()
        cluster.close()
    small_npy.unlink()
    return rows


def _print(results: dict) -> None:
    if "apply" in results:
        print_table(
            "apply_migration (vectors per minute, wall; peak memory MiB: RSS / anonymous)",
            ["rows", "mode", "vectors/min", "driver", "worker (max)", "CPU s driver / workers"],
            [
                [
                    f"{r['rows']:,}",
                    r["mode"],
                    f"{r['vectors_per_min']:,.0f}",
                    f"{r['driver_peak_rss_mib']:,.0f} / {r['driver_peak_anon_mib']:,.0f}",
                    f"{r['worker_peak_rss_mib']:,.0f} / {r['worker_peak_anon_mib']:,.0f}"
                    if r["mode"] == "cluster"
                    else "-",
                    f"{r['driver_cpu_s']:.1f} / {r['workers_cpu_s']:.1f}",
                ]
                for r in results["apply"]
            ],
        )
    if "open" in results:
        o = results["open"]
        print(
            f"open IVF ({o['bytes'] / 2**20:,.0f} MiB): {o['open_first_s']:.2f} s, digest {o['digest_first_s']:.2f} s; "
            f"second open {o['open_second_s']:.2f} s, digest {o['digest_second_s']:.3f} s; every row read in batches "
            f"of 65,536 in {o['read_all_s']:.1f} s, memory +{o['read_all_peak_anon_growth_mib']:,.0f} MiB (anonymous)"
        )
    if "cascade" in results:
        c = results["cascade"]
        own = c["own_search"]
        rows = []
        for d in c["depths"]:
            for phase in ("cold", "warm", "exact"):
                if phase not in d:
                    continue
                p = d[phase]
                rows.append(
                    [
                        d["depth"],
                        phase,
                        f"{own['median_ms']:.2f}",
                        f"{p['encoding']['median_ms']:.2f}",
                        f"{p['median_ms']:.2f} / {p['p90_ms']:.2f}",
                        f"{p['cpu_median_ms']:.2f}",
                        f"{p['overhead']['median_ms']:.2f}",
                        f"{p['overhead_ratio']:.2f}",
                        f"{p['embedded_per_query']:.0f}",
                    ]
                )
        for d in c["depths"]:
            if "warm_top10_agreement_with_exact" in d:
                print(
                    f"depth {d['depth']}: the warm top 10 agrees with every row read on "
                    f"{d['warm_top10_agreement_with_exact']:.3f}; lists {d.get('lists')}"
                )
        print_table(
            "cascade per query (ms, median; cascade also p90)",
            ["depth", "pass", "own search", "encoding", "cascade", "cascade CPU", "overhead", "ratio", "embedded/q"],
            rows,
        )
