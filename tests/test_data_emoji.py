"""CLDR emoji annotations as a parallel labelled set: the UnicodeSet syntax, the files' format (a small fixture in
the true layout), and the real Debian package."""

from pathlib import Path

import numpy as np
import pytest

from latentstitch.data import load_emoji_annotations
from latentstitch.data._emoji import CLDR_PATH, _unicode_set, emoji_categories, emoji_names

_LABELS = """# comment line
[😀-😂]                ;	Smileys & People	;	face-positive
[{👨‍⚕️}🐶]            ;	Animals & Nature	;	mixed
[🐱🍎]                 ;	Animals & Nature	;	cat   # trailing comment
[🍏]                   ;	Food & Drink	;	fruit
"""


def _annotations(language: str, names: dict[str, str], keywords: dict[str, str]) -> str:
    lines = [f'<annotation cp="{e}">{k}</annotation>' for e, k in keywords.items()]
    lines += [f'<annotation cp="{e}" type="tts">{n}</annotation>' for e, n in names.items()]
    return (
        '<?xml version="1.0" encoding="UTF-8" ?><ldml><identity><language type="'
        + language
        + '"/></identity><annotations>'
        + "".join(lines)
        + "</annotations></ldml>"
    )


@pytest.fixture
def cldr(tmp_path) -> Path:
    (tmp_path / "common" / "properties").mkdir(parents=True)
    (tmp_path / "common" / "annotations").mkdir()
    (tmp_path / "common" / "properties" / "labels.txt").write_text(_LABELS, encoding="utf-8")
    emoji = ["😀", "😁", "😂", "🐶", "🐱", "🍎", "🍏"]
    english = {e: f"name {i}" for i, e in enumerate(emoji)}
    french = {e: f"nom {i}" for i, e in enumerate(emoji[:-1])}  # no French name for the last one
    for language, names in (("en", english), ("fr", french)):
        keywords = {e: f"{names[e]} | kw{i} | kw{i}b" for i, e in enumerate(names)}
        keywords["😀"] = names["😀"]  # only the name as a keyword
        (tmp_path / "common" / "annotations" / f"{language}.xml").write_text(
            _annotations(language, names, keywords), encoding="utf-8"
        )
    return tmp_path


def test_unicode_sets_expand_ranges_and_sequences():
    assert _unicode_set("[a-c x{ab}]") == ["a", "b", "c", "x", "ab"]
    assert _unicode_set("[😀-😂]") == ["😀", "😁", "😂"]
    with pytest.raises(ValueError, match="expected a \\[set\\]"):
        _unicode_set("a-c")


def test_categories_and_names_are_read_from_the_files(cldr):
    categories = emoji_categories(cldr)
    assert categories["😁"] == "Smileys & People" and categories["🍎"] == "Animals & Nature"
    assert categories["👨‍⚕"] == "Animals & Nature"  # sequences kept, variation selector dropped
    names = emoji_names("en", cldr)
    assert names["😁"] == "name 1: kw1, kw1b" and names["😀"] == "name 0"  # the name is not repeated as a keyword


def test_the_split_is_parallel_stratified_and_drops_small_classes(cldr):
    split = load_emoji_annotations(("en", "fr"), test_size=0.5, min_per_class=2, cldr_path=cldr)
    # 🍏 has no French name, so Food & Drink is empty; the sequence has no name: 6 emoji in 2 classes remain
    assert split.classes == ("Animals & Nature", "Smileys & People")
    assert len(split.y_train) + len(split.y_test) == 6
    for part, refs in ((split.train, split.references_train), (split.test, split.references_test)):
        for en, fr, emoji in zip(part["en"], part["fr"], refs, strict=True):
            assert en.split(":")[0].replace("name", "nom") == fr.split(":")[0], emoji
    with pytest.raises(FileNotFoundError, match="unicode-cldr-core"):
        load_emoji_annotations(("en", "xx"), cldr_path=cldr)


@pytest.mark.integration
def test_the_debian_package_gives_the_papers_languages():
    if not (CLDR_PATH / "common" / "properties" / "labels.txt").exists():
        pytest.skip("Debian unicode-cldr-core is not installed (scripts/install-system-data.sh installs it)")
    split = load_emoji_annotations(("en", "es", "fr", "ja"))
    assert len(split.y_train) + len(split.y_test) > 1000 and split.num_classes == 7
    assert np.bincount(split.y_train).min() >= 16  # every category in the training part
    index = split.references_train.index("🐌")
    assert split.train["en"][index].startswith("snail") and split.train["fr"][index].startswith("escargot")
