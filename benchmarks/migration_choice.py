"""The route and mode ``fit_migration`` chooses without a query log, judged by what a user sees: single-stage
retention of real queries over the whole index. ``python -m benchmarks migration_choice [--set dev|eval]
[--seeds 0,1] [--budgets 0.05] [--out FOLDER]`` (run it niced).

**Compared** (all fitted on the same re-embedded sample, documents only, no query log; each then refitted on the whole
sample by ``refit_migration``, what ``migrate refit`` deploys, and evaluated in the mode it chose):

- ``self``: ``fit_migration(choose="self")``, the choice before this benchmark: each mode's route by the bridge's own
  cross-validation (re-embedded items finding themselves), the mode by MRR@10 over the whole index;
- ``fidelity``: ``fit_migration(choose="fidelity")``: each mode's route by the bridge's own cross-validated cosine
  between the held-out bridged vectors and the true ones (the best estimate of an item's other-model vector: an index
  searched with it ranks items by their expected similarity to the query), the mode as ``self`` (MRR@10 over the
  whole index);
- ``neighbours`` (``DEV`` only: it lost there): ``fit_migration(choose="neighbours")``: every translation route in
  both modes by the held-out re-embedded items' overlap@10 with the new model's own top 10 among the re-embedded items
  (Drift-Adapter's protocol, ``migrate._fit.neighbour_overlap``; the same folds for every route and mode);
- ``ridge_loo``: ``fit_migration(routes=["ridge_loo"])`` (RidgeCV forced), in the mode it chose.

**Data** (``benchmarks/_migration_data.py``, cached embeddings; query i's relevant document is document i).
``DEV``: the pairs the criterion was developed on, none of them in ``migration_peers.PAIRS``. ``EVAL`` =
``migration_peers.PAIRS`` (bbc MiniLM-L3 -> L6, bible MiniLM-L3 -> USE-m3, bible MiniLM-L6 -> e5-small, bbc MiniLM-L6
-> L3, kjv MiniLM-L3 -> L6), fixed with this protocol before its first run, seeds 0 and 1, budgets 1%, 5%, 10%
(``BUDGETS``): the **same** re-embedded samples as ``migration_peers`` (``migration_peers.shared_sample``, the
library's k-means plan, 30% held out for the certificate: every arrangement here is fitted on the other 70%, then
refitted on all). Evaluated on the queries of the documents not re-embedded, over the whole index (cosine):
Recall@10, and retention = Recall@10 / the full re-embed's. On ``EVAL`` the peers' rows (the best of isotrieve's and
rebasis's single-stage rows) and doing nothing are read from the committed ``results/migration/peers/results.json``
(same samples, same seeds; both peers are deterministic on them), not rerun.

Results: ``--out`` (default ``latentstitch-results/migration-choice``; the committed ``results/migration/choice``
only when named): ``results.json`` (every run's rows) and ``results.md``.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np

from latentstitch._core.provenance import provenance_line

RUN_BY_DEFAULT = False
DEFAULT_OUT = "latentstitch-results/migration-choice"
#: Development pairs (not in ``migration_peers.PAIRS``): set, old encoder, new encoder.
DEV = (
    ("kjv", "paraphrase-minilm-l3", "use-m3"),
    ("bible", "minilm-l6", "use-m3"),
    ("bible", "paraphrase-minilm-l3", "e5-small"),
    ("kjv", "minilm-l6", "use-m3"),
)
SEEDS = (0, 1)
BUDGETS = (0.01, 0.05, 0.1)
#: The compared choices (``EVAL_ARMS`` on ``EVAL``: ``neighbours`` lost on ``DEV``).
ARMS = ("self", "fidelity", "neighbours", "ridge_loo")
EVAL_ARMS = ("self", "fidelity", "ridge_loo")
PEERS_RESULTS = Path(__file__).resolve().parents[1] / "results" / "migration" / "peers" / "results.json"


def eval_pairs():
    from benchmarks.migration_peers import PAIRS

    return tuple(p[:3] for p in PAIRS)


def add_arguments(parser) -> None:
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT})")
    parser.add_argument("--set", default="dev", choices=("dev", "eval"), help="DEV pairs or EVAL (= migration_peers)")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="plan seeds (default 0,1)")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="re-embedded shares")


def recall(top: np.ndarray, relevant: np.ndarray) -> float:
    return float((np.asarray(top)[:, :10] == relevant[:, None]).any(axis=1).mean())


def one_run(old_q, old_d, new_q, new_d, budget: float, seed: int, wanted=ARMS) -> dict:
    """Each compared choice's mode, routes and refitted single-stage retention on one sample."""
    from benchmarks.migration_peers import shared_sample, single_stage
    from latentstitch.migrate import fit_migration, refit_migration, search

    ids = np.arange(len(old_d))
    plan, sample, rest = shared_sample(old_d, budget, seed)
    reference = recall(search(new_q[rest], new_d, 10, "cosine"), rest)
    out = {
        "upfront": len(sample),
        "full re-embed": reference,
        "doing nothing": recall(search(old_q[rest], old_d, 10, "cosine"), rest),
    }
    arms = {
        "self": {"choose": "self"},
        "fidelity": {"choose": "fidelity"},
        "neighbours": {"choose": "neighbours"},
        "ridge_loo": {"routes": ["ridge_loo"]},
    }
    arms = {arm: options for arm, options in arms.items() if arm in wanted}
    for arm, options in arms.items():
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = fit_migration(
                ids, old_d, plan.ids, new_d[plan.ids], holdout_ids=plan.holdout_ids, seed=seed, **options
            )
            seconds = time.perf_counter() - started
            deployed = refit_migration(fitted, ids, old_d, plan.ids, new_d[plan.ids], seed=seed)
        single = single_stage(deployed, old_d, new_d, new_q[rest], sample)
        out[arm] = {
            "mode": deployed.mode,
            "routes": {m: b.route_ for m, b in deployed.bridges.items()},
            "retention": {m: recall(top, rest) / reference for m, top in single.items()},
            "fit_seconds": seconds,
        }
        out[arm]["chosen"] = out[arm]["retention"][deployed.mode]
        if arm == "neighbours":
            out[arm]["note"] = next((n for n in fitted.notes if n.startswith("route and mode chosen")), None)
    out["doing nothing"] /= reference
    return out


def best_peers(path: Path = PEERS_RESULTS) -> dict:
    """(set, old, new, budget, seed) -> the best peer's single-stage retention and which row it was."""
    rows = json.loads(path.read_text())["rows"]
    best = {}
    for row in rows:
        if row["who"] in ("isotrieve", "rebasis") and row["arrangement"] in ("query-side", "corpus-side"):
            if "retention" not in row:
                continue
            name, pair = row["pair"].split(": ", 1)
            old, new = pair.split(" (")[0].split(" -> ")
            key = (name, old, new, row["budget"], row["seed"])
            if key not in best or row["retention"] > best[key][0]:
                best[key] = (row["retention"], f"{row['who']} {row['arrangement']}")
    return best


def _cell(arm: dict | None) -> str:
    if arm is None:
        return "-"
    return f"{arm['chosen']:.3f} ({arm['mode']}; {arm['routes'][arm['mode']]})"


def table(runs: list[dict], peers: dict | None) -> list[str]:
    """One row per run: each arm's refitted retention in the mode it chose (mode; route)."""
    head = ["pair", "budget", "seed", "doing nothing", *ARMS, "fidelity - self"]
    if peers is not None:
        head += ["best peer", "fidelity - best peer"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in runs:
        cells = [r["pair"], f"{r['budget']:.0%} ({r['upfront']})", str(r["seed"]), f"{r['doing nothing']:.3f}"]
        cells += [_cell(r.get(arm)) for arm in ARMS]
        cells += [f"{r['fidelity']['chosen'] - r['self']['chosen']:+.3f}"]
        if peers is not None:
            peer = r.get("best_peer")
            cells += [
                "-" if peer is None else f"{peer[0]:.3f} ({peer[1]})",
                "-" if peer is None else f"{r['fidelity']['chosen'] - peer[0]:+.3f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def run(args) -> None:
    from benchmarks.migration_peers import cached

    pairs = DEV if args.set == "dev" else eval_pairs()
    seeds = (0,) if args.quick else tuple(int(s) for s in args.seeds.split(","))
    budgets = (0.05,) if args.quick else tuple(float(b) for b in args.budgets.split(","))
    if args.quick:
        pairs = pairs[:1]
    peers = best_peers() if args.set == "eval" else None
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for seed in seeds:  # seeds outermost: a run cut short still holds every pair and budget at the first seed
        for name, old, new in pairs:
            old_q, old_d = cached(name, old)
            new_q, new_d = cached(name, new)
            for budget in budgets:
                started = time.perf_counter()
                got = one_run(old_q, old_d, new_q, new_d, budget, seed, ARMS if args.set == "dev" else EVAL_ARMS)
                got.update(pair=f"{name}: {old} -> {new}", set=name, old=old, new=new, budget=budget, seed=seed)
                if peers is not None:
                    got["best_peer"] = peers.get((name, old, new, budget, seed))
                runs.append(got)
                print(
                    f"{name} {old}->{new} {budget:.0%} seed {seed} ({time.perf_counter() - started:.0f} s): "
                    + ", ".join(f"{arm} {got[arm]['chosen']:.3f}" for arm in ARMS if arm in got)
                    + ("" if peers is None else f", best peer {got['best_peer']}"),
                    flush=True,
                )
                (out_dir / "results.json").write_text(json.dumps({"set": args.set, "runs": runs}, indent=1))
                head = [f"# Route choice without a query log ({args.set} pairs)", "", provenance_line(args.command), ""]
                (out_dir / "results.md").write_text("\n".join([*head, *table(runs, peers)]) + "\n")
    print("\n".join(table(runs, peers)))
    if args.quick:
        print("--quick: one pair, one budget, one seed: too short for verdicts")
