"""Does the bridge's label-free choice hold on pairs nobody tuned it to? Which label-free score predicts the
consumer?

``python -m benchmarks bridge_generalisation [--budgets 100,768] [--seeds 3]
[--half development|validation|both|fresh|banked] [--out FOLDER]`` (run it niced: about a minute per ordered pair,
budget and seed on two busy cores).

Twelve pairs of real encoders over packaged data (``benchmarks/_pairs/pairs.py``), both directions (24 ordered
pairs): text (MiniLM-L6, MiniLM-L3, e5-small, USE-m3 on BBC News and on Bible verses labelled by section),
images (EfficientNet-lite0 / lite1 on Fashion-MNIST and MNIST), words (GloVe vs spaCy; fastText vs word2vec
trained with gensim) and cross-lingual (Spanish verses through USE-m3 / e5-small vs English through MiniLM). The
pairs are split into a development and a validation half before any result was seen (hash of the pair name,
balanced over modalities; both directions of a pair in one half). For every anchor budget and seed, anchors are
drawn from the train items; every route of ``latentstitch.bridge.ROUTES`` (but ``runs.SKIPPED``) is scored
without labels by 5-fold cross-validation on the anchors (``_pairs/scores.py``: the candidate scores) and measured
on the test items by three consumers of the old (target) model: a logistic-regression head, an MLP head (macro-F1,
accuracy) and a nearest-neighbour index (Recall@10). ``_pairs/study.py`` then ranks the candidate scores by how
well they order the routes as each consumer does (development half only) and evaluates the chosen rule on the
validation half.

Embeddings are computed once and cached in ``~/.cache/latentstitch/bridge_generalisation/`` (``$LATENTSTITCH_CACHE``
moves it); each run's route rows too (``runs/``; ``--fresh`` recomputes them). Results go to ``--out`` (default
``latentstitch-results/bridge-generalisation``; the committed ``results/bridge/generalisation`` is written only when
named).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

RUN_BY_DEFAULT = False
BUDGETS = (50, 100, 300, 768)
SEEDS = 3
DEFAULT_OUT = "latentstitch-results/bridge-generalisation"


NOTES = [
    "Command: `PYTHONPATH=src nice -n 10 .venv/bin/python -m benchmarks bridge_generalisation [--budgets ...] "
    "[--seeds N] [--half ...] --out FOLDER` (one thread; rows cached per run, `--cached-only` reports them).",
    "Routes: every route registered in latentstitch.bridge.ROUTES on main at the time of the run except unpaired, "
    "sparse_lasso and functional_map (too slow here); scored by 5-fold cross-validation on the anchors.",
    "Consumers of the old (target) model: `lr` = StandardScaler + LogisticRegression (like the library's LinearHead), "
    "`lr_raw` = LogisticRegression on the raw vectors, `mlp` = StandardScaler + MLPClassifier(128, early stopping), "
    "all trained on the target's train vectors (relative routes: its relative vectors) and scored on bridged test "
    "items (macro-F1); `recall10` = the bridged test item's own target vector among its 10 nearest target vectors "
    "of all items (cosine). Ratios: figure / the weaker encoder's own head on its own vectors (Recall@10: as is).",
    "Words pairs have no labels: Recall@10 only.",
    "`current` re-computes the rule Bridge ships from fold means (its paired standard error over anchors is "
    "approximated by (1 - MRR)/sqrt(5)); the other rules pick the route with the highest candidate score.",
    "The rule per consumer is chosen on the development runs only (highest mean Spearman); the validation tables "
    "show that fixed rule and the current one.",
]


def add_arguments(parser) -> None:
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"folder for results.json and results.md (default {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--budgets", default=",".join(map(str, BUDGETS)), help="anchor budgets (default 50,100,300,768)"
    )
    parser.add_argument("--seeds", type=int, default=SEEDS, help="anchor draws per budget (default 3)")
    parser.add_argument(
        "--half",
        default="both",
        type=_halves,
        help="which pairs to run, comma-separated (development, validation, both: those two; fresh: pairs.FRESH; "
        "banked: pairs.BANKED; banked2: pairs.BANKED2)",
    )
    parser.add_argument("--sets", default="", help="only the pairs of these item sets (comma-separated)")
    parser.add_argument("--fresh", action="store_true", help="recompute runs already in the cache")
    parser.add_argument(
        "--fits",
        default="",
        help="the library fits to run per run (comma-separated kinds of benchmarks/_pairs/library.KINDS; default all)",
    )
    parser.add_argument(
        "--route-scores",
        action="store_true",
        help="also compute the candidate-score rows (every route's label-free scores, the rule study) of runs that "
        "lack them (slow; by default only cached ones are read)",
    )
    parser.add_argument(
        "--cached-only", action="store_true", help="report the runs already in the cache; compute nothing"
    )
    parser.add_argument(
        "--head-noise",
        action="store_true",
        help="instead of the route study: for runs with the every-route table, every route as a head= user gets it and "
        "the noise of the test figure the within-0.01 goal is judged by (benchmarks/_pairs/head_noise.py; ~30 s per "
        "run; writes only head_noise.md and head_noise.json into --out)",
    )


def _halves(value) -> tuple[str, ...]:
    """``--half``: comma-separated halves ("both" = development and validation)."""
    if isinstance(value, tuple):
        return value
    known = ("development", "validation", "fresh", "banked", "banked2")
    out: list[str] = []
    for name in str(value).split(","):
        name = name.strip()
        if name not in (*known, "both"):
            raise argparse.ArgumentTypeError(f"expected halves among {', '.join(known)} or both, got {name!r}")
        out += ["development", "validation"] if name == "both" else [name]
    return tuple(dict.fromkeys(out))


def _run_path(key: str) -> Path:
    from benchmarks._pairs.datasets import cache_dir

    safe = key.replace("|", "_").replace(":", "_").replace(">", "-to-").replace("@", "-")
    return cache_dir() / "runs" / f"{safe}.json"


def _load_cached(path: Path, fresh: bool) -> dict:
    if fresh or not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {row["route"]: row for row in data.get("routes", []) if isinstance(row, dict) and "route" in row}


def _load_library(path: Path, fresh: bool) -> dict | None:
    if fresh or not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "fits" in data else None


def _stale(row: dict) -> bool:
    """A cached row without every candidate score (computed before a score was added): its scores are redone."""
    from benchmarks._pairs.scores import CANDIDATES

    if "error" in row:
        return False
    consumers = row.get("consumers", {})
    if "lr_f1" in consumers and "lr_raw_f1" not in consumers:  # measured before the raw-vector head was added
        row.pop("consumers")
    return "consumers" not in row or not set(CANDIDATES) <= set(row.get("scores", {}))


def collect_runs(args) -> list[dict]:
    """Every (ordered pair, budget, seed) run: route rows from the cache, missing routes computed and cached."""
    from benchmarks._pairs.datasets import cache_dir, load_set
    from benchmarks._pairs.library import KINDS, library_record
    from benchmarks._pairs.pairs import split_pairs
    from benchmarks._pairs.runs import PairContext, anchor_rows, route_names, run_route
    from latentstitch._core.atomic import write_text

    budgets = [int(b) for b in str(args.budgets).split(",") if b]
    halves = split_pairs()
    wanted = _halves(args.half)
    sets = {s for s in str(getattr(args, "sets", "")).split(",") if s}
    routes = route_names()
    runs: list[dict] = []
    started = time.perf_counter()
    for half in wanted:
        for pair in halves[half]:
            if sets and pair.item_set not in sets:
                continue
            if getattr(args, "cached_only", False) and not (cache_dir() / f"{pair.item_set}.safetensors").exists():
                continue
            items = load_set(pair.item_set)
            for source, target in pair.directions():
                ctx = None
                for budget in budgets:
                    if budget > len(items.train) - 5:
                        continue
                    for seed in range(int(args.seeds)):
                        key = f"{pair.name}|{source}>{target}|{budget}|{seed}"
                        path = _run_path(key)
                        rows = _load_cached(path, bool(getattr(args, "fresh", False)))
                        missing = [r for r in routes if r not in rows or _stale(rows[r])]
                        cached_only = getattr(args, "cached_only", False)
                        if missing and (cached_only or not getattr(args, "route_scores", False)):
                            rows = {k: v for k, v in rows.items() if k not in missing}
                            missing = []
                        anchors = anchor_rows(f"{pair.name}:{source}>{target}", budget, seed, items.train)
                        if missing:
                            ctx = ctx or PairContext(items, source, target)
                            for name in missing:
                                rows[name] = run_route(name, ctx, anchors, seed, rows.get(name))
                            path.parent.mkdir(parents=True, exist_ok=True)
                            write_text(path, json.dumps({"key": key, "own": ctx.own, "routes": list(rows.values())}))
                            print(f"{time.perf_counter() - started:7.0f}s {key}: {len(missing)} routes", flush=True)
                        library_path = path.with_name(path.stem + ".library.json")
                        library = _load_library(library_path, bool(getattr(args, "fresh", False)))
                        kinds = [k for k in str(getattr(args, "fits", "") or ",".join(KINDS)).split(",") if k]
                        todo = [k for k in kinds if library is None or k not in library["fits"]]
                        if todo and not cached_only:
                            ctx = ctx or PairContext(items, source, target)
                            print(f"{time.perf_counter() - started:7.0f}s {key}: library fits", flush=True)
                            record = library_record(ctx, anchors, seed, routes, todo, library)
                            library = {**record, "key": key, "own": ctx.own}
                            library_path.parent.mkdir(parents=True, exist_ok=True)
                            write_text(library_path, json.dumps(library))
                        if library is None and not path.exists():
                            continue
                        noise = None
                        if getattr(args, "head_noise", False) and library is not None:
                            noise, ctx = _head_noise(
                                path, library, items, (source, target), anchors, seed, ctx, cached_only
                            )
                        if library is not None:  # words pairs have no labels: their "own" is empty
                            own = library.get("own", {})
                        else:
                            own = json.loads(path.read_text()).get("own", {})
                        runs.append(
                            {
                                "half": half,
                                "pair": pair.name,
                                "modality": pair.modality,
                                "item_set": pair.item_set,
                                "source": source,
                                "target": target,
                                "budget": budget,
                                "seed": seed,
                                "own": own,
                                "routes": [rows[r] for r in routes if r in rows],
                                "library": library,
                                **({"head_noise": noise} if noise else {}),
                            }
                        )
    return runs


def _head_noise(path: Path, library: dict, items, direction: tuple[str, str], anchors, seed: int, ctx, cached_only):
    """The run's ``head_noise`` figures per consumer (``benchmarks/_pairs/head_noise.py``; cached beside the run),
    or None where it has none; and the direction's ``PairContext`` (``ctx``, built here if it was not yet: its heads
    are trained once per direction, not once per run)."""
    from benchmarks._pairs.head_noise import KIND, f1_figure, head_predictions, index_hits, mean_figure, noise_figures
    from benchmarks._pairs.runs import PairContext
    from latentstitch._core.atomic import write_text

    fits = library["fits"]
    consumers = [c for c, kind in KIND.items() if kind in fits and (c == "index" or items.labels is not None)]
    if "index/all" not in fits or not consumers:
        return None, ctx
    noise_path = path.with_name(path.stem + ".headnoise.json")
    if noise_path.exists():
        return json.loads(noise_path.read_text()), ctx
    if cached_only:
        return None, ctx
    ctx = ctx or PairContext(items, *direction)
    figures = {}
    for consumer in consumers:
        rules = None
        if consumer == "index":
            names, hits, pick = index_hits(ctx, anchors, seed, library, KIND[consumer])
            figure, n = mean_figure(hits), hits.shape[1]
        else:
            names, predicted, pick, rules = head_predictions(ctx, anchors, seed, library, consumer)
            figure, n = f1_figure(predicted, items.labels[items.test]), predicted.shape[1]
        figures[consumer] = noise_figures(names, figure, pick, n, seed, rules)
    write_text(noise_path, json.dumps(figures))
    print(f"    head noise: {path.stem}", flush=True)
    return figures, ctx


def run(args) -> None:
    from benchmarks._pairs.pairs import split_pairs
    from benchmarks._pairs.shipped import summary
    from benchmarks._pairs.study import study, table
    from latentstitch._core.atomic import write_text
    from latentstitch._core.provenance import with_provenance

    command = getattr(args, "command", "python -m benchmarks bridge_generalisation")

    out = Path(getattr(args, "out", DEFAULT_OUT))
    runs = collect_runs(args)
    out.mkdir(parents=True, exist_ok=True)
    if getattr(args, "head_noise", False):  # its own study: head_noise.md/.json, the route study left as it is
        from benchmarks._pairs.head_noise import __doc__ as noise_doc
        from benchmarks._pairs.head_noise import noise_table, rules_table

        keys = ("half", "pair", "source", "target", "budget", "seed", "head_noise")
        noise = [{k: r[k] for k in keys} for r in runs if r.get("head_noise")]
        write_text(out / "head_noise.json", json.dumps(noise, indent=1))
        text = "# The pick, the best route and the noise of the test figure\n\n" + noise_doc.strip() + "\n\n"
        rules = rules_table(runs)
        if rules:
            rules = [
                "",
                "Head rules, each judged like the pick (within 0.01 of a head= user's best route):",
                "",
                *rules,
            ]
        write_text(out / "head_noise.md", with_provenance(text + "\n".join(noise_table(runs) + rules) + "\n", command))
        print((out / "head_noise.md").read_text())
        return
    results = {
        "benchmark": "bridge_generalisation",
        "split": {half: [p.name for p in pairs] for half, pairs in split_pairs().items()},
        "split_rule": "per modality, pairs ordered by the SHA-256 of their name, alternating development / "
        "validation; both directions of a pair in one half; fixed before any result was seen",
        "notes": NOTES,
        "study": study([r for r in runs if r["routes"]]),
        "shipped": summary(runs),
        "runs": runs,
    }
    write_text(out / "results.json", json.dumps(results, indent=1))
    write_text(out / "results.md", with_provenance(table(results), command))
    print((out / "results.md").read_text())
