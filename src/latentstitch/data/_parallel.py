"""Parallel English-Spanish text: Bible verses from the Debian SWORD modules, read with ``pysword``.

The World English Bible (``sword-text-web``, module ``engWEB2015eb``) and the Reina-Valera 1909
(``sword-text-sparv``, module ``spaRV1909eb``) are public domain. Verse by verse they give ~31,000 aligned
sentence pairs, and labels that hold in every language: the book, its section (law, history, ...) and testament.
"""

from __future__ import annotations

import functools
import html
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from latentstitch._core.extras import require, require_file
from latentstitch._core.params import check_choice, check_seed
from latentstitch.data._datasets import LabelledSplit, check_fraction, stratified_subset

SWORD_PATH = Path("/usr/share/sword")
BIBLE_MODULES = {"en": "engWEB2015eb", "es": "spaRV1909eb"}
_MODULE_PACKAGES = {"engWEB2015eb": "sword-text-web", "spaRV1909eb": "sword-text-sparv", "KJV": "sword-text-kjv"}

# The 66 books of the Protestant canon in order (OSIS names) and their traditional sections.
_SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("law", ("Gen", "Exod", "Lev", "Num", "Deut")),
    (
        "history",
        ("Josh", "Judg", "Ruth", "1Sam", "2Sam", "1Kgs", "2Kgs", "1Chr", "2Chr", "Ezra", "Neh", "Esth"),
    ),
    ("wisdom", ("Job", "Ps", "Prov", "Eccl", "Song")),
    ("major prophets", ("Isa", "Jer", "Lam", "Ezek", "Dan")),
    (
        "minor prophets",
        ("Hos", "Joel", "Amos", "Obad", "Jonah", "Mic", "Nah", "Hab", "Zeph", "Hag", "Zech", "Mal"),
    ),
    ("gospels and acts", ("Matt", "Mark", "Luke", "John", "Acts")),
    (
        "pauline epistles",
        ("Rom", "1Cor", "2Cor", "Gal", "Eph", "Phil", "Col", "1Thess", "2Thess", "1Tim", "2Tim", "Titus", "Phlm"),
    ),
    ("general epistles and revelation", ("Heb", "Jas", "1Pet", "2Pet", "1John", "2John", "3John", "Jude", "Rev")),
)
BOOKS: tuple[str, ...] = tuple(book for _, books in _SECTIONS for book in books)
SECTIONS: tuple[str, ...] = tuple(name for name, _ in _SECTIONS)
TESTAMENTS = ("old testament", "new testament")
_SECTION_OF = {book: s for s, (_, books) in enumerate(_SECTIONS) for book in books}
LABELS = ("book", "section", "testament")

_NOTE = re.compile(r"<note\b.*?</note>", re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([,.;:!?)\]])")


def clean_osis(raw: str) -> str:
    """Plain text of an OSIS verse: footnotes dropped, markup removed, whitespace normalised.

    A footnote is replaced by a space, not deleted: pysword's own cleaner deletes it and glues the words on either
    side ("only bornSon"). Psalm titles are kept as text, as the Spanish module has them inline.
    """
    text = _TAG.sub("", _NOTE.sub(" ", raw))
    text = _SPACE.sub(" ", html.unescape(text)).strip()
    return _SPACE_BEFORE_PUNCTUATION.sub(r"\1", text)


@dataclass(frozen=True)
class ParallelSplit:
    """Aligned texts in several languages with shared labels, split once into train and test.

    ``train[lang][i]`` and ``train[other][i]`` are translations of each other, with label ``y_train[i]``
    (an int64 index into ``classes``) and reference ``references_train[i]`` (e.g. ``"John 3:16"``).
    """

    name: str
    languages: tuple[str, ...]
    train: dict[str, list[str]]
    y_train: np.ndarray
    test: dict[str, list[str]]
    y_test: np.ndarray
    classes: tuple[str, ...]
    references_train: tuple[str, ...]
    references_test: tuple[str, ...]

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def language(self, language: str) -> LabelledSplit:
        """The texts of one language as a :class:`LabelledSplit` (rows aligned with every other language)."""
        check_choice(language, "language", self.languages)
        return LabelledSplit(
            f"{self.name}-{language}",
            self.train[language],
            self.y_train,
            self.test[language],
            self.y_test,
            self.classes,
        )


def _open_bibles(modules: Mapping[str, str], sword_path: Path):
    pysword_modules = require("pysword.modules", "text", package="pysword")
    confs = {p.name.lower() for p in (sword_path / "mods.d").glob("*.conf")} if sword_path.is_dir() else set()
    for module in modules.values():
        if f"{module.lower()}.conf" not in confs:
            require_file(sword_path / "mods.d" / f"{module}.conf", _MODULE_PACKAGES.get(module, "sword-text-*"))
    library = pysword_modules.SwordModules(str(sword_path))
    library.parse_modules()
    bibles = {}
    for language, module in modules.items():
        bible = library.get_bible_from_module(module)
        if hasattr(bible, "_decompressed_text"):
            # pysword decompresses a whole block (a book) for every verse it returns; remembering the last blocks
            # makes reading a book linear instead of quadratic (2 minutes -> 2 seconds for two Bibles).
            bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
        bibles[language] = bible
    return bibles


def bible_verses(
    modules: Mapping[str, str] | None = None, *, sword_path: str | os.PathLike | None = None
) -> tuple[dict[str, list[str]], list[str], np.ndarray]:
    """Every verse present and non-empty in all the given SWORD Bible modules, aligned by reference.

    Returns ``(texts, references, books)``: ``texts[language]`` lists the cleaned verses, ``references`` names
    them (``"Gen 1:1"``) and ``books`` holds each verse's index into :data:`BOOKS`. Verses are matched by
    (book, chapter, verse) number; where versifications differ in length (the WEB follows NRSVA, the RV1909 KJV:
    3 John 1:15 and Revelation 12:18) the extra verse is dropped. Needs ``latentstitch[text]`` and the Debian
    packages ``sword-text-web`` and ``sword-text-sparv``.
    """
    modules = dict(BIBLE_MODULES if modules is None else modules)
    if len(modules) < 1:
        raise ValueError("modules: expected at least one language -> SWORD module entry")
    bibles = _open_bibles(modules, Path(sword_path) if sword_path is not None else SWORD_PATH)
    structures = {
        language: {b.osis_name: b for books in bible.get_structure().get_books().values() for b in books}
        for language, bible in bibles.items()
    }
    texts: dict[str, list[str]] = {language: [] for language in modules}
    references: list[str] = []
    book_ids: list[int] = []
    for book_id, book in enumerate(BOOKS):
        if not all(book in structure for structure in structures.values()):
            continue
        raw = {language: list(bible.get_iter(books=[book], clean=False)) for language, bible in bibles.items()}
        offsets = {
            language: np.concatenate([[0], np.cumsum(structures[language][book].chapter_lengths)])
            for language in modules
        }
        chapters = min(structures[language][book].num_chapters for language in modules)
        for chapter in range(chapters):
            verses = min(structures[language][book].chapter_lengths[chapter] for language in modules)
            for verse in range(verses):
                cleaned = {
                    language: clean_osis(raw[language][offsets[language][chapter] + verse]) for language in modules
                }
                if all(cleaned.values()):
                    for language, text in cleaned.items():
                        texts[language].append(text)
                    references.append(f"{book} {chapter + 1}:{verse + 1}")
                    book_ids.append(book_id)
    return texts, references, np.asarray(book_ids, dtype=np.int64)


def load_parallel_verses(
    languages: Sequence[str] = ("en", "es"),
    *,
    label: str = "section",
    test_size: float = 0.2,
    n: int | None = None,
    seed: int = 0,
    modules: Mapping[str, str] | None = None,
    sword_path: str | os.PathLike | None = None,
) -> ParallelSplit:
    """English-Spanish parallel Bible verses with a label that holds in both languages, and a seeded split.

    ``label`` is ``"section"`` (8 classes: law, history, wisdom, major prophets, minor prophets, gospels and acts,
    pauline epistles, general epistles and revelation), ``"book"`` (66) or ``"testament"`` (2). ``n`` keeps a
    stratified seeded subset of the ~31,000 verses before the stratified split. ``modules`` maps a language code
    to a SWORD module (default ``{"en": "engWEB2015eb", "es": "spaRV1909eb"}``).
    """
    check_choice(label, "label", LABELS)
    check_fraction(test_size, "test_size")
    check_seed(seed)
    modules = dict(BIBLE_MODULES if modules is None else modules)
    languages = tuple(languages)
    for language in languages:
        if language not in modules:
            raise ValueError(f"languages: no SWORD module known for {language!r}; pass modules={{...}}")
    texts, references, books = bible_verses({lang: modules[lang] for lang in languages}, sword_path=sword_path)
    if label == "book":
        y, classes = books, BOOKS
    elif label == "section":
        y, classes = np.asarray([_SECTION_OF[BOOKS[b]] for b in books], dtype=np.int64), SECTIONS
    else:
        y, classes = (books >= BOOKS.index("Matt")).astype(np.int64), TESTAMENTS
    keep = stratified_subset(y, n, seed)
    train, test = train_test_split(keep, test_size=test_size, random_state=seed, stratify=y[keep])
    return ParallelSplit(
        name=f"bible-{'-'.join(languages)}",
        languages=languages,
        train={lang: [texts[lang][i] for i in train] for lang in languages},
        y_train=y[train],
        test={lang: [texts[lang][i] for i in test] for lang in languages},
        y_test=y[test],
        classes=classes,
        references_train=tuple(references[i] for i in train),
        references_test=tuple(references[i] for i in test),
    )
