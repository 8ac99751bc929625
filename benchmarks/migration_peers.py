"""Head to head: latentstitch's migration against the tools a user would pick instead, rebasis and isotrieve, on
the same data and the **same re-embedded samples** in one run. ``python -m benchmarks migration_peers [--quick]
[--seeds 0,1] [--budgets 0.01,0.05,0.1] [--pairs SET:OLD>NEW,...] [--out FOLDER]`` (run it niced).

**Peers** (pinned: ``PEERS``): each is installed on the first run into its own virtual environment under
``~/.cache/latentstitch/peers/NAME-VERSION`` (rebasis needs Python >= 3.12: ``--peer-python``, else the first
python3.12+ found) and run as a subprocess by ``benchmarks/_migration_peers_driver.py``, which calls the peer's own
public API with its own defaults on the files this benchmark writes (old and new vectors as ``.npy``, the sample as
JSON; row i is id i). Nothing of theirs is in this repository. Neither pulls torch in its default install (torch is
an extra of both), so none is installed.

**Data** (``benchmarks/_migration_data.py``, cached embeddings; query i's relevant document is document i):
``PAIRS``, fixed before the first run: three pairs where the new model is clearly better than the old (BBC News,
MiniLM-L3 -> MiniLM-L6; Bible verses English query -> Spanish verse, an English-only old model -> a multilingual
new one, twice) and two where it is not (BBC MiniLM-L6 -> MiniLM-L3: worse; kjv MiniLM-L3 -> MiniLM-L6: equal).
Neither peer ships human relevance judgements (rebasis reads a user's query log with judgements; isotrieve's
benchmark extra downloads ir-datasets at run time): retrieval is judged by the known pairing only.

**Protocol**, per pair, budget (1%, 5%, 10% of the documents, at least 20) and seed (``SEEDS``): the library's own
k-means plan (``migrate.plan_sample``, 30% of it held out for the certificate) chooses the documents re-embedded up
front; everyone gets exactly those ids (isotrieve's ``RidgeMapping`` fits on all of them with its own 10% internal
holdout; rebasis's ``probe_store`` splits them with its own ``split_disjoint``, 10% as query proxies). The library
runs as a user of ``migrate fit / certify / refit`` gets it, with its defaults (routes: ``translation_routes()``,
``ridge_loo`` among them; 5 folds; its own mode choice): fitted on the plan's fit part (70%), certified on the
held-out 30%, then refitted on the whole sample (``refit_migration``, what is deployed). It is fitted on documents
only (no query log: the peers get none). Evaluated on the queries of the documents nobody re-embedded, over the whole
index (cosine):

- ``doing nothing``: the old model end to end; ``full re-embed``: the new model end to end (the reference);
- single stage, ``query-side`` (new-model queries mapped into the old index) and ``corpus-side`` (the old index
  mapped into the new space; the re-embedded documents keep their new vectors, for every tool alike); the library
  also as ``chosen`` (the mode ``fit`` picked), each fitted on 70% and ``refitted`` on the whole sample;
- ``cascade@N``: the query-side bridge recalls N candidates from the old index, the new model ranks them (their
  new vectors computed on demand): the library's ``Migration.search`` on the refitted bridge (new collection seeded
  with the sample), and rebasis's ``Cascade`` (isotrieve has none).

**The library's decision** (``certify_migration``'s, its defaults ``KEEP`` and ``SMALL_INDEX``), per signal
(``SIGNALS``): without a query log (the held-out items as queries, overlap@10 with a full re-embed's top 10 within
the re-embedded sample) and with the held-out documents' own labelled queries given to certify only. Judged against
the best realised arrangement on the untouched rest (``benchmarks.migration.best_arrangement``, the refitted bridge
as the migration), and whether its 95% intervals cover the realised figures of the bridge it measured
(``decision_records``).

Columns: Recall@10, retention (Recall@10 / the full re-embed's), overlap@10 with the full re-embed's top 10, the
documents re-embedded up front and, for a cascade, the further documents its candidates touched over the first 1,000
queries (and as a share of the index). Results: ``--out`` (default ``latentstitch-results/migration-peers``; the
committed ``results/migration/peers`` only when named): ``results.json`` (every row and decision), ``results.md``.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from latentstitch._core.provenance import provenance_line

RUN_BY_DEFAULT = False
DEFAULT_OUT = "latentstitch-results/migration-peers"
PEERS = {"rebasis": "0.1.0", "isotrieve": "0.4.0"}
PEERS_HOME = Path.home() / ".cache" / "latentstitch" / "peers"
DRIVER = Path(__file__).with_name("_migration_peers_driver.py")
#: (set, old encoder, new encoder, is the new model clearly better): fixed before the first run.
PAIRS = (
    ("bbc", "paraphrase-minilm-l3", "minilm-l6", "better"),
    ("bible", "paraphrase-minilm-l3", "use-m3", "better"),
    ("bible", "minilm-l6", "e5-small", "better"),
    ("bbc", "minilm-l6", "paraphrase-minilm-l3", "worse"),
    ("kjv", "paraphrase-minilm-l3", "minilm-l6", "equal"),
)
SEEDS = (0, 1)
BUDGETS = (0.01, 0.05, 0.1)
DEPTHS = (50, 100, 200)
TOUCHED_QUERIES = 1000


def add_arguments(parser) -> None:
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT})")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="plan seeds (default 0,1)")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="re-embedded shares")
    parser.add_argument(
        "--pairs", default=None, help="only these, e.g. bbc:paraphrase-minilm-l3>minilm-l6 (default: all of PAIRS)"
    )
    parser.add_argument(
        "--peer-python", default=None, help="a Python >= 3.12 for the peers' environments (default: found)"
    )
    parser.add_argument(
        "--combine",
        default=None,
        help="runs nothing: the results.json of these folders (comma-separated; e.g. one run per seed, run side by "
        "side) written together into --out",
    )


# --- the files the peers read ----------------------------------------------------------------------------------------
def write_job(folder: Path, old_documents, new_documents, new_queries, sample, seed: int) -> Path:
    """The files ``_migration_peers_driver.py`` reads: three ``.npy`` (float32) and ``sample.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in (
        ("old_documents", old_documents),
        ("new_documents", new_documents),
        ("new_queries", new_queries),
    ):
        np.save(folder / f"{name}.npy", np.ascontiguousarray(array, dtype=np.float32))
    job = {
        "sample": [int(i) for i in sample],
        "seed": int(seed),
        "depths": list(DEPTHS),
        "touched_queries": TOUCHED_QUERIES,
    }
    (folder / "sample.json").write_text(json.dumps(job))
    return folder


def read_job(folder: Path) -> dict:
    """``sample.json`` and the vectors, checked: the sample is distinct ids of the index, the widths agree."""
    job = json.loads((folder / "sample.json").read_text())
    arrays = {n: np.load(folder / f"{n}.npy") for n in ("old_documents", "new_documents", "new_queries")}
    n = len(arrays["old_documents"])
    sample = np.asarray(job.get("sample", []))
    if sample.ndim != 1 or sample.dtype.kind not in "iu" or len(np.unique(sample)) != len(sample):
        raise ValueError(f"{folder / 'sample.json'}: 'sample' must be a list of distinct integer ids")
    if len(sample) and (sample.min() < 0 or sample.max() >= n):
        raise ValueError(f"{folder / 'sample.json'}: 'sample' names ids outside the index's 0..{n - 1}")
    if len(arrays["new_documents"]) != n or arrays["new_queries"].shape[1] != arrays["new_documents"].shape[1]:
        raise ValueError(f"{folder}: new_documents must have one row per document and the new queries' width")
    return {**job, **arrays, "sample": sample}


# --- the peers' environments ----------------------------------------------------------------------------------------
def _python_312(chosen: str | None) -> str:
    if chosen:
        return chosen
    if sys.version_info >= (3, 12):
        return sys.executable
    found = [shutil.which(f"python3.{minor}") for minor in (14, 13, 12)]
    found += sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.1[2-9]*/bin/python")), reverse=True)
    for path in found:
        if path:
            return path
    raise RuntimeError("--peer-python: rebasis needs Python >= 3.12 and none was found; name one")


def peer_python(peer: str, base: str | None) -> Path:
    """The peer's environment's python, created and the pinned version installed on first use."""
    env = PEERS_HOME / f"{peer}-{PEERS[peer]}"
    python = env / "bin" / "python"
    probe = [str(python), "-c", f"import importlib.metadata as m; assert m.version({peer!r}) == {PEERS[peer]!r}"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"installing {peer}=={PEERS[peer]} into {env} (first run)", flush=True)
    subprocess.run([_python_312(base), "-m", "venv", str(env)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"{peer}=={PEERS[peer]}"], check=True)
    subprocess.run(probe, check=True)
    return python


def run_peer(peer: str, python: Path, job: Path, threads: int) -> dict:
    env = {**os.environ, **{v: str(threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
    done = subprocess.run([str(python), str(DRIVER), peer, str(job)], capture_output=True, text=True, env=env)
    path = job / peer / "report.json"
    if not path.exists():
        return {"peer": peer, "error": f"the driver wrote no report (exit {done.returncode}): {done.stderr[-800:]}"}
    return json.loads(path.read_text())


# --- one run --------------------------------------------------------------------------------------------------------
def scores(top: np.ndarray, relevant: np.ndarray, reference_top: np.ndarray) -> dict[str, float]:
    """Recall@10 (the query's own document in its top 10) and overlap@10 with the full re-embed's top 10."""
    top = np.asarray(top)[:, :10]
    recall = float((top == relevant[:, None]).any(axis=1).mean())
    overlap = float(np.mean([len(np.intersect1d(a, b)) / 10 for a, b in zip(top, reference_top, strict=True)]))
    return {"recall": recall, "overlap": overlap}


def library_cascade(migration, folder: Path, queries, new_documents, sample, depth: int) -> tuple[np.ndarray, int]:
    """``Migration.search`` over the old index (``.npy``), a new collection seeded with the sample's new vectors;
    the first ``TOUCHED_QUERIES`` queries' newly embedded candidates are the cost."""
    from latentstitch.migrate import open_collection, open_store

    store = open_store(folder / "old_documents.npy", metric="cosine")
    collection = open_collection(folder / f"library-new-{depth}.npy", store, new_documents.shape[1], "cosine")
    collection.add_missing(np.asarray(sample), new_documents[sample])

    def new_vectors(ids):
        return new_documents[np.asarray(ids, dtype=np.int64)]

    parts, touched = [], 0
    for start in range(0, len(queries), TOUCHED_QUERIES):
        found = migration.search(
            queries[start : start + TOUCHED_QUERIES],
            10,
            store=store,
            new_store=collection,
            depth=depth,
            new_vectors=new_vectors,
        )
        touched = found.embedded if start == 0 else touched
        parts.append(np.asarray(found.ids, dtype=np.int64))
    return np.concatenate(parts), touched


def shared_sample(old_d, budget: float, seed: int):
    """The re-embedded sample everyone gets: the library's k-means plan of ``budget`` of the index (at least 20, 30%
    held out for the certificate); with its ids sorted and the rest (the documents whose queries are evaluated)."""
    from latentstitch.migrate import plan_sample

    ids = np.arange(len(old_d))
    count = max(round(budget * len(old_d)), 20)
    plan = plan_sample(ids, old_d, count, strategy="kmeans", holdout=max(0.3, 10 / count), seed=seed)
    sample = np.sort(plan.ids)
    return plan, sample, np.setdiff1d(ids, sample)


def one_run(name, old_q, old_d, new_q, new_d, budget, seed, peers, threads) -> tuple[list[dict], list[dict]]:
    """One pair, budget and seed: every arrangement's row, and the library's decisions (``decision_records``)."""
    from latentstitch.migrate import fit_migration, refit_migration, search

    n = len(old_d)
    ids = np.arange(n)
    plan, sample, rest = shared_sample(old_d, budget, seed)
    reference_top = search(new_q[rest], new_d, 10, "cosine")
    base = {"set": name, "budget": budget, "seed": seed, "upfront": len(sample), "queries": len(rest)}
    rows = []

    def add(who, arrangement, top, touched=None, **extra):
        row = {**base, "who": who, "arrangement": arrangement, **scores(top, rest, reference_top), **extra}
        row["touched"] = touched
        rows.append(row)
        return row

    add("-", "full re-embed", reference_top)
    add("-", "doing nothing", search(old_q[rest], old_d, 10, "cosine"))
    started = time.perf_counter()
    # the library as a user gets it: its default routes (ridge_loo among them), folds and mode choice on the fit
    # part; certified on the held-out part; then refitted on the whole sample (what `migrate refit` deploys)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        migration = fit_migration(ids, old_d, plan.ids, new_d[plan.ids], holdout_ids=plan.holdout_ids, seed=seed)
        fit_seconds = time.perf_counter() - started
        certified = certificates(migration, ids, old_d, old_q, new_d, new_q, plan, seed)
        deployed = refit_migration(migration, ids, old_d, plan.ids, new_d[plan.ids], seed=seed)
    chosen = {}
    for label, bridge in (("", migration), ("refitted ", deployed)):
        single = single_stage(bridge, old_d, new_d, new_q[rest], sample)
        routes = {m: b.route_ for m, b in bridge.bridges.items()}
        for mode, top in single.items():
            add("latentstitch", f"{label}{mode}-side", top, route=routes[mode])
        chosen[label] = add(
            "latentstitch", f"{label}chosen ({bridge.mode}-side)", single[bridge.mode], route=routes[bridge.mode]
        )
    rows[-1]["fit_seconds"] = fit_seconds  # fit alone (``seconds``: fit, certify, refit and the cascades)
    doing_nothing = rows[1]
    decisions = decision_records(base, certified, doing_nothing, chosen[""], chosen["refitted "], rows[0], n)
    with tempfile.TemporaryDirectory(dir=Path.home() / ".cache") as tmp:
        folder = write_job(Path(tmp) / "job", old_d, new_d, new_q[rest], sample, seed)
        for depth in DEPTHS:  # on the refitted bridge: what is deployed
            top, touched = library_cascade(deployed, folder, new_q[rest], new_d, sample, depth)
            add("latentstitch", f"cascade@{depth}", top, touched)
        library_seconds = time.perf_counter() - started
        for row in rows:
            row.setdefault("seconds", library_seconds if row["who"] == "latentstitch" else None)
        for peer, python in peers.items():
            started = time.perf_counter()
            report = run_peer(peer, python, folder, threads)
            seconds = time.perf_counter() - started
            out = folder / peer
            common = {"version": report.get("version"), "chosen": report.get("chosen"), "seconds": seconds}
            for mode in ("query", "corpus"):
                path = out / f"{mode}_side.npy"
                if path.exists():
                    mapped = np.load(path)
                    if mode == "query":
                        top = search(mapped, old_d, 10, "cosine")
                    else:
                        mapped[sample] = new_d[sample]
                        top = search(new_q[rest], mapped, 10, "cosine")
                    chosen = report.get("corpus_method") if mode == "corpus" else None
                    add(peer, f"{mode}-side", top, **{**common, "chosen": chosen or common["chosen"]})
                else:
                    reason = report.get("refused", {}).get(mode) or report.get("error", "no output")
                    rows.append({**base, "who": peer, "arrangement": f"{mode}-side", "refused": reason, **common})
            for depth in DEPTHS:
                path = out / f"cascade-{depth}.npy"
                if path.exists():
                    cost = report["cascade"][str(depth)]
                    add(peer, f"cascade@{depth}", np.load(path), cost["touched"], **common)
                else:
                    reason = report.get("refused", {}).get("cascade") or report.get("error", "no output")
                    rows.append({**base, "who": peer, "arrangement": f"cascade@{depth}", "refused": reason, **common})
            if report.get("decision"):
                rows[-1]["peer_decision"] = report["decision"]
            if report.get("error"):
                print(f"  {peer} failed: {report['error']}", flush=True)
    reference = rows[0]["recall"]
    for row in rows:
        if "recall" in row:
            row["retention"] = row["recall"] / reference if reference else float("nan")
    return rows, decisions


def single_stage(migration, old_d, new_d, new_queries, sample) -> dict[str, np.ndarray]:
    """Each mode's top 10 for the queries: query-side over the old index, corpus-side over the bridged index with
    the sample's own new vectors."""
    from latentstitch.migrate import search

    migrated = np.array(migration.transform_corpus(old_d), dtype=np.float32)
    migrated[sample] = new_d[sample]
    return {
        "query": search(migration.transform_queries(new_queries), old_d, 10, "cosine"),
        "corpus": search(new_queries, migrated, 10, "cosine"),
    }


#: The signals the certificate's decision can read here: the held-out re-embedded items as queries (overlap@10
#: with a full re-embed's top 10; what a user without a query log gets, as the peers get none) and the held-out
#: documents' own labelled queries (given to certify only: the bridge is fitted on documents alone either way).
SIGNALS = ("no query log", "labelled held-out queries")


def certificates(migration, ids, old_d, old_q, new_d, new_q, plan, seed) -> dict:
    """The library's certificate of ``migration`` (its defaults: ``keep``, ``small_index``) per signal."""
    from latentstitch.migrate import QuerySample, certify_migration

    held = plan.holdout_ids
    labelled = QuerySample(new_q[held], old_q[held], held)
    return {
        signal: certify_migration(migration, ids, old_d, plan.ids, new_d[plan.ids], held, queries=queries, seed=seed)
        for signal, queries in zip(SIGNALS, (None, labelled), strict=True)
    }


def decision_records(base, certified, doing_nothing, chosen, refitted, reference, n_index) -> list[dict]:
    """Per signal: the certificate's decision against the best realised arrangement on the untouched rest
    (``benchmarks.migration.best_arrangement`` with the library's ``small_index``, the deployed (refitted) bridge
    as the migration), and whether its 95% intervals cover the realised figures of the bridge it measured (the one
    fitted on 70%): labelled, the whole-index Recall@10 of the chosen mode and of the old model; without labels, the
    decision's overlap@10 of the migration and of the old model (measured within the re-embedded sample; realised
    over the whole index: not the same universe, said in the results)."""
    from benchmarks.migration import best_arrangement
    from latentstitch.migrate import SMALL_INDEX

    best = best_arrangement(doing_nothing["recall"], refitted["recall"], reference["recall"], n_index, SMALL_INDEX)
    records = []
    for signal, certificate in certified.items():
        decision = certificate.decision
        if signal == SIGNALS[1]:
            whole = certificate.measures["queries"]["whole_index"]
            chosen_interval = certificate.recall10("queries")
            old_interval = whole["old model"]["recall@10"]
            key = "recall"
        else:
            arrangements = decision["arrangements"]
            chosen_interval = arrangements[f"migrate ({certificate.mode}-side)"]
            old_interval = arrangements["keep the old model"]
            key = "overlap"
        covered = {
            "migration": chosen_interval["low"] <= chosen[key] <= chosen_interval["high"],
            "doing nothing": old_interval["low"] <= doing_nothing[key] <= old_interval["high"],
        }
        records.append(
            {
                **base,
                "signal": signal,
                "measure": decision["measure"],
                "decision": decision["choice"],
                "sentence": decision["sentence"],
                "best": best,
                "matches": decision["choice"] == best,
                "realised": {
                    "doing nothing": doing_nothing["recall"],
                    "migration (refitted)": refitted["recall"],
                    "full re-embed": reference["recall"],
                },
                "intervals": {"migration": chosen_interval, "doing nothing": old_interval},
                "realised_measured": {"migration": chosen[key], "doing nothing": doing_nothing[key]},
                "covered": covered,
            }
        )
    return records


def _table_rows(rows: list[dict], n_documents: dict) -> list[list]:
    out = []
    for r in rows:
        touched = r.get("touched")
        share = "" if touched is None else f"{touched} ({touched / n_documents[r['set']]:.1%})"
        if "refused" in r:
            cells = ["refused", "", "", r["refused"][:90]]
        else:
            cells = [r["recall"], r["retention"], r["overlap"], ""]
        out.append(
            [r["pair"], f"{r['budget']:.0%}", r["seed"], r["who"], r["arrangement"], r["upfront"], share, *cells]
        )
    return out


HEADER = [
    "pair",
    "budget",
    "seed",
    "who",
    "arrangement",
    "re-embedded up front",
    "+ touched / 1,000 queries",
    "R@10",
    "retention",
    "overlap@10",
    "note",
]


def cached(name: str, encoder: str, wait: float = 1800.0):
    """``_migration_data.embedded``, first waiting (up to ``wait`` seconds) for a cache file another process is
    writing (``python -m benchmarks._migration_data`` fills the cache): the same embeddings are not computed twice
    at once on a shared machine."""
    from benchmarks._migration_data import CACHE, embedded

    paths = [CACHE / f"{name}-{encoder}-{part}.npy" for part in ("queries", "documents")]
    deadline = time.monotonic() + wait
    if any(p.exists() for p in paths) and not all(p.exists() for p in paths):
        print(f"waiting for {', '.join(str(p) for p in paths if not p.exists())} (being embedded)", flush=True)
        while not all(p.exists() for p in paths) and time.monotonic() < deadline:
            time.sleep(15)
    return embedded(name, encoder)


def combine(args) -> None:
    """``--combine``: several runs' rows (their commands kept) written as one table into ``--out``."""
    from benchmarks._migration_data import CACHE

    rows, decisions, commands = [], [], []
    for folder in args.combine.split(","):
        got = json.loads((Path(folder) / "results.json").read_text())
        rows.extend(got["rows"])
        decisions.extend(got.get("decisions", []))
        commands.append(got["command"])
    rows.sort(key=lambda r: r["seed"])  # stable: each run's order kept within a seed
    decisions.sort(key=lambda r: r["seed"])
    n_documents = {
        name: np.load(CACHE / f"{name}-{old}-documents.npy", mmap_mode="r").shape[0] for name, old, _, _ in PAIRS
    }
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    args.command = " + ".join(commands) + f" (combined by `{args.command}`)"
    write_results(out_dir, rows, decisions, n_documents, args)
    print(f"wrote {out_dir / 'results.md'} and results.json ({len(rows)} rows from {len(commands)} runs)")
    print(decision_counts(decisions))


def run(args) -> None:
    from benchmarks._harness import print_table

    if args.combine:
        return combine(args)
    seeds = (0,) if args.quick else tuple(int(s) for s in args.seeds.split(","))
    budgets = (0.05,) if args.quick else tuple(float(b) for b in args.budgets.split(","))
    pairs = PAIRS[:1] if args.quick else PAIRS
    if args.pairs:
        wanted = {tuple(p.replace(">", ":").split(":")) for p in args.pairs.split(",")}
        pairs = tuple(p for p in PAIRS if p[:3] in wanted)
        if not pairs:
            raise SystemExit(
                f"--pairs: none of {args.pairs!r} is in PAIRS ({', '.join(f'{s}:{o}>{n}' for s, o, n, _ in PAIRS)})"
            )
    peers = {peer: peer_python(peer, args.peer_python) for peer in PEERS}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, decisions, n_documents, data = [], [], {}, {}
    # seeds outermost: a run cut short still holds every pair and budget at the first seed
    for seed in seeds:
        for name, old, new, kind in pairs:
            if (name, old, new) not in data:
                data[(name, old, new)] = (*cached(name, old), *cached(name, new))
            old_q, old_d, new_q, new_d = data[(name, old, new)]
            n_documents[name] = len(old_d)
            for budget in budgets:
                started = time.perf_counter()
                got, decided = one_run(name, old_q, old_d, new_q, new_d, budget, seed, peers, args.threads)
                for row in got + decided:
                    row.update(pair=f"{name}: {old} -> {new} ({kind})", kind=kind)
                rows.extend(got)
                decisions.extend(decided)
                shown = [r for r in got if r["arrangement"] in BRIEF]
                brief = ", ".join(
                    f"{r['who'][:4]} {r['arrangement']} "
                    + (f"{r['retention']:.2f}x" if "retention" in r else "refused")
                    for r in shown
                )
                seconds = time.perf_counter() - started
                said = "; ".join(f"{d['signal']}: {d['decision']} (best {d['best']})" for d in decided)
                print(f"{name} {old}->{new} {budget:.0%} seed {seed} ({seconds:.0f} s): {brief}; {said}", flush=True)
                write_results(out_dir, rows, decisions, n_documents, args)
    summary = summary_rows(rows, n_documents)
    print_table("mean over seeds (retention = R@10 / the full re-embed's R@10)", SUMMARY_HEADER, summary)
    print(decision_counts(decisions))
    print(f"wrote {out_dir / 'results.md'} and results.json")
    if args.quick:
        print("--quick: one pair, one budget, one seed: too short for verdicts")


BRIEF = ("doing nothing", "chosen (query-side)", "chosen (corpus-side)", "refitted chosen (query-side)")
BRIEF += ("refitted chosen (corpus-side)", "cascade@200")
SUMMARY_HEADER = ["pair", "budget", "who", "arrangement", "seeds", "up front", "+ touched / 1,000 q"]
SUMMARY_HEADER += ["R@10", "retention", "overlap@10", "refused"]


def summary_rows(rows: list[dict], n_documents: dict) -> list[list]:
    """Means over seeds per pair, budget, tool and arrangement (in the order first seen)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["pair"], r["budget"], r["who"], r["arrangement"]), []).append(r)
    out = []
    for (pair, budget, who, arrangement), group in groups.items():
        done = [r for r in group if "recall" in r]
        touched = [r["touched"] for r in done if r.get("touched") is not None]
        n = n_documents[group[0]["set"]]
        share = f"{np.mean(touched):.0f} ({np.mean(touched) / n:.1%})" if touched else ""

        def mean(key, done=done):
            return float(np.mean([r[key] for r in done])) if done else ""

        refused = sorted({r["refused"][:100] for r in group if "refused" in r})
        upfront = int(np.mean([r["upfront"] for r in group]))
        means = [mean("recall"), mean("retention"), mean("overlap")]
        out.append([pair, f"{budget:.0%}", who, arrangement, len(group), upfront, share, *means, "; ".join(refused)])
    return out


DECISION_HEADER = ["pair", "budget", "seed", "signal", "decision", "best realised", "matches"]
DECISION_HEADER += ["realised R@10: nothing / refitted / re-embed", "interval: migration", "realised", "covered"]
DECISION_HEADER += ["interval: doing nothing", "realised", "covered"]


def decision_rows(decisions: list[dict]) -> list[list]:
    out = []
    for d in decisions:
        realised = " / ".join(f"{v:.3f}" for v in d["realised"].values())
        cells = []
        for part in ("migration", "doing nothing"):
            interval = d["intervals"][part]
            cells += [f"[{interval['low']:.3f}, {interval['high']:.3f}]", d["realised_measured"][part]]
            cells.append("yes" if d["covered"][part] else "**no**")
        verdict = "yes" if d["matches"] else "**no**"
        out.append(
            [d["pair"], f"{d['budget']:.0%}", d["seed"], d["signal"], d["decision"], d["best"], verdict, realised]
        )
        out[-1] += cells
    return out


def decision_counts(decisions: list[dict]) -> str:
    """Per signal: the runs whose decision names the best realised arrangement, and whose intervals cover."""
    lines = []
    for signal in SIGNALS:
        got = [d for d in decisions if d["signal"] == signal]
        if not got:
            continue
        matches = sum(d["matches"] for d in got)
        covered = {part: sum(d["covered"][part] for d in got) for part in ("migration", "doing nothing")}
        lines.append(
            f"{signal} ({got[0]['measure']}): the decision named the best realised arrangement in {matches}/{len(got)} "
            f"runs; its interval covered the realised figure in {covered['migration']}/{len(got)} (migration, "
            f"the bridge it measured) and {covered['doing nothing']}/{len(got)} (doing nothing)"
        )
    return "\n".join(lines)


def write_results(out_dir: Path, rows: list[dict], decisions: list[dict], n_documents: dict, args) -> None:
    payload = {"command": args.command, "rows": rows, "decisions": decisions}
    (out_dir / "results.json").write_text(json.dumps(payload, indent=1, default=str))
    title = "migration head to head (same re-embedded samples; retention = R@10 / the full re-embed's R@10)"
    lines = [f"# {title}", "", provenance_line(args.command), ""]
    if args.quick:
        lines.append("**--quick: one pair, one budget, one seed: too short for verdicts.**\n")

    def table(header, body):
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return out + ["| " + " | ".join(f"{c:.3f}" if isinstance(c, float) else str(c) for c in r) + " |" for r in body]

    lines += ["## Mean over seeds", "", *table(SUMMARY_HEADER, summary_rows(rows, n_documents)), ""]
    if decisions:
        lines += ["## The library's decision against the best realised arrangement", ""]
        lines += [decision_counts(decisions).replace("\n", "\n\n"), ""]
        lines += [*table(DECISION_HEADER, decision_rows(decisions)), ""]
    lines += ["## Every run", "", *table(HEADER, _table_rows(rows, n_documents)), ""]
    (out_dir / "results.md").write_text("\n".join(lines))
