"""Cascade search (``Migration.search``) on the migration benchmark's ``kjv`` set: 10,000 Bible verses, the World
English Bible verse the document, the King James verse its query; MiniLM-L3 (paraphrase) the old model, MiniLM-L6
the new one (``benchmarks/_migration_data.py`` embeds them once, cached under ~/.cache/latentstitch/migration).
``python -m benchmarks migration_cascade [--seeds N] [--depths 50,100,200] [--budget 0.05] [--queries 1000]``.

The protocol (fixed before its first run): per seed, ``plan_sample`` (k-means) chooses ``--budget`` of the documents
to re-embed up front (30% of them held out of the fit, as ``migrate plan`` does), ``fit_migration`` fits on them
with their queries as the query log (unlabelled; ``benchmarks migration``'s quality protocol), and the new collection
starts holding the re-embedded documents' new vectors. ``--queries`` queries of the documents nobody re-embedded
(drawn with the seed) are then served in batches of 100 through the cascade at each depth (the new collection
opened once, as a server keeps it), each depth from the same starting collection; the candidates' new vectors come
from the cached MiniLM-L6 embeddings (their encoding time is left out of the timings and reported apart:
``--encode-sample`` texts through MiniLM-L6).

Measured: Recall@10 of the cascade, of the full re-embed (the new model over every document) and of doing nothing
(the old model end to end); the cascade's retention (its Recall@10 / the full re-embed's) and its top-10 overlap with
the full re-embed's answers; the share of the index the queries touched (new vectors computed and written) per 1,000
queries; and the time per query of the cascade (bridge, the store's search at the depth, the lookup and write-back,
the ranking; cold: while it writes, warm: every candidate already there) against the store's own search of k=10,
on two stores: a FAISS flat index (FAISS collection) and a ``.npy`` file (exact search; ``.npy`` collection). Times
are CPU seconds of this process (one thread: steady on a shared machine, where wall time is not).
Results: printed, and written to ``latentstitch-results/migration-cascade/results.json`` (``--output``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks._harness import print_table
from benchmarks._migration_data import embedded, recall10

#: Needs the kjv embeddings of two models (minutes to compute when not cached) and fits a migration per seed.
RUN_BY_DEFAULT = False
BATCH = 100
OLD, NEW = "paraphrase-minilm-l3", "minilm-l6"


def add_arguments(parser) -> None:
    parser.add_argument("--set", default="kjv", help="retrieval set (default kjv; bbc has the same two models)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds (plan and query draw; default 3)")
    parser.add_argument("--depths", default="50,100,200", help="cascade depths (default 50,100,200)")
    parser.add_argument("--budget", type=float, default=0.05, help="share re-embedded up front (default 0.05)")
    parser.add_argument("--queries", type=int, default=1000, help="queries served per seed (default 1000)")
    parser.add_argument(
        "--routes", default="default", help="bridge routes fit may use, comma-separated (default: the library's)"
    )
    parser.add_argument("--stores", default="faiss,npy", help="old stores measured (default faiss,npy)")
    parser.add_argument("--encode-sample", type=int, default=200, help="documents encoded to time MiniLM-L6 (0: not)")
    parser.add_argument(
        "--output",
        type=Path,
        default=Path("latentstitch-results/migration-cascade/results.json"),
        help="the results JSON (default latentstitch-results/migration-cascade/results.json)",
    )


def _old_store(kind: str, folder: Path, vectors: np.ndarray) -> Path:
    if kind == "npy":
        path = folder / "old.npy"
        np.save(path, vectors)
        return path
    import faiss

    index = faiss.IndexIDMap2(faiss.IndexFlatIP(vectors.shape[1]))
    index.add_with_ids(vectors, np.arange(len(vectors), dtype=np.int64))
    path = folder / "old.index"
    faiss.write_index(index, str(path))
    return path


def _serve(migration, store, collection, queries, depth, new_d):
    """Every query through the cascade in batches; its answers, seconds spent outside ``new_vectors``, and the
    seconds ``new_vectors`` took (a lookup of cached vectors here: subtracted)."""
    spent = [0.0]

    def new_vectors(ids):
        start = time.process_time()
        out = new_d[np.asarray(ids, dtype=np.int64)]
        spent[0] += time.process_time() - start
        return out

    answers = []
    start = time.process_time()
    for first in range(0, len(queries), BATCH):
        result = migration.search(
            queries[first : first + BATCH], 10, store=store, new_store=collection, depth=depth, new_vectors=new_vectors
        )
        answers.append(result.ids.astype(np.int64))
    total = time.process_time() - start
    return np.concatenate(answers), total - spent[0]


def _own_search_seconds(migration, store, queries, k=10) -> float:
    """The store's own search of ``k`` on the bridged queries, in the same batches (the bridge not counted)."""
    bridged = migration.transform_queries(queries)
    start = time.process_time()
    for first in range(0, len(bridged), BATCH):
        store.search(bridged[first : first + BATCH], k)
    return time.process_time() - start


def _encode_seconds(count: int) -> float | None:
    """Seconds per document for MiniLM-L6 to embed ``count`` kjv documents (the cost the cascade adds per new
    candidate), or None when not measured."""
    if count <= 0:
        return None
    from benchmarks._migration_data import texts
    from latentstitch.encoders import get_encoder

    documents = texts("kjv")[1][:count]
    encoder = get_encoder(NEW)
    encoder.encode(documents[:8], progress=False, cache=False)  # loaded and warm
    start = time.process_time()
    encoder.encode(documents, progress=False, cache=False)
    return (time.process_time() - start) / count


def one_seed(seed, args, old_q, old_d, new_q, new_d, depths, kinds):
    from latentstitch.migrate import (
        QuerySample,
        fit_migration,
        open_collection,
        open_store,
        per_query,
        plan_sample,
        ranks,
        search,
    )

    n = len(old_d)
    ids = np.arange(n)
    plan = plan_sample(ids, old_d, round(args.budget * n), strategy="kmeans", holdout=0.3, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        migration = fit_migration(
            ids,
            old_d,
            plan.ids,
            new_d[plan.ids],
            queries=QuerySample(new_q[plan.fit_ids], old_q[plan.fit_ids]),
            holdout_ids=plan.holdout_ids,
            seed=seed,
            routes=None if args.routes == "default" else args.routes.split(","),
        )
    rest = np.setdiff1d(ids, plan.ids)
    asked = np.sort(np.random.default_rng(seed).choice(rest, min(args.queries, len(rest)), replace=False))
    queries = new_q[asked]
    full_top = search(queries, new_d, 10, "cosine")
    row = {
        "seed": seed,
        "re_embedded_up_front": len(plan.ids),
        "routes": migration.to_dict()["routes"],
        "full_reembed_recall10": recall10(queries, new_d, asked),
        "old_model_recall10": recall10(old_q[asked], old_d, asked),
        "query_side_single_stage_recall10": recall10(migration.transform_queries(queries), old_d, asked),
        "stores": {},
    }
    for kind in kinds:
        folder = Path(tempfile.mkdtemp(prefix="cascade-bench-"))
        try:
            store = open_store(_old_store(kind, folder, old_d), metric="cosine" if kind == "npy" else None)
            migration.record_index(store)
            start_path = folder / ("start.index" if kind == "faiss" else "start.npy")
            open_collection(start_path, store, migration.new_dimension, "cosine").add_missing(plan.ids, new_d[plan.ids])
            own = _own_search_seconds(migration, store, queries)
            per_depth = {}
            for depth in depths:
                new_path = folder / f"new-{depth}{start_path.suffix}"
                shutil.copy(start_path, new_path)
                collection = open_collection(new_path, store, migration.new_dimension, "cosine")
                before = collection.count_present()
                top, cold = _serve(migration, store, collection, queries, depth, new_d)
                touched = collection.count_present() - before
                again, warm = _serve(migration, store, collection, queries, depth, new_d)
                assert (again == top).all()  # the warm pass reads what the cold one wrote: the same answers
                recall = float(per_query(ranks(top, asked))["recall@10"].mean())
                overlap = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top, full_top, strict=True)]))
                per_depth[depth] = {
                    "recall10": recall,
                    "retention": recall / row["full_reembed_recall10"],
                    "overlap10_with_full_reembed": overlap,
                    "touched": touched,
                    "touched_share": touched / n,
                    "own_search_at_depth_ms_per_query": 1000
                    * _own_search_seconds(migration, store, queries, depth)
                    / len(asked),
                    "cold_ms_per_query": 1000 * cold / len(asked),
                    "warm_ms_per_query": 1000 * warm / len(asked),
                }
            row["stores"][kind] = {"own_search_ms_per_query": 1000 * own / len(asked), "depths": per_depth}
            store.close()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return row


def _unit(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def run(args) -> None:
    depths = [int(d) for d in args.depths.split(",")]
    kinds = args.stores.split(",")
    # cosine, as the migration benchmark measures: unit vectors (a FAISS inner-product index of them reads as cosine)
    old_q, old_d, new_q, new_d = (_unit(x) for x in (*embedded(args.set, OLD), *embedded(args.set, NEW)))
    rows = [one_seed(seed, args, old_q, old_d, new_q, new_d, depths, kinds) for seed in range(args.seeds)]
    encode = _encode_seconds(args.encode_sample)  # on kjv documents whatever the set (a verse: a short text)

    def mean(values):
        return float(np.mean(values))

    print_table(
        f"cascade on {args.set} ({OLD} -> {NEW}), {args.budget:.0%} re-embedded up front, {len(rows)} seeds, "
        f"{args.queries} queries each",
        [
            "arrangement",
            "Recall@10",
            "/ full re-embed",
            "overlap@10 with full",
            f"index touched by {args.queries} queries",
        ],
        [
            ["old model end to end", f"{mean([r['old_model_recall10'] for r in rows]):.3f}", "", "", ""],
            ["full re-embed", f"{mean([r['full_reembed_recall10'] for r in rows]):.3f}", "1.000", "1.000", "100%"],
            [
                "query-side single stage",
                f"{mean([r['query_side_single_stage_recall10'] for r in rows]):.3f}",
                f"{mean([r['query_side_single_stage_recall10'] / r['full_reembed_recall10'] for r in rows]):.3f}",
                "",
                "0%",
            ],
        ]
        + [
            [
                f"cascade depth {d}",
                f"{mean([r['stores'][kinds[0]]['depths'][d]['recall10'] for r in rows]):.3f}",
                f"{mean([r['stores'][kinds[0]]['depths'][d]['retention'] for r in rows]):.3f}",
                f"{mean([r['stores'][kinds[0]]['depths'][d]['overlap10_with_full_reembed'] for r in rows]):.3f}",
                f"{mean([r['stores'][kinds[0]]['depths'][d]['touched_share'] for r in rows]):.1%}",
            ]
            for d in depths
        ],
    )
    timing = []
    for kind in kinds:
        own = mean([r["stores"][kind]["own_search_ms_per_query"] for r in rows])
        timing.append([f"{kind}: own search, k=10", f"{own:.3f}", "", "1.0x", ""])
        for d in depths:
            cold = mean([r["stores"][kind]["depths"][d]["cold_ms_per_query"] for r in rows])
            warm = mean([r["stores"][kind]["depths"][d]["warm_ms_per_query"] for r in rows])
            at_depth = mean([r["stores"][kind]["depths"][d]["own_search_at_depth_ms_per_query"] for r in rows])
            timing.append(
                [f"{kind}: cascade depth {d}", f"{cold:.3f}", f"{warm:.3f}", f"{warm / own:.1f}x", f"{at_depth:.3f}"]
            )
    note = "" if encode is None else f" (+ MiniLM-L6 encoding: {1000 * encode:.2f} ms per new candidate, CPU)"
    print_table(
        f"CPU time per query, one thread, batches of {BATCH}{note}",
        ["", "cold ms (writing)", "warm ms (all there)", "warm / own search", "own search at the depth, ms"],
        timing,
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "command": getattr(args, "command", None),
        "set": args.set,
        "old": OLD,
        "new": NEW,
        "budget": args.budget,
        "queries": args.queries,
        "batch": BATCH,
        "encode_seconds_per_document": encode,
        "runs": rows,
    }
    args.output.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"written: {args.output}")
