"""Which alignment method at which pair budget: two real encoder pairs, 0 / 10 / 50 / 300 seed pairs.

``python -m benchmarks alignment_budgets --threads 1`` (about half an hour on two busy cores; run it niced).

Pairs of spaces (packaged, offline):

- **words**: GloVe 6B 50-d vs spaCy ``en_core_web_md`` 300-d, the same words (identical strings are the ground
  truth), 3,000 words of the word-embedding reproduction's search vocabulary.
- **text**: all-MiniLM-L6-v2 (source) vs multilingual-e5-small (target) on 1,200 BBC News articles (the cached
  embeddings of the text reproductions), 900 train / 300 test, 5 topics.

For each budget k the same k seed pairs (random, 3 draws) are given to every method: cosine relative projection
on the k anchors and ridge least squares on the k pairs (the baselines), ``InverseRelativeProjection``,
``bootstrap_anchors`` (k seeds grown into more anchors, then relative projection on all of them, the paper's use),
``FunctionalMap`` (k anchors plus the unpaired structure), ``GeneralizedProcrustes`` (two spaces, k pairs), and
``UnpairedAlignment`` (no pair at all: the same at every budget, reported at 0). Measured: top-1 and MRR of the
correct partner when each translated source row queries all target rows (cosine; words: all 3,000 words; text:
the 300 test articles), and for the text pair the zero-shot accuracy of a logistic-regression head trained on the
target's train embeddings and applied to the translated source test embeddings (relative methods: a head on the
target's relative vectors).
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from latentstitch._core.provenance import with_provenance

RUN_BY_DEFAULT = False
BUDGETS = (0, 10, 50, 300)
DRAWS = 3  # seed-pair draws per budget
UNPAIRED_DRAWS = 1  # UnpairedAlignment uses no pair; one fit at the official budget takes ~10 min on a busy 2-core CPU


def add_arguments(parser) -> None:
    parser.add_argument(
        "--out",
        default="latentstitch-results/alignment-budgets",
        help="folder for results.json and table.md (default latentstitch-results/alignment-budgets; the committed "
        "run in results/alignment-budgets is written only when named)",
    )
    parser.add_argument("--words", type=int, default=3000, help="candidate words of the word pair (default 3000)")
    parser.add_argument("--pairs", default="words,text", help="which pairs to run: words, text or both (default)")


def _ranks(queries: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Rank (1 = best) of row i of ``index`` among all index rows for query i, by cosine."""
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    x = index / np.linalg.norm(index, axis=1, keepdims=True)
    scores = q @ x.T
    own = scores[np.arange(len(q)), np.arange(len(q))]
    return 1 + (scores > own[:, None]).sum(axis=1)


def _retrieval(queries: np.ndarray, index: np.ndarray) -> tuple[float, float]:
    ranks = _ranks(queries, index)
    return float(np.mean(ranks == 1)), float(np.mean(1.0 / ranks))


def _centred(x: np.ndarray, reference: np.ndarray) -> np.ndarray:
    return x - reference.mean(axis=0)


def _ridge(a: np.ndarray, b: np.ndarray):
    from latentstitch.stitching import LeastSquares

    gram = np.cov(a.T, bias=True) * len(a)
    return LeastSquares(ridge=0.1 * float(np.trace(np.atleast_2d(gram))) / a.shape[1]).fit(a, b)


def _methods(source, target, seeds, budget, rng_seed, pool_source, pool_target, n_grow):
    """Every method's outputs for one seed draw: {name: ("absolute", translate_fn) | ("relative", (fs, ft))}."""
    from latentstitch.alignment import (
        FunctionalMap,
        GeneralizedProcrustes,
        InverseRelativeProjection,
        bootstrap_anchors,
    )
    from latentstitch.relative import relative_projection

    out = {}
    s_anchor, t_anchor = pool_source[seeds[:, 0]], pool_target[seeds[:, 1]]

    def relative(anchors_s, anchors_t):
        return (
            lambda x: relative_projection(x, anchors_s, center=True),
            lambda y: relative_projection(y, anchors_t, center=True),
        )

    out["relative projection (cosine)"] = ("relative", relative(s_anchor, t_anchor))
    out["ridge least squares"] = ("absolute", _ridge(s_anchor, t_anchor).transform)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer anchors than target features: rank-deficient inverse, expected
        out["InverseRelativeProjection"] = ("absolute", InverseRelativeProjection().fit(s_anchor, t_anchor).transform)
        grown = bootstrap_anchors(pool_source, pool_target, seeds, n_grow)
        every = np.concatenate([seeds, grown.pairs])
        out["bootstrap_anchors + relative"] = (
            "relative",
            relative(pool_source[every[:, 0]], pool_target[every[:, 1]]),
        )
        fm = FunctionalMap().fit(pool_source, pool_target, seeds)
        out["FunctionalMap"] = ("absolute", fm.transform)
        gpa = GeneralizedProcrustes().fit(s_anchor, t_anchor)
        out["GeneralizedProcrustes (2 spaces)"] = ("absolute", gpa.transform)
    extras = {"bootstrap_confidence_median": float(np.median(grown.confidence)), "lfm_similarity": fm.similarity_}
    return out, extras


# --quick: one seed-pair draw per budget and a reduced UnpairedAlignment budget (indicative figures only)
QUICK_UNPAIRED = {"n_matchings": 10, "n_restarts": 10, "refine_iter": 30, "refine_clusters": 100}
_OPTIONS: dict = {"draws": DRAWS, "unpaired": {}}


def _unpaired(pool_source, pool_target, seed):
    from latentstitch.alignment import UnpairedAlignment

    model = UnpairedAlignment(random_state=seed, **_OPTIONS["unpaired"]).fit(pool_source, pool_target)
    return ("absolute", model.transform), {"score": model.score_, "kmeans_consistency": model.kmeans_consistency_}


def _evaluate(kind, fn, source_eval, target_eval, head=None):
    if kind == "absolute":
        query, index = fn(source_eval), target_eval
    else:
        query, index = fn[0](source_eval), fn[1](target_eval)
    top1, mrr = _retrieval(query, index)
    return top1, mrr, query, index


def _words(n_words: int):
    from latentstitch.experiments.word_embeddings import search_vocabulary

    _, glove, spacy = search_vocabulary(n_words)
    return glove.astype(np.float32), spacy.astype(np.float32)


def _text():
    from latentstitch.experiments.tasks import bbc_task, embed

    task = bbc_task(1200, 500)
    encoders: dict = {}
    minilm = embed("minilm-l6", task.texts, progress=False, encoders=encoders)
    e5 = embed("e5-small", task.texts, progress=False, encoders=encoders)
    return task, minilm.astype(np.float32), e5.astype(np.float32)


def _summary(values: list[float]) -> list[float]:
    return [float(np.mean(values)), float(np.std(values))]


def run(args) -> None:
    if getattr(args, "quick", False):
        _OPTIONS.update(draws=1, unpaired=QUICK_UNPAIRED)
    _OPTIONS["command"] = getattr(args, "command", "python -m benchmarks alignment_budgets")
    torch.manual_seed(0)
    out_dir = Path(getattr(args, "out", "latentstitch-results/alignment-budgets"))
    out_dir.mkdir(parents=True, exist_ok=True)
    n_words = int(getattr(args, "words", 3000))
    started = time.perf_counter()
    results: dict = {"words": {}, "text": {}, "quick": bool(getattr(args, "quick", False))}
    pairs = str(getattr(args, "pairs", "words,text")).split(",")
    if "words" in pairs:
        _run_words(results, n_words, out_dir, started)
    if "text" in pairs:
        _run_text(results, out_dir, started)
    results["seconds"] = time.perf_counter() - started
    _write(out_dir, results)
    print((out_dir / "table.md").read_text())


def _run_words(results: dict, n_words: int, out_dir: Path, started: float) -> None:
    # --- words: GloVe-50 vs spaCy-300, identical strings --------------------------------------------------
    glove, spacy = _words(n_words)
    n = len(glove)
    results["words_n"] = n
    print(f"words: {n} words with distinct vectors in both tables", flush=True)
    for budget in BUDGETS:
        rows: dict = {}
        for draw in range(UNPAIRED_DRAWS if budget == 0 else _OPTIONS["draws"]):
            rng = np.random.default_rng(1000 * budget + draw)
            if budget == 0:
                named = {"UnpairedAlignment (no pairs)": _unpaired(glove, spacy, draw)}
                extras = {}
            else:
                index = rng.choice(n, size=budget, replace=False)
                seeds = np.stack([index, index], axis=1)
                outputs, extras = _methods(glove, spacy, seeds, budget, draw, glove, spacy, n_grow=n // 3)
                named = {name: (kind, fn) for name, (kind, fn) in outputs.items()}
                named = {k: (v, {}) for k, v in named.items()}
            for name, ((kind, fn), info) in named.items():
                top1, mrr, _, _ = _evaluate(kind, fn, glove, spacy)
                entry = rows.setdefault(name, {"top1": [], "mrr": [], "info": []})
                entry["top1"].append(top1)
                entry["mrr"].append(mrr)
                entry["info"].append({**info, **extras})
            print(f"words k={budget} draw {draw}: {time.perf_counter() - started:.0f}s", flush=True)
        results["words"][budget] = {
            name: {"top1": _summary(v["top1"]), "mrr": _summary(v["mrr"]), "info": v["info"]}
            for name, v in rows.items()
        }
        _write(out_dir, results)


def _run_text(results: dict, out_dir: Path, started: float) -> None:
    from sklearn.linear_model import LogisticRegression

    # --- text: MiniLM-L6 vs e5-small on BBC News ----------------------------------------------------------
    task, minilm, e5 = _text()
    n_train = len(task.train)
    y_train, y_test = np.asarray(task.y_train), np.asarray(task.y_test)
    s_train, s_test, t_train, t_test = minilm[:n_train], minilm[n_train:], e5[:n_train], e5[n_train:]
    ceiling = LogisticRegression(max_iter=2000).fit(t_train, y_train).score(t_test, y_test)
    results["text_target_head_on_target"] = float(ceiling)
    for budget in BUDGETS:
        rows = {}
        for draw in range(UNPAIRED_DRAWS if budget == 0 else _OPTIONS["draws"]):
            rng = np.random.default_rng(2000 * budget + draw)
            if budget == 0:
                named = {"UnpairedAlignment (no pairs)": _unpaired(minilm, e5, draw)}
            else:
                index = rng.choice(n_train, size=budget, replace=False)
                seeds = np.stack([index, index], axis=1)
                outputs, extras = _methods(s_train, t_train, seeds, budget, draw, minilm, e5, n_grow=400)
                named = {k: (v, extras) for k, v in outputs.items()}
            for name, ((kind, fn), info) in named.items():
                top1, mrr, query, _ = _evaluate(kind, fn, s_test, t_test)
                if kind == "absolute":
                    head = LogisticRegression(max_iter=2000).fit(t_train, y_train)
                    accuracy = head.score(query, y_test)
                else:
                    head = LogisticRegression(max_iter=2000).fit(fn[1](t_train), y_train)
                    accuracy = head.score(query, y_test)
                entry = rows.setdefault(name, {"top1": [], "mrr": [], "accuracy": [], "info": []})
                entry["top1"].append(top1)
                entry["mrr"].append(mrr)
                entry["accuracy"].append(float(accuracy))
                entry["info"].append(info)
            print(f"text k={budget} draw {draw}: {time.perf_counter() - started:.0f}s", flush=True)
        results["text"][budget] = {
            name: {
                "top1": _summary(v["top1"]),
                "mrr": _summary(v["mrr"]),
                "accuracy": _summary(v["accuracy"]),
                "info": v["info"],
            }
            for name, v in rows.items()
        }
        _write(out_dir, results)


def _write(out_dir: Path, results: dict) -> None:
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    lines = ["# Alignment methods by pair budget", ""]
    if results.get("quick"):
        lines += ["Quick run (--quick): one seed-pair draw per budget, reduced UnpairedAlignment budget.", ""]
    for pair, title, columns in (
        ("words", f"Words: GloVe-50d -> spaCy-300d, {results.get('words_n', '?')} words", ("top1", "mrr")),
        ("text", "Text: MiniLM-L6 -> e5-small, BBC News (300 test articles)", ("top1", "mrr", "accuracy")),
    ):
        if not results[pair]:
            continue
        header = "| pairs | method | " + " | ".join(columns) + " |"
        lines += [f"## {title}", "", header, "|---|---|" + "---|" * len(columns)]
        for budget, methods in results[pair].items():
            for name, values in methods.items():
                cells = [f"{values[c][0]:.3f} ± {values[c][1]:.3f}" for c in columns]
                lines.append(f"| {budget} | {name} | " + " | ".join(cells) + " |")
        lines.append("")
    if "text_target_head_on_target" in results:
        lines.append(f"Target head on the target's own test embeddings: {results['text_target_head_on_target']:.3f}.")
    command = _OPTIONS.get("command", "python -m benchmarks alignment_budgets")
    (out_dir / "table.md").write_text(with_provenance("\n".join(lines) + "\n", command))
