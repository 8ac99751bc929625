"""The encoder pairs of the generalisation benchmark and their fixed development / validation split.

A pair is two spaces of one item set; both orders (each side as the new model, ``source``) are run. The split is
over unordered pairs (both directions of a pair are in the same half, so the rule never sees one direction of a
validation pair), fixed before any result was looked at: within each modality the pairs are ordered by the
SHA-256 of their name and alternate development, validation, development, ... (balanced over modalities).

``FRESH`` (added 2026-11-26, after two sessions of development had looked at the validation half's results): the
pairs of the same cached spaces that neither half uses (every other pair of different encoders on BBC and the
Bible verses, and every other Spanish/English pair of different encoders), fixed in a commit before any run of
them. Nothing was ever developed or looked at on them, so they judge the rule as it ships: ``--half fresh``.
Images and words have no unused pair (two spaces per set).

``BANKED`` (added 2026-11-26, after the fresh pairs were run): pairs of a new item set, ``bible-kjv`` (the same verse
read in two English translations, each by another encoder), fixed here and embedded but never run, so that a rule
developed on the three sets above can be judged on pairs nobody has seen: ``--half banked``, once, after the
development is finished.

``BANKED2`` (added 2026-11-26, after ``BANKED`` was judged and while a head rule was being developed on the fresh
pairs): the other four pairings of different encoders across the two translations of ``bible-kjv``, fixed here
before any run of them, to judge that rule once: ``--half banked2``. The rule: class-balanced agreement
(``head_noise.rule_rows``; on the fresh pairs, seed 0, within 0.01 of a head= user's best route for the raw-vector
head 0.35 -> 0.70 at 768 anchors, 0.20 -> 0.15 at 100; the scaled head 0.75 -> 0.75 and 0.30 -> 0.25). Decided
before the run: it replaces plain agreement in the library if, over every (run, head consumer) case of these pairs at
100 and 768 anchors, it is within 0.01 of that best at least as often as the library's pick. Judged (16 runs, seed
0): 12 of 32 cases against the library's 14 (raw-vector head 0/8 -> 4/8 at 768, 4/8 -> 3/8 at 100; scaled head
7/8 -> 3/8 at 768, 3/8 -> 2/8 at 100): **not adopted** (the change is kept on the branch ``balanced-agreement``).
results/bridge/generalisation/noise.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    """Two spaces of ``item_set``; ``modality`` is text, image, words or cross-lingual."""

    item_set: str
    first: str
    second: str
    modality: str

    @property
    def name(self) -> str:
        return f"{self.item_set}:{self.first}|{self.second}"

    def directions(self) -> list[tuple[str, str]]:
        """(source, target) in both orders: the new model's vectors are bridged into the old model's space."""
        return [(self.first, self.second), (self.second, self.first)]


PAIRS: tuple[Pair, ...] = (
    Pair("bbc", "minilm-l6", "paraphrase-minilm-l3", "text"),
    Pair("bbc", "e5-small", "use-m3", "text"),
    Pair("bbc", "minilm-l6", "e5-small", "text"),
    Pair("bible", "minilm-l6", "use-m3", "text"),
    Pair("bible", "paraphrase-minilm-l3", "e5-small", "text"),
    Pair("bible", "minilm-l6", "e5-small", "text"),
    Pair("fashion", "efficientnet-lite0", "efficientnet-lite1", "image"),
    Pair("mnist", "efficientnet-lite0", "efficientnet-lite1", "image"),
    Pair("words-gs", "GloVe", "spaCy", "words"),
    Pair("words-fw", "fastText", "word2vec", "words"),
    Pair("bible", "use-m3@es", "minilm-l6", "cross-lingual"),
    Pair("bible", "e5-small@es", "paraphrase-minilm-l3", "cross-lingual"),
)


#: Never developed on nor looked at before the shipped rule was fixed (see above).
FRESH: tuple[Pair, ...] = (
    Pair("bbc", "minilm-l6", "use-m3", "text"),
    Pair("bbc", "paraphrase-minilm-l3", "e5-small", "text"),
    Pair("bbc", "paraphrase-minilm-l3", "use-m3", "text"),
    Pair("bible", "paraphrase-minilm-l3", "use-m3", "text"),
    Pair("bible", "minilm-l6", "paraphrase-minilm-l3", "text"),
    Pair("bible", "e5-small", "use-m3", "text"),
    Pair("bible", "use-m3@es", "paraphrase-minilm-l3", "cross-lingual"),
    Pair("bible", "use-m3@es", "e5-small", "cross-lingual"),
    Pair("bible", "e5-small@es", "minilm-l6", "cross-lingual"),
    Pair("bible", "e5-small@es", "use-m3", "cross-lingual"),
)


#: Kept unseen for judging the next rule (see above): run once, after development.
BANKED: tuple[Pair, ...] = (
    Pair("bible-kjv", "minilm-l6", "e5-small@kjv", "paraphrase"),
    Pair("bible-kjv", "use-m3", "paraphrase-minilm-l3@kjv", "paraphrase"),
    Pair("bible-kjv", "e5-small", "use-m3@kjv", "paraphrase"),
    Pair("bible-kjv", "paraphrase-minilm-l3", "minilm-l6@kjv", "paraphrase"),
)


#: Kept unseen for judging the head rule developed on the fresh pairs (see above): run once.
BANKED2: tuple[Pair, ...] = (
    Pair("bible-kjv", "minilm-l6", "use-m3@kjv", "paraphrase"),
    Pair("bible-kjv", "e5-small", "paraphrase-minilm-l3@kjv", "paraphrase"),
    Pair("bible-kjv", "use-m3", "minilm-l6@kjv", "paraphrase"),
    Pair("bible-kjv", "paraphrase-minilm-l3", "e5-small@kjv", "paraphrase"),
)


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def split_pairs(pairs: tuple[Pair, ...] = PAIRS) -> dict[str, list[Pair]]:
    """``{"development": [...], "validation": [...], "fresh": FRESH, "banked": BANKED, "banked2": BANKED2}``: the
    first two per modality, by hash order, alternating."""
    halves: dict[str, list[Pair]] = {
        "development": [],
        "validation": [],
        "fresh": list(FRESH),
        "banked": list(BANKED),
        "banked2": list(BANKED2),
    }
    for modality in dict.fromkeys(p.modality for p in pairs):
        ordered = sorted((p for p in pairs if p.modality == modality), key=lambda p: _digest(p.name))
        for i, pair in enumerate(ordered):
            halves["development" if i % 2 == 0 else "validation"].append(pair)
    return halves


def half_of(pair: Pair) -> str:
    return next(half for half, members in split_pairs().items() if pair in members)
