"""The retrieval sets of the migration benchmark, embedded once by each encoder and cached under
``~/.cache/latentstitch/migration/`` (``.npy``, float32).

- **bbc**: BBC News (2,225 articles): an article's first sentence is the query, the next 600 characters of it the
  document.
- **bible**: 2,000 Bible verses spread over the whole Bible: the English (WEB) verse is the query, the Spanish
  (RV1909) verse the document (cross-lingual retrieval, multilingual encoders).
- **kjv**: 10,000 Bible verses spread over the whole Bible: the World English Bible verse is the document, the same
  verse in the King James Version the query (a real paraphrase: the same content in other, older words). Needs the
  Debian package ``sword-text-kjv`` beside ``sword-text-web``.

Run as ``nice -n 10 python -m benchmarks._migration_data`` to fill the cache ahead of the benchmark."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

CACHE = Path.home() / ".cache" / "latentstitch" / "migration"
#: set -> encoders that embed it (old / new pairs are drawn from these).
ENCODERS = {
    "bbc": ("paraphrase-minilm-l3", "minilm-l6"),
    "bible": ("use-m3", "e5-small"),
    "kjv": ("paraphrase-minilm-l3", "minilm-l6", "use-m3"),
}
#: set -> the (old, new) encoder pairs the migration benchmark runs, each in both directions.
PAIRS = {
    "bbc": [("paraphrase-minilm-l3", "minilm-l6"), ("minilm-l6", "paraphrase-minilm-l3")],
    "bible": [("use-m3", "e5-small"), ("e5-small", "use-m3")],
    "kjv": [
        ("paraphrase-minilm-l3", "minilm-l6"),
        ("minilm-l6", "paraphrase-minilm-l3"),
        ("minilm-l6", "use-m3"),
        ("use-m3", "minilm-l6"),
    ],
}
BIBLE_VERSES = 2000
KJV_VERSES = 10_000
DOCUMENT_CHARS = 600


def texts(name: str) -> tuple[list[str], list[str]]:
    """(queries, documents), row i of each the same item."""
    if name == "bbc":
        from latentstitch.data import bbc_news_documents

        queries, documents = [], []
        for article in bbc_news_documents()[0]:
            lines = [line.strip() for line in article.splitlines() if line.strip()]
            body = " ".join(lines[1:])  # the first line is the headline
            parts = re.split(r"(?<=[.!?])\s+", body, maxsplit=1)
            queries.append(parts[0])
            # the document's lead (its first 600 characters): the encoders read at most 128-256 tokens anyway,
            # and the machine embedding it is shared
            documents.append((parts[1] if len(parts) > 1 else parts[0])[:DOCUMENT_CHARS])
        return queries, documents
    from latentstitch.data import bible_verses

    if name == "kjv":
        verses = bible_verses({"web": "engWEB2015eb", "kjv": "engKJV2006eb"})[0]
        rows = np.linspace(0, len(verses["web"]) - 1, KJV_VERSES).round().astype(int)
        return [verses["kjv"][i] for i in rows], [verses["web"][i] for i in rows]
    verses = bible_verses()[0]
    step = len(verses["en"]) // BIBLE_VERSES
    rows = range(0, step * BIBLE_VERSES, step)
    return [verses["en"][i] for i in rows], [verses["es"][i] for i in rows]


def embedded(name: str, encoder: str) -> tuple[np.ndarray, np.ndarray]:
    """(queries, documents) embedded by ``encoder``, from the cache when there."""
    paths = [CACHE / f"{name}-{encoder}-{part}.npy" for part in ("queries", "documents")]
    if all(p.exists() for p in paths):
        return np.load(paths[0]), np.load(paths[1])
    from latentstitch._core.atomic import atomic_path
    from latentstitch.encoders import get_encoder

    CACHE.mkdir(parents=True, exist_ok=True)
    model = get_encoder(encoder)
    out = []
    for path, part in zip(paths, texts(name), strict=True):
        vectors = np.asarray(model.encode(part, progress=False), dtype=np.float32)
        with atomic_path(path) as temporary:
            np.save(temporary, vectors)
        out.append(vectors)
        print(f"embedded {name} {path.stem}: {vectors.shape}", flush=True)
    return out[0], out[1]


def recall10(queries, index, relevant, metric="cosine") -> float:
    """Mean Recall@10 of ``queries`` over ``index`` (``relevant[i]``: the row of query i's document)."""
    from latentstitch.migrate import per_query, ranks, search

    return float(per_query(ranks(search(queries, index, 10, metric), relevant))["recall@10"].mean())


if __name__ == "__main__":
    # python -m benchmarks._migration_data [SET[:ENCODER,...]] ...
    for argument in sys.argv[1:] or list(ENCODERS):
        set_name, _, chosen = argument.partition(":")
        for encoder_name in chosen.split(",") if chosen else ENCODERS[set_name]:
            embedded(set_name, encoder_name)
