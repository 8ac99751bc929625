"""Parallel labelled text in many languages: Unicode CLDR's emoji annotations (Debian ``unicode-cldr-core``).

For every emoji, CLDR gives a short name and keywords in each language (``common/annotations/{en,es,fr,ja,...}.xml``:
"grinning face: face, grin"; "cara sonriendo: cara, sonrisa"; "visage rieur: rieur, sourire, visage"), and a
category that holds in every language (``common/properties/labels.txt``: Smileys & People, Animals & Nature, Food &
Drink, Travel & Places, Activities, Objects, Symbols). That is a labelled parallel set in the languages of the
paper's cross-lingual table (English, Spanish, French, Japanese) and more.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from latentstitch._core.extras import require_file
from latentstitch._core.params import check_seed
from latentstitch.data._datasets import check_fraction, stratified_subset
from latentstitch.data._parallel import ParallelSplit

CLDR_PATH = Path("/usr/share/unicode/cldr")
_PACKAGE = "unicode-cldr-core"
_VARIATION_SELECTOR = "\ufe0f"


def _unicode_set(text: str) -> list[str]:
    """The strings of a CLDR UnicodeSet such as ``[☺😀-😆{👨‍⚕️}]``: single characters, ranges ``a-b`` and
    ``{multi-character sequences}``."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ValueError(f"labels.txt: expected a [set], got {text!r}")
    body = body[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char == "{":
            end = body.index("}", i)
            out.append(body[i + 1 : end])
            i = end + 1
        elif i + 2 < len(body) and body[i + 1] == "-":
            out += [chr(c) for c in range(ord(char), ord(body[i + 2]) + 1)]
            i += 3
        else:
            if not char.isspace():
                out.append(char)
            i += 1
    return out


def emoji_categories(cldr_path: str | os.PathLike | None = None) -> dict[str, str]:
    """Emoji (without variation selectors) -> its CLDR category, from ``common/properties/labels.txt``."""
    root = Path(cldr_path) if cldr_path is not None else CLDR_PATH
    path = require_file(root / "common" / "properties" / "labels.txt", _PACKAGE)
    categories: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [p.strip() for p in line.split(";")]
        if len(parts) < 2:
            continue
        for emoji in _unicode_set(parts[0]):
            categories.setdefault(emoji.replace(_VARIATION_SELECTOR, ""), parts[1])
    return categories


def emoji_names(language: str, cldr_path: str | os.PathLike | None = None) -> dict[str, str]:
    """Emoji -> "name: keyword, keyword" in ``language`` (its CLDR annotation file), for emoji with both."""
    root = Path(cldr_path) if cldr_path is not None else CLDR_PATH
    path = require_file(root / "common" / "annotations" / f"{language}.xml", _PACKAGE)
    names: dict[str, str] = {}
    keywords: dict[str, list[str]] = {}
    for node in ElementTree.parse(path).getroot().iter("annotation"):
        emoji = node.get("cp", "").replace(_VARIATION_SELECTOR, "")
        text = (node.text or "").strip()
        if not emoji or not text or text == "↑↑↑":  # "↑↑↑": inherited from the parent locale, no text of its own
            continue
        if node.get("type") == "tts":
            names[emoji] = text
        else:
            keywords[emoji] = [k.strip() for k in text.split("|") if k.strip()]
    out = {}
    for emoji, name in names.items():
        extra = [k for k in keywords.get(emoji, []) if k != name]
        out[emoji] = f"{name}: {', '.join(extra)}" if extra else name
    return out


def load_emoji_annotations(
    languages: Sequence[str] = ("en", "es", "fr", "ja"),
    *,
    test_size: float = 0.2,
    n: int | None = None,
    seed: int = 0,
    min_per_class: int = 20,
    cldr_path: str | os.PathLike | None = None,
) -> ParallelSplit:
    """Emoji names and keywords in several languages, labelled by emoji category, with a stratified seeded split.

    Keeps the emoji that have a category and a name in every language, in the categories with at least
    ``min_per_class`` of them (for en/es/fr/ja: 1,329 emoji in 7 categories; "Flags" has 8 and is dropped). ``n``
    keeps a stratified seeded subset first. Needs the Debian package ``unicode-cldr-core``.
    """
    check_fraction(test_size, "test_size")
    check_seed(seed)
    languages = tuple(languages)
    if not languages:
        raise ValueError("languages: expected at least one CLDR language code, e.g. ('en', 'es')")
    categories = emoji_categories(cldr_path)
    names = {language: emoji_names(language, cldr_path) for language in languages}
    emoji = sorted(e for e in categories if all(e in names[language] for language in languages))
    counts: dict[str, int] = {}
    for e in emoji:
        counts[categories[e]] = counts.get(categories[e], 0) + 1
    emoji = [e for e in emoji if counts[categories[e]] >= min_per_class]
    classes = tuple(sorted({categories[e] for e in emoji}))
    y = np.asarray([classes.index(categories[e]) for e in emoji], dtype=np.int64)
    keep = stratified_subset(y, n, seed)
    train, test = train_test_split(keep, test_size=test_size, random_state=seed, stratify=y[keep])
    return ParallelSplit(
        name=f"cldr-emoji-{'-'.join(languages)}",
        languages=languages,
        train={lang: [names[lang][emoji[i]] for i in train] for lang in languages},
        y_train=y[train],
        test={lang: [names[lang][emoji[i]] for i in test] for lang in languages},
        y_test=y[test],
        classes=classes,
        references_train=tuple(emoji[i] for i in train),
        references_test=tuple(emoji[i] for i in test),
    )
