"""Word embeddings: two word-vector spaces compared with absolute and relative representations (Moschella et al.,
ICLR 2023, Table 1; ``fig:latent-rotation-comparison``).

Two pairs of spaces (``vocabularies``): the paper's kind, fastText vs word2vec trained with gensim on the same real
packaged text; and GloVe-50d vs the pruned spaCy ``en_core_web_md`` table. ``retrieval`` measures cross-space
retrieval (Jaccard@5, MRR, matched cosine) over 10 anchor seeds, ``patterns`` declares what the paper shows,
``figures`` draws the neighbourhoods and the metrics.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from latentstitch.experiments._report import Report, ResultTable, judge
from latentstitch.experiments._run import chosen
from latentstitch.experiments.word_embeddings import figures, patterns
from latentstitch.experiments.word_embeddings.config import FULL, QUICK, Config
from latentstitch.experiments.word_embeddings.retrieval import NUM_ANCHORS, K, as_json, evaluate, retrieval, summary
from latentstitch.experiments.word_embeddings.retrieval import zero_pad as zero_pad
from latentstitch.experiments.word_embeddings.vocabularies import (
    SEARCH_MIN_COUNT,
    SWEEP_COUNTS,
    SpacePair,
    glove_spacy_pair,
    search_vocabulary,
    trained_pair,
    training_corpus,
)
from latentstitch.relative import select_anchors

HELP = "fastText vs word2vec (trained on packaged text) and GloVe vs spaCy: cross-space retrieval, absolute vs relative"
PAPER = (
    "Moschella et al., Relative representations enable zero-shot latent space communication, ICLR 2023 "
    "(Table 1: word embeddings)"
)

# Table 1 of the paper (FastText <-> word2vec, 20k words, 10 seeds); methods §1 and relative-representations.md.
PAPER_TABLE = {
    ("relative", "FT -> W2V"): ((0.34, 0.01), (0.94, 0.00), (0.86, 0.00)),
    ("relative", "W2V -> FT"): ((0.39, 0.00), (0.98, 0.00), (0.86, 0.00)),
    ("absolute", "FT -> W2V"): (0.00, 0.00, 0.01),
    ("absolute", "W2V -> FT"): (0.00, 0.00, 0.01),
    ("same space", ""): (1.00, 1.00, 1.00),
}

__all__ = [
    "FULL",
    "HELP",
    "PAPER",
    "PAPER_TABLE",
    "QUICK",
    "Config",
    "retrieval",
    "run",
    "search_vocabulary",
    "zero_pad",
]


def _table(result: dict, first: str, second: str, title: str) -> ResultTable:
    rows = []
    for direction, paper_direction in ((f"{first} -> {second}", "FT -> W2V"), (f"{second} -> {first}", "W2V -> FT")):
        rows.append(["absolute", direction, *result["absolute"][direction], *PAPER_TABLE["absolute", paper_direction]])
        rows.append(
            [
                "relative",
                direction,
                *summary(result["relative"]["plain"][direction]),
                *PAPER_TABLE["relative", paper_direction],
            ]
        )
    for direction, values in result["same_space"].items():
        rows.append(["absolute, same space", direction, *values, *PAPER_TABLE["same space", ""]])
    for direction, values in result["equal_width_controls"].items():
        rows.append(["absolute, equal width (PCA of the wider)", direction, *values, None, None, None])
    for direction, runs in result["relative"]["centred"].items():
        rows.append(["relative, anchor-centred", direction, *summary(runs), None, None, None])
    return ResultTable(
        f"{title}: cross-space retrieval over {result['words']:,} words, k={K}",
        [
            "representation",
            "query -> index",
            "Jaccard@5",
            "MRR",
            "cosine",
            "paper Jaccard",
            "paper MRR",
            "paper cosine",
        ],
        rows,
        note=(
            f"relative: cosine to {NUM_ANCHORS} random parallel anchor words, mean ± std over seeds "
            f"{result['seeds'][0]}-{result['seeds'][-1]}. Paper (FastText / word2vec, 20,000 words): FT -> W2V beside "
            f"the first direction, W2V -> FT beside the second. Chance: Jaccard@5 {result['chance'][0]:.4f}, MRR "
            f"{result['chance'][1]:.4f}. Rows without paper numbers are controls not in the paper."
        ),
        digits=2,
    )


def _sweep_table(sweep: dict, first: str, second: str) -> ResultTable:
    rows = []
    for count, result in sweep.items():
        for direction in (f"{first} -> {second}", f"{second} -> {first}"):
            rows.append(
                [
                    f">= {count}",
                    result["words"],
                    direction,
                    *summary(result["relative"]["plain"][direction]),
                    max(result["absolute"][direction][:2]),
                ]
            )
    return ResultTable(
        "fastText vs word2vec: relative retrieval by the corpus count of the search words",
        ["seen", "words", "query -> index", "Jaccard@5", "MRR", "cosine", "absolute max(Jaccard, MRR)"],
        rows,
        note=f"the search words of the main table are those seen >= {SEARCH_MIN_COUNT} times; rarer words have "
        "noisier vectors in both tables, and fewer words make retrieval easier: both push the same way",
        digits=2,
    )


def run(*, quick: bool, out_dir: Path, progress: bool, config: Config | None = None) -> Report:
    """Train the fastText / word2vec pair, load GloVe / spaCy, measure cross-space retrieval, draw the figures into
    ``out_dir``; return the report. ``config`` (default ``QUICK`` if ``quick`` else ``FULL``) holds every setting;
    ``quick`` says what to report."""
    started = time.perf_counter()
    config = chosen(quick, config, QUICK, FULL)
    trained, pairs = load_spaces(config)
    results, sweep = measure(trained, pairs, list(config.seeds), progress=progress)
    ft, glove = pairs["ft-w2v"], pairs["glove-spacy"]
    report = Report(
        name="word-embeddings",
        title="Word embeddings: cross-space neighbourhoods with absolute vs relative representations",
        paper=PAPER,
        setting=setting(pairs, config),
        differences=differences(pairs, quick=quick),
        tables=[
            _table(results["ft-w2v"], *ft.names, "fastText vs word2vec (trained with gensim on the same text)"),
            _sweep_table(sweep, *ft.names),
            _table(results["glove-spacy"], *glove.names, "GloVe-50d vs spaCy-300d"),
        ],
        patterns=judge(patterns.patterns(), patterns.measure(results), quick=quick),
        figures=draw(trained, pairs, results, sweep, Path(out_dir)),
        numbers={
            "settings": asdict(config),
            **{key: as_json(result) for key, result in results.items()},
            "ft-w2v_by_count": {str(count): as_json(result) for count, result in sweep.items()},
        },
        quick=quick,
    )
    report.seconds = time.perf_counter() - started
    return report


def load_spaces(config: Config) -> tuple[SpacePair, dict[str, SpacePair]]:
    """fastText / word2vec trained on the packaged text (every candidate word), and the two pairs of spaces
    compared: their frequent search words, and GloVe / spaCy."""
    sentences = training_corpus(config.max_tokens)
    trained = trained_pair(
        sentences,
        dim=config.dim,
        epochs=config.epochs,
        min_count=config.min_count,
        max_words=config.max_words,
    )
    pairs = {"ft-w2v": trained.frequent(SEARCH_MIN_COUNT), "glove-spacy": glove_spacy_pair(config.glove_max_words)}
    return trained, pairs


def measure(
    trained: SpacePair, pairs: dict[str, SpacePair], seeds: list[int], *, progress: bool
) -> tuple[dict[str, dict], dict[int, dict]]:
    """Cross-space retrieval of both pairs over the anchor ``seeds``, and of fastText / word2vec by how often the
    search words occur (the first three seeds)."""
    results = {
        key: evaluate(pair, seeds, progress=progress, description=f"word embeddings: {key}, seeds")
        for key, pair in pairs.items()
    }
    sweep = {
        count: evaluate(trained.frequent(count), seeds[:3], progress=False, description="")
        for count in SWEEP_COUNTS
        if (trained.counts >= count).sum() > NUM_ANCHORS
    }
    return results, sweep


def draw(trained: SpacePair, pairs: dict[str, SpacePair], results: dict, sweep: dict, out_dir: Path) -> dict[str, str]:
    """The neighbourhoods of both pairs, the retrieval metrics and the sweep by count, in ``out_dir``."""
    figure_paths = {}
    for key, pair in pairs.items():
        first = pair.names[0]
        anchors = select_anchors(pair.vectors[first], NUM_ANCHORS, "random", seed=0)
        caption = f"{patterns.PAIRS[key]}: neighbourhoods of a few words, absolute vs relative"
        figure_paths[caption] = figures.plot_neighbourhoods(pair, anchors, out_dir / f"neighbourhoods_{key}.png")
    figure_paths["retrieval metrics of both pairs, absolute vs relative"] = figures.plot_metrics(
        results, patterns.PAIRS, out_dir / "retrieval.png"
    )
    figure_paths["fastText vs word2vec: relative retrieval by how often the search words occur"] = (
        figures.plot_count_sweep(sweep, trained.names, out_dir / "retrieval_by_count.png")
    )
    return figure_paths


def setting(pairs: dict[str, SpacePair], config: Config) -> dict[str, str]:
    ft, glove = pairs["ft-w2v"], pairs["glove-spacy"]
    return {
        "pair 1 (the paper's kind)": ft.source,
        "pair 2": glove.source,
        "search words": (
            f"relreps recipe: frequency order, 400 most frequent skipped, alphabetic, >= 4 letters; pair 1: "
            f"{len(ft.words):,} words (of at most {config.max_words:,}), pair 2: {len(glove.words):,}"
        ),
        "anchors": f"{NUM_ANCHORS} random search words (uniform), the same words in both spaces, seeds "
        f"{list(config.seeds)}",
        "relative": "cosine similarity to the anchors, no centring (relreps RelativeAttention, inner/L2)",
        "retrieval": f"inner product of L2-normalised vectors, k={K} (jaccard_at_k, mrr(k=5), matched_cosine)",
    }


def differences(pairs: dict[str, SpacePair], *, quick: bool) -> list[str]:
    ft, glove = pairs["ft-w2v"], pairs["glove-spacy"]
    return [
        f"pair 1 search words are the words seen at least {SEARCH_MIN_COUNT} times ({len(ft.words):,}; the paper: "
        "the first 20,000 of a vocabulary built on billions of tokens, every one of them frequent): on so small a "
        "corpus a rare word's vector is mostly noise (see the table by count)",
        "pair 1: fastText and word2vec trained here on ~1.6 million tokens of Bible verses and news (the paper: "
        "pretrained FastText on Common Crawl and word2vec on Google News, billions of tokens; neither ships in a "
        "registry package). Both tables come from the same text, so they share a vocabulary and its statistics: "
        "an easier pair than the paper's, which differ in corpus too",
        "pair 2: different widths (50 vs 300), so absolute cross-space retrieval zero-pads GloVe to 300-d (a query "
        "then sees only spaCy's first 50 coordinates); a control at equal width compares GloVe with spaCy's own "
        "50 principal components",
        "pair 2: spaCy's md table keeps 20,000 distinct vectors and maps every other word to one of them: its "
        "'river' vector is shared with 'bank', 'central' and 'exit'. One word per distinct vector is kept "
        f"({len(glove.words):,} words), and neighbourhoods in spaCy's space are often unrelated to the word's "
        "meaning in GloVe, which caps how far any representation can align the two",
        "mean cosine over all words (the paper averages 4 chunks of 5,000: the same value for 20,000)",
        "anchors drawn with numpy (select_anchors, seed s) instead of Python's random.sample",
    ] + (
        ["--quick: pair 1 trained 5 epochs at 100-d on the first 600,000 tokens; 5,000 candidates; 2 anchor seeds"]
        if quick
        else []
    )
