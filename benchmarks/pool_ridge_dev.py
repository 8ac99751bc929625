"""Development check of ``ridge_pools`` (``latentstitch.alignment.PoolRidge``): does an affine map fitted on the pairs
plus pool pseudo-pairs help a classifier head where the orthogonal pool routes do not? (issue 39)

Development data only, never the few-pairs judging set (``benchmarks/_pairs/few_pairs_data.py``: Bible verses): the
BBC News articles of the migration benchmark's cache (``~/.cache/latentstitch/migration/bbc-*.npy``, 2,225 articles,
5 topics; ``python -m benchmarks._migration_data`` fills it), as two sets: ``documents`` (an article's lead, 600
characters) and ``queries`` (its first sentence). Encoders MiniLM-L6 and paraphrase-MiniLM-L3 (384-d), both
directions.

Protocol (fixed in a commit before the first run): for each seed in ``SEEDS`` a permutation of the 2,225 items
(``numpy.random.default_rng(seed)``): the first 445 are the test items, the next 100 the anchors (paired), the next
840 the source pool and the 840 after them the target pool (disjoint items: nobody's pool holds a partner of the
other's). Heads (scikit-learn ``LogisticRegression(max_iter=1000)``, standard-scaled ``lr`` and raw ``lr_raw``, as
``benchmarks/_pairs/scores.heads``) are trained on the target's own vectors of every non-test item (anchors and both
pools' items, 1,780) and read the bridged test vectors; macro-F1 over the test items, reported as a ratio to the
weaker encoder's own macro-F1 (each encoder's own heads on its own vectors). ``r2_scaled``: held-out R^2 of the
bridged test vectors with every target feature standard-scaled by the target's train statistics.

Methods: ``paired_pick`` = ``Bridge(consumer="scaled_head")`` on the anchors alone (what a user gets without pools);
``pools_pick`` = the same with both pools and ``routes=["auto", "ridge_pools"]`` (the pool test decides);
``ridge_loo`` (anchors alone), ``procrustes_pools``, ``self_learning``, ``bootstrap_pools``, ``ridge_pools``: each
route's estimator fitted directly, with the pools where it takes them; ``ridge_pools_pairs``: ``PoolRidge`` without
pools (its ridge on the anchors alone).

``--in-bridge``: also ``bridge_<route>`` for each pool route, ``Bridge(consumer="scaled_head", routes=[route])``
fitted with both pools (the route as a ``Bridge`` serves it: dead target features held at their value).

``--timing``: CPU seconds (one thread) of ``PoolProcrustes`` and ``PoolRidge`` fits at 100 anchors + 10,000-row
pools of 384-d Gaussian rows (target = source times a random non-orthogonal matrix, plus noise).

Run: ``nice -n 10 python -m benchmarks pool_ridge_dev [--out DIR] [--timing]`` (default out
``latentstitch-results/pool-ridge-dev``).
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np

SEEDS = (0, 1, 2, 3, 4)
SETS = ("documents", "queries")
ENCODERS = ("minilm-l6", "paraphrase-minilm-l3")
N_TEST, N_ANCHORS, N_POOL = 445, 100, 840
ROUTE_NAMES = ("ridge_loo", "procrustes_pools", "self_learning", "bootstrap_pools", "ridge_pools")
CACHE = Path.home() / ".cache" / "latentstitch" / "migration"
RUN_BY_DEFAULT = False


def add_arguments(parser) -> None:
    parser.add_argument("--out", default="latentstitch-results/pool-ridge-dev", help="output folder")
    parser.add_argument("--timing", action="store_true", help="also time the fits at 100 anchors + 10k pools")
    parser.add_argument(
        "--in-bridge",
        action="store_true",
        help="also fit each pool route alone inside a Bridge (bridge_<route>: the way a Bridge serves it, dead target "
        "features held)",
    )


def _heads(x: np.ndarray, y: np.ndarray) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "lr": make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, C=1.0)).fit(x, y),
            "lr_raw": LogisticRegression(max_iter=1000, C=1.0).fit(x, y),
        }


def _f1(heads: dict, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import f1_score

    return {name: float(f1_score(y, head.predict(x), average="macro")) for name, head in heads.items()}


def _r2_scaled(bridged: np.ndarray, truth: np.ndarray, train: np.ndarray) -> float:
    spread = train.std(axis=0)
    spread = np.where(spread > 0, spread, 1.0)
    residual = ((bridged - truth) / spread) ** 2
    total = ((truth - truth.mean(axis=0)) / spread) ** 2
    return float(1.0 - residual.sum() / total.sum())


def split(seed: int, n: int) -> dict[str, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    cuts = np.cumsum([N_TEST, N_ANCHORS, N_POOL, N_POOL])
    test, anchors, source_pool, target_pool = (order[a:b] for a, b in zip([0, *cuts[:-1]], cuts, strict=True))
    return {"test": test, "anchors": anchors, "source_pool": source_pool, "target_pool": target_pool}


def one_run(vectors: dict, labels: np.ndarray, source: str, target: str, seed: int, in_bridge: bool = False) -> dict:
    from latentstitch.bridge import ROUTES, Bridge

    rows = split(seed, len(labels))
    train = np.concatenate([rows["anchors"], rows["source_pool"], rows["target_pool"]])
    s, t = vectors[source], vectors[target]
    test_y = labels[rows["test"]]
    own = {side: _f1(_heads(v[train], labels[train]), v[rows["test"]], test_y) for side, v in (("s", s), ("t", t))}
    weaker = {head: min(own["s"][head], own["t"][head]) for head in own["t"]}
    target_heads = _heads(t[train], labels[train])
    pairs = (s[rows["anchors"]], t[rows["anchors"]])
    pools = {"source_pool": s[rows["source_pool"]], "target_pool": t[rows["target_pool"]]}
    fitted: dict = {}
    seconds: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, make in (
            ("paired_pick", lambda: Bridge(consumer="scaled_head", seed=seed).fit(*pairs)),
            (
                "pools_pick",
                lambda: Bridge(consumer="scaled_head", seed=seed, routes=["auto", "ridge_pools"]).fit(*pairs, **pools),
            ),
            *((route, lambda route=route: _fit_route(ROUTES[route], pairs, pools)) for route in ROUTE_NAMES),
            ("ridge_pools_pairs", lambda: ROUTES["ridge_pools"].build().fit(*pairs)),
            *(
                (
                    f"bridge_{route}",
                    lambda route=route: Bridge(consumer="scaled_head", seed=seed, routes=[route]).fit(*pairs, **pools),
                )
                for route in (ROUTE_NAMES[1:] if in_bridge else ())
            ),
        ):
            started = time.process_time()
            fitted[name] = make()
            seconds[name] = time.process_time() - started
    out = {"seed": seed, "source": source, "target": target, "own_f1": own, "methods": {}}
    for name, model in fitted.items():
        bridged = np.asarray(model.transform(s[rows["test"]]), dtype=np.float64)
        record = {"cpu_seconds": round(seconds[name], 2)}
        if name.endswith("_pick") or name.startswith("bridge_"):
            record["route"] = model.route_
        if getattr(model, "family_", "translation") == "translation":
            f1 = _f1(target_heads, bridged, test_y)
            record.update({f"{h}_f1": f1[h] for h in f1})
            record.update({f"{h}_ratio": f1[h] / weaker[h] for h in f1})
            record["r2_scaled"] = _r2_scaled(bridged, t[rows["test"]], t[train])
        else:  # a relative pick: its head is trained on the target's relative vectors (Bridge.fit_head's way)
            relative_heads = _heads(np.asarray(model.transform_target(t[train]), dtype=np.float64), labels[train])
            f1 = _f1(relative_heads, bridged, test_y)
            record.update({f"{h}_f1": f1[h] for h in f1})
            record.update({f"{h}_ratio": f1[h] / weaker[h] for h in f1})
            record["r2_scaled"] = None
        out["methods"][name] = record
    return out


def _fit_route(spec, pairs, pools):
    estimator = spec.build()
    return estimator.fit(*pairs, **pools) if spec.pools else estimator.fit(*pairs)


def timing(seed: int = 0) -> dict:
    import torch

    from latentstitch.alignment import PoolProcrustes, PoolRidge

    rng = np.random.default_rng(seed)
    d, n, m = 384, 100, 10_000
    mix = np.linalg.qr(rng.normal(size=(d, d)))[0] * rng.uniform(0.3, 3.0, size=d)
    items = rng.normal(size=(n + 2 * m, d)) * np.linspace(2.0, 0.2, d)
    target = items @ mix + 0.1 * rng.normal(size=items.shape)
    s, t = items[:n].astype(np.float32), target[:n].astype(np.float32)
    sp, tp = items[n : n + m].astype(np.float32), target[n + m :].astype(np.float32)
    out = {"threads": torch.get_num_threads()}
    for estimator in (PoolProcrustes, PoolRidge):
        cpu, wall = [], []
        for _ in range(3):
            started, clock = time.process_time(), time.perf_counter()
            estimator().fit(s, t, sp, tp)
            cpu.append(time.process_time() - started)
            wall.append(time.perf_counter() - clock)
        out[estimator.__name__] = {
            "cpu_seconds_median": float(np.median(cpu)),
            "wall_seconds_median": float(np.median(wall)),
        }
    return out


def _summary(runs: list[dict]) -> list[list]:
    names = list(runs[0]["methods"])
    table = []
    for name in names:
        values = {
            key: np.array([r["methods"][name][key] for r in runs if r["methods"][name].get(key) is not None])
            for key in ("lr_ratio", "lr_raw_ratio", "r2_scaled")
        }
        cells = [name]
        for key in ("lr_ratio", "lr_raw_ratio", "r2_scaled"):
            v = values[key]
            cells.append("-" if not v.size else f"{v.mean():.3f} ± {v.std(ddof=1) / np.sqrt(v.size):.3f} (n={v.size})")
        table.append(cells)
    return table


def _paired_differences(runs: list[dict], name: str, against: str, key: str) -> str:
    d = np.array([r["methods"][name][key] - r["methods"][against][key] for r in runs])
    return f"{d.mean():+.3f} (sd {d.std(ddof=1):.3f}, {int((d > 0).sum())}/{d.size} runs better)"


def run(args) -> None:
    import torch

    from latentstitch._core.provenance import with_provenance
    from latentstitch.data import bbc_news_documents

    torch.set_num_threads(1)
    labels = bbc_news_documents()[1]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for kind in SETS:
        vectors = {e: np.load(CACHE / f"bbc-{e}-{kind}.npy").astype(np.float32) for e in ENCODERS}
        for source, target in (ENCODERS, ENCODERS[::-1]):
            for seed in SEEDS:
                record = one_run(vectors, labels, source, target, seed, args.in_bridge) | {"set": kind}
                runs.append(record)
                print(
                    kind, source, "->", target, seed, {k: round(v["lr_ratio"], 3) for k, v in record["methods"].items()}
                )
                (out / "runs.json").write_text(json.dumps(runs, indent=1))
    timed = timing() if args.timing else None
    command = f"python -m benchmarks pool_ridge_dev --out {args.out}" + (" --timing" if args.timing else "")
    command += " --in-bridge" if args.in_bridge else ""
    lines = [
        "# ridge_pools on development data (issue 39)",
        "",
        "Development data only (BBC News, migration cache), never the few-pairs judging set; protocol in "
        "`benchmarks/pool_ridge_dev.py`, fixed in a commit before the first run. "
        f"Sets {', '.join(SETS)}; MiniLM-L6 <-> paraphrase-MiniLM-L3, both directions; seeds {list(SEEDS)}; "
        f"{N_ANCHORS} anchors, disjoint pools of {N_POOL} per side, {N_TEST} test items; {len(runs)} runs.",
        "",
        "Mean ± standard error over runs of the head's macro-F1 as a ratio to the weaker encoder's own "
        "(`lr`: standard-scaled logistic regression, `lr_raw`: on raw vectors) and of the held-out R^2 with "
        "standard-scaled target features.",
        "",
        "| method | lr ratio | lr_raw ratio | r2_scaled |",
        "|---|---|---|---|",
        *("| " + " | ".join(row) + " |" for row in _summary(runs)),
        "",
        "Paired differences, ridge_pools minus each (mean, sd over runs, runs where ridge_pools is better):",
        "",
    ]
    for against in ("paired_pick", "ridge_loo", "procrustes_pools", "ridge_pools_pairs"):
        for key in ("lr_ratio", "lr_raw_ratio", "r2_scaled"):
            if all(r["methods"][against].get(key) is not None for r in runs):
                lines.append(f"- vs {against}, {key}: {_paired_differences(runs, 'ridge_pools', against, key)}")
    picks = [r["methods"]["pools_pick"]["route"] for r in runs]
    lines += ["", f"Routes `pools_pick` chose: {', '.join(f'{p} x{picks.count(p)}' for p in sorted(set(picks)))}."]
    if timed is not None:
        lines += [
            "",
            f"Fit time at 100 anchors + 10k pools, 384-d (median of 3, one thread, loaded host): {json.dumps(timed)}",
        ]
    (out / "README.md").write_text(with_provenance("\n".join(lines) + "\n", command))
    if timed is not None:
        (out / "timing.json").write_text(json.dumps(timed, indent=1))
