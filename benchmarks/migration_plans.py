"""What to re-embed first: ``plan_sample``'s strategies judged on the migration benchmark's data.
``python -m benchmarks migration_plans [--seeds 3] [--sets bbc,bible,kjv] [--budgets 0.01,0.05,0.1] [--out DIR]``.

Data (``benchmarks/_migration_data.py``, cached under ~/.cache/latentstitch/migration): bbc (MiniLM-L3 -> MiniLM-L6),
bible (USE-m3 -> e5-small) and kjv (MiniLM-L3 -> MiniLM-L6): one query per document (row i's query finds row i).

**The evaluation split** (fixed here, committed before the first run; ``traffic`` below, seeded by ``SPLIT_SEED``
and not by the plan's seed, so every strategy and seed sees the same split): users' interest is skewed over topics.
The documents, in the data's own order (Bible books in canonical order, BBC articles by category), are cut into
``TOPICS`` contiguous blocks; block popularity is Zipf (1 / rank, the ranks a random permutation of the blocks); a
query's traffic weight is its block's popularity. Each document's query goes at random, half and half, either to
the *log pool* or to the *held-out pool*. The **query log** given to ``access`` is ``LOG_DRAWS`` x n draws, with
replacement and in proportion to traffic, from the log pool, embedded by the old model (a popular query appears
many times). The **held-out queries** are the whole held-out pool: never a query of the log. Scored, new-model
queries on the migrated index (corpus-side: every document bridged, the re-embedded ones written with their true new
vectors), Recall@10 as a share of a full re-embed's on the same queries:

- ``traffic``: every held-out query, weighted by its traffic (what the users will see);
- ``traffic, rest``: the held-out queries whose document nobody re-embedded, weighted by traffic (this set differs
  between strategies: each strategy's re-embedded documents leave it);
- ``uniform``: every held-out query, equally weighted (every document's query as likely as another's).

Each plan re-embeds max(1% / 5% / 10% of the documents, 20), a random 30% of them (at least 10) held out for the
certificate as ``migrate plan`` does; ``fit_migration`` (corpus-side, ridge route) is fitted on the rest. ``random``,
``kmeans``, ``access`` (the log above) and ``uncertainty`` (two stages: a k-means seed of half the fit part, at
least 10 documents, a
provisional migration fitted on it, then the documents of lowest neighbourhood agreement up to the budget; the final
migration fitted on both stages) re-embed the same number of documents.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np

from latentstitch._core.provenance import with_provenance

RUN_BY_DEFAULT = False
SETS = {
    "bbc": ("paraphrase-minilm-l3", "minilm-l6"),
    "bible": ("use-m3", "e5-small"),
    "kjv": ("paraphrase-minilm-l3", "minilm-l6"),
}
STRATEGIES = ("random", "kmeans", "access", "uncertainty")
SPLIT_SEED = 4040
TOPICS = 50
LOG_DRAWS = 0.5  # query-log entries per document of the index
SCORES = ("traffic", "traffic, rest", "uniform")


def add_arguments(parser) -> None:
    parser.add_argument("--seeds", type=int, default=3, help="plan seeds per configuration (default 3)")
    parser.add_argument("--sets", default="bbc,bible,kjv", help="retrieval sets (default bbc,bible,kjv)")
    parser.add_argument("--budgets", default="0.01,0.05,0.1", help="re-embedded shares (default 0.01,0.05,0.1)")
    parser.add_argument(
        "--out",
        default="latentstitch-results/migration-plans",
        help="folder for results.json and table.md (default latentstitch-results/migration-plans; the committed run "
        "in results/migration-plans is written only when named)",
    )


def traffic(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fixed evaluation split of an ``n``-document set: (traffic weight per query, the query log's rows (with
    repeats), the held-out query rows). Log and held-out rows never share a query."""
    rng = np.random.default_rng(SPLIT_SEED)
    block = np.arange(n) * TOPICS // n
    popularity = 1.0 / (1 + rng.permutation(TOPICS))
    weight = popularity[block]
    in_log = rng.random(n) < 0.5
    log_pool, held = np.flatnonzero(in_log), np.flatnonzero(~in_log)
    log = rng.choice(log_pool, size=round(LOG_DRAWS * n), replace=True, p=weight[log_pool] / weight[log_pool].sum())
    return weight, log, held


def _recall(queries: np.ndarray, index: np.ndarray, relevant: np.ndarray) -> np.ndarray:
    from latentstitch.migrate import per_query, ranks, search

    return per_query(ranks(search(queries, index, 10, "cosine"), relevant))["recall@10"]


def _fit(old_d, new_d, plan, seed):
    from latentstitch.migrate import fit_migration

    ids = np.arange(len(old_d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_migration(
            ids,
            old_d,
            plan.ids,
            new_d[plan.ids],
            holdout_ids=plan.holdout_ids,
            modes=("corpus",),
            routes=("ridge",),
            folds=3,
            inner_folds=2,
            seed=seed,
        )


def plan_for(strategy, old_q, old_d, new_d, count, holdout, seed, log):
    """The plan of ``strategy`` (and for ``uncertainty`` its provisional migration fitted first)."""
    from latentstitch.migrate import plan_sample

    ids = np.arange(len(old_d))
    options = {"holdout": holdout, "seed": seed, "strategy": strategy}
    if strategy == "access":
        return plan_sample(ids, old_d, count, query_log=old_q[log], **options)
    if strategy == "uncertainty":  # the provisional fit needs at least 10 pairs (its 2-fold cross-validation)
        options["first_share"] = max(0.5, 10 / (count - round(holdout * count)))
    plan = plan_sample(ids, old_d, count, **options)
    if strategy == "uncertainty":
        provisional = _fit(old_d, new_d, plan, seed)
        plan = plan_sample(ids, old_d, count, bridge=provisional, previous=plan, **options)
    return plan


def one_run(strategy, old_q, old_d, new_q, new_d, budget, seed, split, reference) -> dict:
    from latentstitch.migrate import prepare

    weight, log, held = split
    count = max(round(budget * len(old_d)), 20)
    plan = plan_for(strategy, old_q, old_d, new_d, count, max(0.3, 10 / count), seed, log)
    assert len(plan.ids) == count and len(np.unique(plan.ids)) == count
    migration = _fit(old_d, new_d, plan, seed)
    migrated = migration.transform_corpus(old_d)
    migrated[plan.ids] = prepare(new_d[plan.ids], "cosine").numpy()
    recall = _recall(new_q[held], migrated, held)
    rest = ~np.isin(held, plan.ids)
    w = weight[held]
    return {
        "traffic": float(np.average(recall, weights=w) / np.average(reference, weights=w)),
        "traffic, rest": float(
            np.average(recall[rest], weights=w[rest]) / np.average(reference[rest], weights=w[rest])
        ),
        "uniform": float(recall.mean() / reference.mean()),
        "held-out re-embedded": float(np.isin(held, plan.ids).mean()),
    }


def run(args) -> None:
    from benchmarks._migration_data import embedded

    out_dir = Path(getattr(args, "out", "latentstitch-results/migration-plans"))
    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = 1 if args.quick else args.seeds
    budgets = (0.05,) if args.quick else tuple(float(b) for b in args.budgets.split(","))
    results = {"command": getattr(args, "command", ""), "quick": bool(args.quick), "seeds": seeds, "runs": []}
    started = time.perf_counter()
    for name in args.sets.split(","):
        old_name, new_name = SETS[name]
        old_q, old_d = embedded(name, old_name)
        new_q, new_d = embedded(name, new_name)
        split = traffic(len(old_d))
        weight, _, held = split
        reference = _recall(new_q[held], new_d, held)
        keep_old = _recall(old_q[held], old_d, held)
        results.setdefault("sets", {})[name] = {
            "pair": f"{old_name} -> {new_name}",
            "documents": len(old_d),
            "log entries": len(split[1]),
            "held-out queries": len(held),
            "full re-embed R@10 (traffic)": float(np.average(reference, weights=weight[held])),
            "keep old model x (traffic)": float(
                np.average(keep_old, weights=weight[held]) / np.average(reference, weights=weight[held])
            ),
        }
        for budget in budgets:
            for strategy in STRATEGIES:
                for seed in range(seeds):
                    row = one_run(strategy, old_q, old_d, new_q, new_d, budget, seed, split, reference)
                    row.update(set=name, budget=budget, strategy=strategy, seed=seed)
                    results["runs"].append(row)
                    print(row, f"{time.perf_counter() - started:.0f}s", flush=True)
            results["seconds"] = time.perf_counter() - started
            _write(out_dir, results)
    print((out_dir / "table.md").read_text())


def _write(out_dir: Path, results: dict) -> None:
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    lines = [
        "# What to re-embed first: plan strategies",
        "",
        "--quick: a smoke run of one seed and one budget, not a result" if results["quick"] else "",
        "",
        "Migrated (corpus-side) Recall@10 of held-out queries as a share of a full re-embed's on the same queries; "
        f"mean ± sd over {results['seeds']} plan seeds; the split (log / held-out queries, traffic) fixed in "
        "benchmarks/migration_plans.py before the first run. Columns: see the module docstring.",
        "",
    ]
    for name, info in results.get("sets", {}).items():
        lines.append(
            f"- {name} ({info['pair']}, {info['documents']} documents): {info['log entries']} log entries, "
            f"{info['held-out queries']} held-out queries; full re-embed R@10 (traffic) "
            f"{info['full re-embed R@10 (traffic)']:.3f}; keeping the old model "
            f"{info['keep old model x (traffic)']:.3f}x"
        )
    lines += ["", "| set | budget | strategy | " + " | ".join(f"{s} x" for s in SCORES) + " | held-out re-embedded |"]
    lines.append("|---" * (4 + len(SCORES)) + "|")
    groups: dict = {}
    for row in results["runs"]:
        groups.setdefault((row["set"], row["budget"], row["strategy"]), []).append(row)
    for (name, budget, strategy), rows in groups.items():
        cells = [f"{np.mean([r[s] for r in rows]):.3f} ± {np.std([r[s] for r in rows]):.3f}" for s in SCORES]
        reached = np.mean([r["held-out re-embedded"] for r in rows])
        lines.append(f"| {name} | {budget:.0%} | {strategy} | " + " | ".join(cells) + f" | {reached:.1%} |")
    lines += [
        "",
        "Against kmeans, per set and budget (difference of the means; seeds where the strategy is higher):",
        "",
    ]
    for (name, budget, strategy), rows in groups.items():
        base = groups.get((name, budget, "kmeans"))
        if strategy == "kmeans" or base is None or len(base) != len(rows):
            continue
        parts = []
        for score in SCORES:
            diff = [r[score] - b[score] for r, b in zip(rows, base, strict=True)]
            parts.append(f"{score} {np.mean(diff):+.3f} ({sum(d > 0 for d in diff)}/{len(diff)})")
        lines.append(f"- {name} {budget:.0%} {strategy}: " + "; ".join(parts))
    page = "\n".join(lines) + "\n"
    (out_dir / "table.md").write_text(
        with_provenance(page, results["command"] or "python -m benchmarks migration_plans")
    )
