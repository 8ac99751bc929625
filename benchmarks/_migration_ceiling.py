"""A diagnostic of the migration benchmark (``--parts ceiling``): how far each bridge route can go at all on a
retrieval set, fitted on *every* document and query (as if 100% were re-embedded, then every vector bridged
anyway). Its Recall@10 over the re-embedded reference is the route family's ceiling on that pair of encoders: a
budget's result cannot be expected above it. It fits on the very documents it measures (an oracle), so it only
explains the quality part's numbers; nothing is chosen from it."""

from __future__ import annotations

import time
import warnings

import numpy as np


def ceiling(args) -> None:
    from benchmarks._harness import print_table
    from benchmarks._migration_data import PAIRS, embedded, recall10
    from latentstitch.bridge import Bridge
    from latentstitch.migrate import prepare

    rows = []
    wanted = None if args.pairs is None else {tuple(p.split(">")) for p in args.pairs.split(",")}
    for name in args.sets.split(","):
        for old_name, new_name in PAIRS[name]:
            if wanted is not None and (old_name, new_name) not in wanted:
                continue
            old_q, old_d = (prepare(x, "cosine").numpy() for x in embedded(name, old_name))
            new_q, new_d = (prepare(x, "cosine").numpy() for x in embedded(name, new_name))
            every = np.arange(len(old_d))
            reference = recall10(new_q, new_d, every)
            old_end = recall10(old_q, old_d, every)
            for route in args.routes.split(","):
                started = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    corpus = Bridge(routes=[route], cv=2).fit(np.vstack([old_d, old_q]), np.vstack([new_d, new_q]))
                    query = Bridge(routes=[route], cv=2).fit(np.vstack([new_d, new_q]), np.vstack([old_d, old_q]))
                bridged_index = prepare(np.asarray(corpus.transform(old_d), np.float32), "cosine").numpy()
                bridged_queries = prepare(np.asarray(query.transform(new_q), np.float32), "cosine").numpy()
                rows.append(
                    [
                        name,
                        f"{old_name} -> {new_name}",
                        route,
                        old_end,
                        reference,
                        recall10(bridged_queries, old_d, every) / reference,
                        recall10(new_q, bridged_index, every) / reference,
                        time.perf_counter() - started,
                    ]
                )
                print(rows[-1], flush=True)
    print_table(
        "ceiling: each route fitted on every document and query (an oracle), Recall@10 / the re-embedded reference",
        ["set", "old -> new", "route", "old R@10", "reference R@10", "query-side x", "corpus-side x", "seconds"],
        rows,
    )
