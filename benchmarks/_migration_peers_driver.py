"""Runs one peer (rebasis or isotrieve) on the files ``benchmarks/migration_peers.py`` writes, through the peer's own
public API and its own defaults. Executed by the peer's own virtual environment's Python (rebasis needs >= 3.12), so
it imports only numpy, the standard library and the peer: never latentstitch.

``python _migration_peers_driver.py PEER JOB``: JOB holds ``old_documents.npy`` (the index, old model, row i = id
``str(i)``), ``new_documents.npy`` (the new model's vectors of every document: the re-embedded sample's rows, and
the stand-in for the new model when a cascade re-embeds its candidates), ``new_queries.npy`` (the evaluation queries,
new model) and ``sample.json`` (``sample``: the re-embedded document ids, the same for every arrangement; ``seed``;
``depths``: the cascade depths; ``touched_queries``: how many queries the re-embedding cost is counted over). The
driver writes into JOB/PEER/: ``query_side.npy`` (the queries mapped into the old space), ``corpus_side.npy`` (the
old index mapped into the new space), ``cascade-DEPTH.npy`` (each query's top-10 ids) and ``report.json`` (version,
what the peer chose, what it refused and why, the candidates each cascade re-embedded).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import traceback
import warnings
from importlib.metadata import version
from pathlib import Path

import numpy as np


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _refusal(exc: BaseException) -> str:
    hint = getattr(exc, "hint", None)
    return f"{type(exc).__name__}: {exc}" + (f" (hint: {hint})" if hint else "")


def isotrieve(job: dict, old_d, new_d, new_q, out: Path, report: dict) -> None:
    """RidgeMapping's defaults (GCV alpha, a bias, 10% held out inside fit): fitted old -> new on the sample;
    corpus-side = ``transform`` of the index, query-side = ``QueryAdapter.map_queries`` (its serve mode, the
    inverse ridge). isotrieve 0.4 has no embedding cascade (its reranker is a text cross-encoder)."""
    from isotrieve import RidgeMapping
    from isotrieve.serve import QueryAdapter

    sample = np.asarray(job["sample"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mapping = RidgeMapping(seed=job["seed"]).fit(old_d[sample], new_d[sample])
    report["warnings"] = sorted({str(w.message) for w in caught})
    report["chosen"] = f"ridge alpha={mapping._chosen_alpha:g} (inverse {mapping._chosen_inv_alpha:g})"
    np.save(out / "corpus_side.npy", np.asarray(mapping.transform(old_d), np.float32))
    np.save(out / "query_side.npy", np.asarray(QueryAdapter(mapping).map_queries(new_q), np.float32))
    report["refused"]["cascade"] = "isotrieve 0.4 has no cascade (its reranking is a text cross-encoder)"


class _RecordingStore:
    """rebasis's own MemoryStore, recording which ids each search returned (the candidates a cascade re-embeds)."""

    def __init__(self, store):
        self._store, self.found = store, []

    def __getattr__(self, name):
        return getattr(self._store, name)

    def search(self, vector, k, **kwargs):
        hits = self._store.search(vector, k, **kwargs)
        self.found.append([int(h.id) for h in hits])
        return hits


def rebasis(job: dict, old_d, new_d, new_q, out: Path, report: dict) -> None:
    """``probe_store`` (its `auto`: every CPU candidate, CSLS, T0 ground truth from held-out sample documents) handed
    the shared sample, split by its own ``split_disjoint`` (its default share: 1,000 query proxies of a 10,000
    sample), with ``fit_migration=True`` for the corpus-side map; the query-side adapter saved as a ``.rbs`` and
    served by ``Bridge``; its ``Cascade`` over its own ``MemoryStore`` (the old index) with a
    ``PrecomputedEmbedder`` of the new model's document vectors."""
    from rebasis.core.serialization import save_adapter
    from rebasis.embed.backends.precomputed import PrecomputedEmbedder
    from rebasis.probe.session import CorpusSample, probe_store
    from rebasis.sample.strategies import SampleResult, split_disjoint
    from rebasis.serve.bridge import Bridge
    from rebasis.serve.cascade import Cascade
    from rebasis.store.backends.memory import MemoryStore
    from rebasis.types import EncodingProfile

    sample = np.asarray(job["sample"])
    ids = [str(i) for i in range(len(old_d))]
    new_table = {ids[i]: new_d[i] for i in range(len(new_d))}
    old_profile = EncodingProfile(model_id="old", dim=old_d.shape[1])
    new_profile = EncodingProfile(model_id="new", dim=new_d.shape[1])
    embedder = PrecomputedEmbedder(new_profile, new_table)
    store = MemoryStore(ids, _unit(old_d), texts=ids)
    seed = job["seed"]
    try:
        queries, fit = split_disjoint(
            SampleResult(indices=np.arange(len(sample)), strategy="kmeans", seed=seed),
            max(1, round(len(sample) * 1_000 / 10_000)),
            seed=seed,
        )
        corpus = CorpusSample(
            ids=[ids[i] for i in sample],
            texts=[ids[i] for i in sample],
            old_vectors=_unit(old_d[sample]),
            query_positions=queries,
            fit_positions=fit,
            n_total=len(ids),
            strategy="kmeans (latentstitch's plan)",
            seed=seed,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result, _ = probe_store(store, embedder, sample=corpus, seed=seed, fit_migration=True)
    except Exception as exc:  # the peer's refusal is a result: recorded, every arrangement
        for arrangement in ("query", "corpus", "cascade"):
            report["refused"][arrangement] = _refusal(exc)
        return
    summary = result.to_dict()
    report["chosen"] = summary.get("best_adapter", {}).get("adapter_type")
    report["decision"] = {
        k: summary.get(k) for k in ("recommendation", "verdict", "decision", "reason") if k in summary
    }
    report["probe"] = {k: summary[k] for k in ("n_fit_pairs", "n_queries", "tier") if k in summary}
    with tempfile.TemporaryDirectory() as folder:
        path = save_adapter(
            result.adapter,
            Path(folder) / "query.rbs",
            direction="query_to_old",
            old_profile=old_profile,
            new_profile=new_profile,
            calibrator=result.calibrator,
        )
        bridge = Bridge.load(path, expected_old=old_profile, expected_new=new_profile)
    np.save(out / "query_side.npy", np.asarray(bridge.to_index_space(new_q), np.float32))
    if result.migration is not None:
        report["corpus_method"] = result.migration.method
        mapped = result.migration.adapter.apply(_unit(old_d))  # fitted on unit vectors, as its store reads them
        np.save(out / "corpus_side.npy", np.asarray(_unit(mapped), np.float32))
    else:
        report["refused"]["corpus"] = "probe_store(fit_migration=True) returned no migration fit"
    report["cascade"] = {}
    for depth in job["depths"]:
        recording = _RecordingStore(store)
        cascade = Cascade(recording, bridge, embedder, candidates=depth)
        started = time.perf_counter()
        top = np.array([[int(h.id) for h in cascade.search(q, k=10)] for q in new_q], dtype=np.int64)
        seconds = time.perf_counter() - started
        np.save(out / f"cascade-{depth}.npy", top)
        touched = set().union(*map(set, recording.found[: job["touched_queries"]])) - set(sample.tolist())
        report["cascade"][str(depth)] = {
            "touched": len(touched),
            "over_queries": min(len(new_q), job["touched_queries"]),
            "embedded": cascade.stats.documents_embedded,
            "seconds_per_query": seconds / max(len(new_q), 1),
        }


def main(peer: str, job_dir: str) -> int:
    job_path = Path(job_dir)
    job = json.loads((job_path / "sample.json").read_text())
    out = job_path / peer
    out.mkdir(exist_ok=True)
    old_d, new_d, new_q = (np.load(job_path / f"{n}.npy") for n in ("old_documents", "new_documents", "new_queries"))
    report = {"peer": peer, "version": version(peer), "python": sys.version.split()[0], "refused": {}}
    started = time.perf_counter()
    try:
        {"isotrieve": isotrieve, "rebasis": rebasis}[peer](job, old_d, new_d, new_q, out, report)
    except Exception as exc:
        report["error"] = _refusal(exc)
        report["traceback"] = traceback.format_exc()[-3000:]
    report["seconds"] = time.perf_counter() - started
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
