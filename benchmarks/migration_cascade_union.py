"""The cascade with and without the new collection's own search, on the pairs of ``migration_peers``:
``python -m benchmarks migration_cascade_union [--seeds 0,1] [--budgets 0.05] [--label after] [--out DIR]``.

Only the library's cascade rows of ``benchmarks.migration_peers`` are run (no peer, no certificate), on the cached
embeddings (``~/.cache/latentstitch/migration``), the same pairs (``PAIRS``), seeds, k-means plans (``plan_sample``,
30% held out) and depths, with the same deployed bridge (``fit_migration`` on the plan's fit part, then
``refit_migration`` on the whole sample, the library's defaults). The library measured is whichever is imported:
run once with the library before the change (``--label before``: its source on ``PYTHONPATH`` first) and once with
it (``--label after``); ``--combine BEFORE,AFTER`` writes both into one report with rebasis's cascade rows from
``results/migration/peers``.

Evaluation protocol (fixed in the commit that added this file, before its first run):

- Queries: the queries of the documents nobody re-embedded (``rest``, as ``migration_peers``); judged by Recall@10
  (the query's own document in the top 10), its ratio to the full re-embed's Recall@10 on the same queries, and
  overlap@10 with the full re-embed's top 10. The old index is an ``.npy`` (exact search), cosine.
- ``initial`` (what ``migration_peers`` measured): every query served with the initial collection only (the sample's
  new vectors): the queries in blocks of ``TOUCHED_QUERIES`` in their order, each block one ``Migration.search`` on
  a fresh copy of the seeded collection (a search gathers every query's candidates before it writes); ``touched``:
  the documents the first block embedded beyond the sample.
- ``serving`` (the migration that finishes itself): ``SERVED`` queries of ``rest`` in a fixed shuffled order
  (``numpy.random.default_rng(SHUFFLE_SEED + seed).permutation``), served ``BATCH`` at a time by
  ``Migration.search`` with writes on one collection seeded with the sample, so later queries find what earlier ones
  wrote; figures over all ``SERVED`` and over the last half; ``touched``: the documents embedded beyond the sample
  after all of them (and after the first half), as a share of the index.
- Depths ``DEPTHS`` (50/100/200), seeds ``SEEDS`` (0, 1), budgets as given (5% first; 1% and 10% if time allows).
"""

from __future__ import annotations

import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks.migration_peers import DEPTHS, PAIRS, SEEDS, TOUCHED_QUERIES, cached, scores, shared_sample
from latentstitch._core.provenance import provenance_line

RUN_BY_DEFAULT = False
DEFAULT_OUT = "latentstitch-results/migration-cascade-union"
#: Queries served in the ``serving`` protocol, in a fixed shuffled order, and how many per search call.
SERVED = 1000
BATCH = 10
SHUFFLE_SEED = 4040
PEERS_RESULTS = Path(__file__).resolve().parent.parent / "results" / "migration" / "peers" / "results.json"


def add_arguments(parser) -> None:
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT})")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="plan seeds (default 0,1)")
    parser.add_argument("--budgets", default="0.05", help="re-embedded shares (default 0.05)")
    parser.add_argument("--label", default="after", help="the library measured: before or after (default after)")
    parser.add_argument(
        "--combine", default=None, help="runs nothing: BEFORE,AFTER (two runs' folders) written as one report"
    )


def _seeded(folder: Path, store, new_d: np.ndarray, sample: np.ndarray, name: str):
    from latentstitch.migrate import open_collection

    path = folder / name
    for leftover in (path, path.with_name(path.name + ".cascade.json"), path.with_name(path.name + ".lock")):
        leftover.unlink(missing_ok=True)
    collection = open_collection(path, store, new_d.shape[1], "cosine")
    collection.add_missing(np.asarray(sample), new_d[sample])
    return collection


def _search(migration, store, collection, queries, new_d, depth):
    """``Migration.search`` (k=10), the candidates' new vectors read from the cached embeddings."""
    vectors = lambda ids: new_d[np.asarray(ids, dtype=np.int64)]  # noqa: E731
    return migration.search(queries, 10, store=store, new_store=collection, depth=depth, new_vectors=vectors)


def initial(migration, store, folder, queries, new_d, sample, depth) -> dict:
    """Every query served with the sample alone in the collection (blocks of ``TOUCHED_QUERIES``)."""
    parts, touched, from_collection = [], None, 0
    for start in range(0, len(queries), TOUCHED_QUERIES):
        collection = _seeded(folder, store, new_d, sample, "initial.npy")
        found = _search(migration, store, collection, queries[start : start + TOUCHED_QUERIES], new_d, depth)
        touched = found.embedded if touched is None else touched
        from_collection += getattr(found, "from_collection", 0)
        parts.append(np.asarray(found.ids, dtype=np.int64))
    return {"top": np.concatenate(parts), "touched": touched, "from_collection": from_collection}


def serving(migration, store, folder, queries, new_d, sample, depth) -> dict:
    """``queries`` (already in the served order) ``BATCH`` at a time on one collection that keeps what they wrote."""
    collection = _seeded(folder, store, new_d, sample, "serving.npy")
    parts, halfway, from_collection, seconds = [], None, 0, 0.0
    for start in range(0, len(queries), BATCH):
        if start == len(queries) // 2:
            halfway = collection.count_present() - len(sample)
        began = time.process_time()
        found = _search(migration, store, collection, queries[start : start + BATCH], new_d, depth)
        seconds += time.process_time() - began
        from_collection += getattr(found, "from_collection", 0)
        parts.append(np.asarray(found.ids, dtype=np.int64))
    touched = collection.count_present() - len(sample)
    return {
        "top": np.concatenate(parts),
        "touched": touched,
        "touched_half": halfway,
        "from_collection": from_collection,
        "cpu_seconds": seconds,
    }


def one_run(name, old_d, new_q, new_d, budget, seed, label) -> list[dict]:
    from latentstitch.migrate import fit_migration, open_store, refit_migration, search

    n = len(old_d)
    ids = np.arange(n)
    plan, sample, rest = shared_sample(old_d, budget, seed)
    order = np.random.default_rng(SHUFFLE_SEED + seed).permutation(rest)[:SERVED]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        migration = fit_migration(ids, old_d, plan.ids, new_d[plan.ids], holdout_ids=plan.holdout_ids, seed=seed)
        deployed = refit_migration(migration, ids, old_d, plan.ids, new_d[plan.ids], seed=seed)
    base = {"set": name, "budget": budget, "seed": seed, "upfront": len(sample), "n": n, "label": label}
    reference = {
        "initial": search(new_q[rest], new_d, 10, "cosine"),
        "serving": search(new_q[order], new_d, 10, "cosine"),
    }
    relevant = {"initial": rest, "serving": order}
    full = {p: scores(reference[p], relevant[p], reference[p])["recall"] for p in reference}
    last = slice(SERVED // 2, None)
    full["serving last half"] = scores(reference["serving"][last], order[last], reference["serving"][last])["recall"]
    rows = []
    with tempfile.TemporaryDirectory(dir=Path.home() / ".cache") as tmp:
        folder = Path(tmp)
        np.save(folder / "old.npy", np.ascontiguousarray(old_d, dtype=np.float32))
        store = open_store(folder / "old.npy", metric="cosine")
        deployed.record_index(store)
        for depth in DEPTHS:
            got = initial(deployed, store, folder, new_q[rest], new_d, sample, depth)
            row = {**base, "protocol": "initial", "depth": depth, "queries": len(rest), "full_recall": full["initial"]}
            row.update(scores(got["top"], rest, reference["initial"]), touched=got["touched"])
            row["from_collection"] = got["from_collection"]
            rows.append(row)
            got = serving(deployed, store, folder, new_q[order], new_d, sample, depth)
            row = {**base, "protocol": "serving", "depth": depth, "queries": len(order), "full_recall": full["serving"]}
            row.update(scores(got["top"], order, reference["serving"]))
            row.update({k: got[k] for k in ("touched", "touched_half", "from_collection", "cpu_seconds")})
            half = scores(got["top"][last], order[last], reference["serving"][last])
            row.update(
                last_recall=half["recall"], last_overlap=half["overlap"], last_full_recall=full["serving last half"]
            )
            rows.append(row)
        store.close()
    for row in rows:
        row["retention"] = row["recall"] / row["full_recall"]
        if "last_recall" in row:
            row["last_retention"] = row["last_recall"] / row["last_full_recall"]
    return rows


def run(args) -> None:
    if args.combine:
        return combine(args)
    seeds = tuple(int(s) for s in args.seeds.split(","))
    budgets = tuple(float(b) for b in args.budgets.split(","))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for budget in budgets:  # budgets outermost: a run cut short holds every pair at 5% first
        for seed in seeds:
            for name, old, new, kind in PAIRS:
                _, old_d = cached(name, old)
                new_q, new_d = cached(name, new)
                started = time.perf_counter()
                got = one_run(name, old_d, new_q, new_d, budget, seed, args.label)
                for row in got:
                    row.update(pair=f"{name}: {old} -> {new} ({kind})", kind=kind)
                rows.extend(got)
                brief = ", ".join(f"{r['protocol']}@{r['depth']} {r['retention']:.3f}x/{r['overlap']:.3f}" for r in got)
                print(f"{name} {old}->{new} {budget:.0%} seed {seed} ({time.perf_counter() - started:.0f} s): {brief}")
                payload = {"command": args.command, "label": args.label, "rows": rows}
                (out_dir / "results.json").write_text(json.dumps(payload, indent=1, default=int))
    print(f"wrote {out_dir / 'results.json'}")


# --- the report ----------------------------------------------------------------------------------------------
GOAL_RETENTION, GOAL_OVERLAP = 0.98, 0.95


def _key(row: dict) -> tuple:
    return (row["pair"], row["budget"], row["seed"], row.get("depth"))


def peers_rows() -> dict[tuple, dict]:
    """The committed ``results/migration/peers`` cascade rows of the library and of rebasis, by (pair, budget,
    seed, depth, who)."""
    got = json.loads(PEERS_RESULTS.read_text())["rows"]
    out = {}
    for row in got:
        if row["arrangement"].startswith("cascade@") and row["who"] in ("latentstitch", "rebasis"):
            depth = int(row["arrangement"].split("@")[1])
            out[(row["pair"], row["budget"], row["seed"], depth, row["who"])] = row
    return out


def combine(args) -> None:
    before_dir, after_dir = args.combine.split(",")
    runs = {}
    commands = []
    for label, folder in (("before", before_dir), ("after", after_dir)):
        payload = json.loads((Path(folder) / "results.json").read_text())
        runs[label] = {(*_key(r), r["protocol"]): r for r in payload["rows"]}
        commands.append(payload["command"])
    peers = peers_rows()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    table, checks, goals = [], [], []
    for key, after in runs["after"].items():
        before = runs["before"].get(key)
        pair, budget, seed, depth, protocol = key
        committed = peers.get((pair, budget, seed, depth, "latentstitch"))
        rebasis = peers.get((pair, budget, seed, depth, "rebasis"))
        if protocol == "initial" and before is not None and committed is not None:
            same = all(abs(before[m] - committed[m]) < 1e-12 for m in ("recall", "overlap"))
            checks.append(same and before["touched"] == committed["touched"])
        row = [pair, f"{budget:.0%}", seed, depth, protocol]
        for got in (before, after):
            row += ["", ""] if got is None else [got["retention"], got["overlap"]]
        share = after["touched"] / after["n"]
        row += [f"{after['touched']} ({share:.1%})", after["from_collection"]]
        if protocol == "serving":
            row += [after["last_retention"], after["last_overlap"], f"{after['touched_half']} -> {after['touched']}"]
        else:
            row += ["", "", ""]
        if rebasis is not None and "recall" in rebasis:
            row += [f"{rebasis['retention']:.3f} / {rebasis['overlap']:.3f}"]
        else:
            row += ["refused" if rebasis is not None else ""]
        table.append(row)
        if after["kind"] == "better":
            goals.append((key, after))
    payload = {
        "commands": commands,
        "before_equals_committed": {"checked": len(checks), "equal": sum(checks)},
        "before": list(runs["before"].values()),
        "after": list(runs["after"].values()),
    }
    (out_dir / "results.json").write_text(json.dumps(payload, indent=1, default=int))
    lines = ["# The cascade with the new collection's own search (before / after)", ""]
    lines += [provenance_line(" + ".join(commands) + f" (combined by `{args.command}`)"), ""]
    lines += [
        f"'before' equals the committed results/migration/peers cascade rows (R@10, overlap@10, touched) on "
        f"{sum(checks)} of {len(checks)} (pair, budget, seed, depth) rows checked.",
        "",
    ]
    lines += [*_goal_lines(goals), ""]
    sheader = ["pair", "budget", "depth", "protocol", "seeds", "before R@10 ratio", "before overlap@10"]
    sheader += ["after R@10 ratio", "after overlap@10", "touched beyond the sample (share of the index)"]
    sheader += ["after last 500: ratio", "overlap@10", "CPU s before / after", "rebasis cascade ratio / overlap"]
    lines += ["## Mean over seeds", "", "| " + " | ".join(sheader) + " |", "|" + "---|" * len(sheader)]
    lines += [
        "| " + " | ".join(f"{c:.3f}" if isinstance(c, float) else str(c) for c in r) + " |"
        for r in summary(runs, peers)
    ]
    lines += ["", "## Every run", ""]
    header = ["pair", "budget", "seed", "depth", "protocol", "before R@10 ratio", "before overlap@10"]
    header += ["after R@10 ratio", "after overlap@10", "after + touched (share)", "from collection only"]
    header += ["after last 500: ratio", "overlap@10", "touched at 500 -> 1,000", "rebasis cascade ratio / overlap"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(f"{c:.3f}" if isinstance(c, float) else str(c) for c in r) + " |" for r in table]
    (out_dir / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:12]))


def _goal_lines(goals) -> list[str]:
    """The issue's cascade goal (>= 0.98x and overlap@10 >= 0.95 on every pair where the new model is better), per
    budget, depth and protocol (over seeds and pairs: MET only when every run meets it)."""
    groups: dict[tuple, list[dict]] = {}
    for (_, budget, _, depth, protocol), row in goals:
        groups.setdefault((budget, depth, protocol), []).append(row)
    lines = [
        "Goal (every pair where the new model is better, every seed): R@10 >= 0.98x the full re-embed's and "
        "overlap@10 >= 0.95.",
        "",
    ]
    for (budget, depth, protocol), rows in sorted(groups.items()):
        retention = min(r["retention"] for r in rows)
        overlap = min(r["overlap"] for r in rows)
        met = retention >= GOAL_RETENTION and overlap >= GOAL_OVERLAP
        words = f"- {budget:.0%}, depth {depth}, {protocol}: worst ratio {retention:.3f}, worst overlap {overlap:.3f}"
        if protocol == "serving":
            last = min(r["last_retention"] for r in rows)
            last_overlap = min(r["last_overlap"] for r in rows)
            words += f" (last 500: {last:.3f} / {last_overlap:.3f})"
        pairs = sorted({r["pair"] for r in rows})
        meeting = [
            p.split(" (")[0]
            for p in pairs
            if all(r["retention"] >= GOAL_RETENTION and r["overlap"] >= GOAL_OVERLAP for r in rows if r["pair"] == p)
        ]
        words += f"; pairs meeting it at every seed: {', '.join(meeting) or 'none'}"
        lines.append(words + f": **{'MET' if met else 'MISS'}** ({len(rows)} runs)")
    return lines


def summary(runs: dict, peers: dict) -> list[list]:
    """Means over seeds per pair, budget, depth and protocol: before and after, the share touched, the last half
    and the CPU seconds of the serving runs, and rebasis's cascade (committed peers run) where it ran."""
    groups: dict[tuple, list] = {}
    for key, after in runs["after"].items():
        pair, budget, seed, depth, protocol = key
        groups.setdefault((pair, budget, depth, protocol), []).append((after, runs["before"].get(key), seed))
    out = []
    for (pair, budget, depth, protocol), got in groups.items():
        after = [a for a, _, _ in got]
        before = [b for _, b, _ in got if b is not None]

        def mean(rows, key):
            return float(np.mean([r[key] for r in rows])) if rows and key in rows[0] else ""

        touched = mean(after, "touched") / after[0]["n"]
        row = [pair, f"{budget:.0%}", depth, protocol, len(got), mean(before, "retention"), mean(before, "overlap")]
        row += [mean(after, "retention"), mean(after, "overlap"), f"{touched:.1%}"]
        if protocol == "serving":
            row += [mean(after, "last_retention"), mean(after, "last_overlap")]
            row += [f"{mean(before, 'cpu_seconds'):.1f} / {mean(after, 'cpu_seconds'):.1f}"]
        else:
            row += ["", "", ""]
        rebasis = [peers.get((pair, budget, seed, depth, "rebasis")) for _, _, seed in got]
        ran = [r for r in rebasis if r is not None and "recall" in r]
        row += [f"{mean(ran, 'retention'):.3f} / {mean(ran, 'overlap'):.3f} ({len(ran)} seeds)" if ran else "refused"]
        out.append(row)
    return out
