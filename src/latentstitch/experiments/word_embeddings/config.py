"""Every setting of a word-embeddings run: the full run and the quick one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """One run's settings (``FULL`` and ``QUICK`` below)."""

    #: tokens of the packaged training text the fastText / word2vec pair is trained on (None: all of it).
    max_tokens: int | None
    #: width of the trained fastText and word2vec vectors.
    dim: int
    #: gensim training epochs of each.
    epochs: int
    #: gensim ``min_count``: rarer words get no vector.
    min_count: int
    #: candidate search words of the trained pair (frequency order; the relreps filters then apply).
    max_words: int
    #: candidate search words of the GloVe / spaCy pair.
    glove_max_words: int
    #: anchor seeds (one random anchor set per seed; the count sweep uses the first three).
    seeds: tuple[int, ...]


FULL = Config(
    max_tokens=None,
    dim=300,
    epochs=10,
    min_count=5,
    max_words=20_000,
    glove_max_words=20_000,
    seeds=tuple(range(10)),
)

QUICK = Config(
    max_tokens=600_000,
    dim=100,
    epochs=5,
    min_count=5,
    max_words=5_000,
    glove_max_words=5_000,
    seeds=(0, 1),
)
