"""The fresh pairs of the few-pairs benchmark (issue 39): labelled core items embedded by both encoders, and two
unpaired pools, each embedded by one encoder only.

Fixed in a commit before any run of them (2026-11-28), on item sets this project has never run a bridge on:

- ``bible-books``: World English Bible verses (Debian SWORD ``engWEB2015eb``) that are in neither the ``bible`` nor
  the ``bible-kjv`` set of the generalisation benchmark (those 2 x 1,600 verses are excluded by reference). The
  labelled core: 200 verses from each of ten books (Genesis, Exodus, Psalms, Proverbs, Isaiah, Jeremiah, Ezekiel,
  Matthew, Acts, Romans; labelled by **book**, a task never run here), 150 train / 50 test per book. Encoders:
  all-MiniLM-L6-v2 (``minilm-l6``) and paraphrase-MiniLM-L3-v2 (``paraphrase-minilm-l3``), both 384-d.
- ``fashion-pool``: Fashion-MNIST (Debian ``dataset-fashion-mnist``) images that the generalisation benchmark's
  ``fashion`` set (a seed-0 stratified 1,200 of the official train split and 400 of its test split) does not hold.
  The labelled core: a stratified 2,000 of the official **test** split's other images (1,500 train / 500 test,
  10 classes). Encoders: EfficientNet-lite0 and EfficientNet-lite1 (1280-d).

Pools (both sets): the items outside the core (and outside the old sets; for ``fashion-pool`` the official train
split's other images) in one seeded random order; the first encoder's pool is the first ``POOL`` of them, the second
encoder's the next ``POOL``: the two pools share no item, so they are not paired. For the direction ``a -> b``
(``a`` the new model, the source): ``source_pool`` = ``a``'s pool, ``target_pool`` = ``b``'s pool (the old model's
index); a pool of ``n`` rows is the first ``n`` rows. The anchors are drawn from the core's train items
(``runs.anchor_rows`` with the seeds ``0, 1, 2, ...``), the consumers are scored on the core's test items.

The raw-vector head rule of issue 39 (the candidate "with ``consumer="raw_head"``, pick the Procrustes route instead of
what the label-free rule picks"), judged ONCE on the labelled cores of these two sets, criterion fixed here before
the run: every direction of both pairs (4), anchors 100 and 768, seeds 0, 1, 2 (24 cases), paired only (no pools).
Per case: the best route = the highest raw-vector-head macro-F1 (``lr_raw_f1``) among every route of the
``Bridge(routes="all")`` fit refitted on all the anchors (``library.route_figures``); the library's pick =
``Bridge(consumer="raw_head")`` with its default routes; the candidate = the ``procrustes`` route (with the parameters
the library chose for it in the "all" fit). **Adopted** if the candidate is within 0.01 of the best route's
``lr_raw_f1`` in strictly more cases than the library's pick AND its mean ``lr_raw_f1`` over the 24 cases is not
below the library's pick's by more than 0.01; otherwise not adopted.

Embeddings are cached under ``~/.cache/latentstitch/few_pairs/`` (one safetensors file per set, built in chunks
through the encoders' own caches so that an interrupted build resumes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks._pairs.pairs import Pair

#: The fresh pairs (fixed before any run; see above).
FEW_PAIRS: tuple[Pair, ...] = (
    Pair("bible-books", "minilm-l6", "paraphrase-minilm-l3", "text"),
    Pair("fashion-pool", "efficientnet-lite0", "efficientnet-lite1", "image"),
)
SETS = tuple(p.item_set for p in FEW_PAIRS)
POOL = 10_000
#: The seeds of the sets' draws (core items, split, pool order): fixed here, never varied.
DRAW_SEED = 39
BOOKS = ("Gen", "Exod", "Ps", "Prov", "Isa", "Jer", "Ezek", "Matt", "Acts", "Rom")
PER_BOOK, TEST_PER_BOOK = 200, 50
CORE_IMAGES, TEST_IMAGES = 2000, 500
CHUNK = 1000


@dataclass
class PoolSet:
    """``core[space]`` (N, d) row-aligned over the labelled core; ``train`` / ``test`` rows of it; ``labels`` (N,);
    ``pool[space]`` (POOL, d): that encoder's own unpaired pool (the two spaces' pools hold different items)."""

    name: str
    core: dict[str, np.ndarray]
    pool: dict[str, np.ndarray]
    train: np.ndarray
    test: np.ndarray
    labels: np.ndarray
    source: str


def cache_dir() -> Path:
    from latentstitch.encoders import default_cache_dir

    return default_cache_dir() / "few_pairs"


def _core_split(labels: np.ndarray, n_test_per_class: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per class, ``n_test_per_class`` rows to the test side (seeded), the rest to train; rows in increasing order."""
    test = np.concatenate(
        [rng.choice(np.flatnonzero(labels == c), n_test_per_class, replace=False) for c in np.unique(labels)]
    )
    train = np.setdiff1d(np.arange(len(labels)), test)
    return train, np.sort(test)


def bible_books_items() -> dict:
    """The verses of ``bible-books``: core texts in train-then-test order, labels, and the two pools' texts."""
    from latentstitch.data import BOOKS as ALL_BOOKS
    from latentstitch.data import bible_verses, load_parallel_verses

    used: set[str] = set()
    for languages, modules in ((("en", "es"), None), (("en", "kjv"), {"en": "engWEB2015eb", "kjv": "engKJV2006eb"})):
        old = load_parallel_verses(languages, label="section", n=1600, test_size=0.25, seed=0, modules=modules)
        used.update(old.references_train, old.references_test)
    texts, references, books = bible_verses({"en": "engWEB2015eb"})
    verses = texts["en"]
    free = np.asarray([r not in used and len(verses[i].strip()) > 0 for i, r in enumerate(references)])
    rng = np.random.default_rng(DRAW_SEED)
    core = []
    for book in BOOKS:
        rows = np.flatnonzero(free & (books == ALL_BOOKS.index(book)))
        core.append(np.sort(rng.choice(rows, PER_BOOK, replace=False)))
    core_rows = np.concatenate(core)
    labels = np.repeat(np.arange(len(BOOKS)), PER_BOOK)
    train, test = _core_split(labels, TEST_PER_BOOK, rng)
    order = np.concatenate([train, test])
    rest = np.setdiff1d(np.flatnonzero(free), core_rows)
    rest = rng.permutation(rest)
    if len(rest) < 2 * POOL:
        raise RuntimeError(f"bible-books: only {len(rest)} free verses for two pools of {POOL}")
    return {
        "core": [verses[i] for i in core_rows[order]],
        "labels": labels[order],
        "n_train": len(train),
        "pools": ([verses[i] for i in rest[:POOL]], [verses[i] for i in rest[POOL : 2 * POOL]]),
        "source": "World English Bible verses outside the generalisation sets (Debian SWORD), 2,000 core verses of "
        "10 books labelled by book (1,500 train / 500 test), two disjoint pools of 10,000 other verses",
    }


def fashion_pool_items() -> dict:
    """The images of ``fashion-pool``: core images (train then test order), labels, and the two pools' images."""
    from latentstitch.data import FASHION_MNIST_DIR, images_to_float, read_idx, stratified_subset

    files = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
    x_train, y_train, x_test, y_test = (read_idx(FASHION_MNIST_DIR / f"{f}.gz") for f in files)
    old_train = stratified_subset(y_train, 1200, 0, "n_train")  # the generalisation benchmark's ``fashion`` set
    old_test = stratified_subset(y_test, 400, 0, "n_test")
    rng = np.random.default_rng(DRAW_SEED)
    free_test = np.setdiff1d(np.arange(len(y_test)), old_test)
    per_class = CORE_IMAGES // 10
    core_rows = np.concatenate(
        [np.sort(rng.choice(free_test[y_test[free_test] == c], per_class, replace=False)) for c in range(10)]
    )
    labels = y_test[core_rows].astype(np.int64)
    train, test = _core_split(labels, TEST_IMAGES // 10, rng)
    order = np.concatenate([train, test])
    rest = rng.permutation(np.setdiff1d(np.arange(len(y_train)), old_train))
    return {
        "core": images_to_float(x_test[core_rows[order]]),
        "labels": labels[order],
        "n_train": len(train),
        "pools": (images_to_float(x_train[rest[:POOL]]), images_to_float(x_train[rest[POOL : 2 * POOL]])),
        "source": "Fashion-MNIST (Debian) outside the generalisation set: 2,000 core images of the official test "
        "split (1,500 train / 500 test), two disjoint pools of 10,000 official-train images",
    }


def _encode(encoder: str, items, progress: bool, encoders: dict) -> np.ndarray:
    """``items`` (texts or images) through ``encoder`` in chunks, each cached by the encoder's own cache."""
    import torch

    from latentstitch.encoders import get_encoder
    from latentstitch.experiments.tasks import embed

    parts = []
    for start in range(0, len(items), CHUNK):
        chunk = items[start : start + CHUNK]
        if progress:
            print(f"  {encoder}: rows {start}-{start + len(chunk)} of {len(items)}", flush=True)
        if isinstance(items, np.ndarray):  # images: the encoder's own cache, two threads as ``embed``
            model = encoders.setdefault(encoder, get_encoder(encoder))
            threads = torch.get_num_threads()
            torch.set_num_threads(max(threads, 2))
            try:
                vectors = model.encode(chunk, cache=True, progress=False)
            finally:
                torch.set_num_threads(threads)
        else:
            vectors = embed(encoder, chunk, progress=False, encoders=encoders)
        parts.append(np.asarray(vectors, dtype=np.float32))
    return np.concatenate(parts)


def load_pool_set(name: str, *, pool: int = POOL, progress: bool = True) -> PoolSet:
    """The set ``name`` (one of ``SETS``) with pools of the first ``pool`` rows, from the cache or embedded (and
    cached). The embedding order is the cores, then the two pools chunk by chunk, so a cut-short build keeps the
    chunks it made (the encoders' caches) for the next call."""
    from safetensors.numpy import load_file, save_file

    from latentstitch._core.atomic import atomic_path

    if name not in SETS:
        raise ValueError(f"name: expected one of {', '.join(SETS)}, got {name!r}")
    if not 0 < pool <= POOL:
        raise ValueError(f"pool: expected an integer in [1, {POOL}], got {pool!r}")
    pair = next(p for p in FEW_PAIRS if p.item_set == name)
    path = cache_dir() / f"{name}-{pool}.safetensors"
    if not path.exists():
        items = bible_books_items() if name == "bible-books" else fashion_pool_items()
        data, encoders = {}, {}
        for encoder in (pair.first, pair.second):
            data[f"core:{encoder}"] = _encode(encoder, items["core"], progress, encoders)
        parts: dict[str, list] = {pair.first: [], pair.second: []}
        for start in range(0, pool, CHUNK):
            for encoder, rows in zip((pair.first, pair.second), items["pools"], strict=True):
                chunk = rows[start : min(start + CHUNK, pool)]
                if progress:
                    print(f"  {name} pool of {encoder}: rows {start}-{start + len(chunk)} of {pool}", flush=True)
                parts[encoder].append(_encode(encoder, chunk, False, encoders))
        for encoder, chunks in parts.items():
            data[f"pool:{encoder}"] = np.concatenate(chunks)
        data["labels"] = np.asarray(items["labels"], dtype=np.int64)
        data["n_train"] = np.asarray([int(items["n_train"])], dtype=np.int64)
        data["source"] = np.frombuffer(items["source"].encode(), dtype=np.uint8).copy()
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            save_file({k: np.ascontiguousarray(v) for k, v in data.items()}, str(tmp))
    data = load_file(str(path))
    core = {k[len("core:") :]: v for k, v in data.items() if k.startswith("core:")}
    pools = {k[len("pool:") :]: v for k, v in data.items() if k.startswith("pool:")}
    n_train, labels = int(data["n_train"][0]), data["labels"]
    if set(core) != {pair.first, pair.second} or any(len(v) != len(labels) for v in core.values()):
        raise ValueError(f"{path}: expected core vectors of {pair.first} and {pair.second}, one row per label")
    if set(pools) != set(core) or any(len(v) != pool for v in pools.values()):
        raise ValueError(f"{path}: expected pools of {pool} rows for {pair.first} and {pair.second}")
    return PoolSet(
        name, core, pools, np.arange(n_train), np.arange(n_train, len(labels)), labels, bytes(data["source"]).decode()
    )


if __name__ == "__main__":  # python -m benchmarks._pairs.few_pairs_data [NAME [POOL]]: fill the cache
    import sys

    size = int(sys.argv[2]) if len(sys.argv) > 2 else POOL
    for set_name in sys.argv[1:2] or SETS:
        s = load_pool_set(set_name, pool=size)
        print(set_name, {k: v.shape for k, v in {**s.core, **s.pool}.items()}, flush=True)
