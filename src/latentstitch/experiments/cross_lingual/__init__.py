"""Cross-lingual zero-shot stitching: a classifier trained on English text reads other languages through relative
representations over parallel anchors (Moschella et al., ICLR 2023, multilingual table: English head, Spanish,
French and Japanese encoders).

Two parallel labelled sets, both from Debian packages:

- Bible verses, English (World English Bible) and Spanish (Reina-Valera 1909), labelled with the section of the
  Bible they come from (8 classes);
- CLDR emoji names and keywords (``latentstitch.data.load_emoji_annotations``) in English, Spanish, French and
  Japanese, labelled with the emoji's category (7 classes): the paper's three target languages.

A head (the relreps text recipe) is trained on English texts through an English encoder; at test time it reads the
other language through another encoder, with that encoder's embeddings of the *parallel* anchors (the translations
of the English anchors). No training on the other language. ``stitching``: the pairings and their scores;
``patterns``: what the paper shows; ``figures``: the bars.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from latentstitch.data import ParallelSplit, load_emoji_annotations, load_parallel_verses
from latentstitch.experiments._report import Report, ResultTable, judge
from latentstitch.experiments._run import chosen
from latentstitch.experiments._text import SHORT_NAMES
from latentstitch.experiments.cross_lingual import patterns
from latentstitch.experiments.cross_lingual.config import FULL, QUICK, Config
from latentstitch.experiments.cross_lingual.figures import plot_results
from latentstitch.experiments.cross_lingual.patterns import LANGUAGE_NAMES, PAPER_EN_EN, PAPER_TARGETS
from latentstitch.experiments.cross_lingual.stitching import Pairing, cell, evaluate, majority_f1

HELP = "English head reads Spanish Bible verses and es/fr/ja emoji names zero-shot, relative vs absolute"
PAPER = (
    "Moschella et al., Relative representations enable zero-shot latent space communication, ICLR 2023 "
    "(cross-lingual stitching, Amazon Reviews)"
)

__all__ = ["FULL", "HELP", "PAPER", "QUICK", "Config", "run"]


def bible_pairings(config: Config) -> list[Pairing]:
    english, other = (config.english, "en"), (config.multilingual, "es")
    pairs = [
        Pairing("non-stitched", english, english),
        Pairing("multilingual: other model reads Spanish", english, other),
    ]
    if config.use_pairings:
        pairs.append(Pairing("multilingual: other model reads Spanish", english, ("use-m3", "es")))
    pairs.append(Pairing("monolingual: same English model reads Spanish", english, (config.english, "es")))
    if config.use_pairings:
        pairs += [
            Pairing("non-stitched", ("use-m3", "en"), ("use-m3", "en")),
            Pairing("one multilingual model, both languages", ("use-m3", "en"), ("use-m3", "es")),
            Pairing("non-stitched (Spanish upper bound)", other, other),
        ]
    return pairs


def cldr_pairings(config: Config) -> list[Pairing]:
    english = (config.english, "en")
    pairs = [Pairing("non-stitched", english, english)]
    pairs += [
        Pairing(f"English head reads {LANGUAGE_NAMES[t]}", english, (config.multilingual, t)) for t in config.targets
    ]
    if config.use_pairings:
        pairs += [
            Pairing(f"one multilingual model (USE) reads {LANGUAGE_NAMES[t]}", ("use-m3", "en"), ("use-m3", t))
            for t in config.targets
        ]
    return pairs


def _table(results: list[dict], title: str, paper_rows: dict[int, tuple], note: str) -> ResultTable:
    rows = []
    for i, result in enumerate(results):
        decoder, encoder = result["decoder"], result["encoder"]
        rows.append(
            [
                result["kind"],
                f"{SHORT_NAMES[decoder[0]]} ({decoder[1]})",
                f"{SHORT_NAMES[encoder[0]]} ({encoder[1]})",
                cell(result, "absolute"),
                cell(result, "relative"),
                *paper_rows.get(i, (None, None)),
            ]
        )
    return ResultTable(
        title,
        ["pairing", "decoder (train)", "encoder (test)", "absolute", "relative", "paper absolute", "paper relative"],
        rows,
        note=note,
        digits=1,
    )


@dataclass(frozen=True)
class Found:
    """Both parallel splits and every pairing's runs on each."""

    bible: ParallelSplit
    bible_results: list[dict]
    cldr: ParallelSplit
    cldr_results: list[dict]

    @property
    def chance(self) -> tuple[float, float]:
        """Macro-F1 x 100 of predicting the majority class: Bible verses, emoji names."""
        return majority_f1(self.bible), majority_f1(self.cldr)


def run(*, quick: bool, out_dir: Path, progress: bool, config: Config | None = None) -> Report:
    """Encode, train the English heads, read every pairing, draw the figures into ``out_dir``; return the report.
    ``config`` (default ``QUICK`` if ``quick`` else ``FULL``) holds every setting; ``quick`` says what to report."""
    started = time.perf_counter()
    config = chosen(quick, config, QUICK, FULL)
    found = read_languages(config, progress=progress)
    bible_chance, cldr_chance = found.chance
    targets = config.targets
    report = Report(
        name="cross-lingual",
        title="Cross-lingual stitching: an English head reads other languages through relative representations",
        paper=PAPER,
        setting=setting(found, config),
        differences=differences(config, quick=quick),
        tables=tables(found, config),
        patterns=judge(
            patterns.patterns(targets),
            patterns.measure(found.bible_results, found.cldr_results, targets),
            quick=quick,
        ),
        figures=draw(found, Path(out_dir)),
        numbers={
            "bible": found.bible_results,
            "cldr": found.cldr_results,
            "bible_majority_macro_f1": bible_chance / 100,
            "cldr_majority_macro_f1": cldr_chance / 100,
            "settings": asdict(config),
        },
        quick=quick,
    )
    report.seconds = time.perf_counter() - started
    return report


def read_languages(config: Config, *, progress: bool) -> Found:
    """Load both parallel splits, train the heads and score every pairing on each."""
    common = {"seeds": list(config.seeds), "epochs": config.epochs, "num_anchors": config.anchors}
    encoders: dict = {}
    bible = load_parallel_verses(("en", "es"), label="section", n=config.bible_n, test_size=0.2, seed=0)
    bible_results = evaluate(bible, bible_pairings(config), encoders=encoders, progress=progress, **common)
    cldr = load_emoji_annotations(("en", *config.targets), n=config.cldr_n, test_size=0.2, seed=0)
    cldr_results = evaluate(cldr, cldr_pairings(config), encoders=encoders, progress=progress, **common)
    return Found(bible, bible_results, cldr, cldr_results)


def tables(found: Found, config: Config) -> list[ResultTable]:
    """Every pairing's macro-F1 on the Bible verses and on the emoji names, beside the paper's."""
    seeds = list(config.seeds)
    bible, cldr = found.bible, found.cldr
    bible_chance, cldr_chance = found.chance
    paper_note = (
        "Paper (Amazon Reviews coarse, RoBERTa per language, Wikipedia anchors, F1): English/English beside the "
        "first row, English decoder with each language's encoder beside the rows of that language."
    )
    cldr_paper = {0: PAPER_EN_EN}
    for i, result in enumerate(found.cldr_results):
        if result["kind"].startswith("English head"):
            cldr_paper[i] = PAPER_TARGETS[result["encoder"][1]]
    return [
        _table(
            found.bible_results,
            f"Bible verses, macro-F1 x 100 on {len(bible.y_test)} test verses, 8 sections: head trained on the "
            "decoder's English embeddings, applied to the encoder's embeddings",
            {0: PAPER_EN_EN, 1: PAPER_TARGETS["es"]},
            f"mean ± std over head seeds {seeds}; absolute is n/a where the widths differ (USE-m3 is 512-d, the "
            f"others 384-d). {paper_note} Predicting the majority class scores macro-F1 {bible_chance:.1f}.",
        ),
        _table(
            found.cldr_results,
            f"CLDR emoji names, macro-F1 x 100 on {len(cldr.y_test)} test emoji, {cldr.num_classes} categories: the "
            "English head reads each language",
            cldr_paper,
            f"mean ± std over head seeds {seeds}. {paper_note} Predicting the majority class scores macro-F1 "
            f"{cldr_chance:.1f}.",
        ),
    ]


def draw(found: Found, out_dir: Path) -> dict[str, Path]:
    """The bars of every pairing on each data set, in ``out_dir``: caption -> path."""
    bible_chance, cldr_chance = found.chance
    return {
        "Bible verses: macro-F1 of every pairing, absolute vs relative": plot_results(
            found.bible_results,
            bible_chance,
            "Bible section classification: English head, zero-shot on Spanish verses",
            out_dir / "cross_lingual.png",
        ),
        "CLDR emoji names: macro-F1 of every pairing, absolute vs relative": plot_results(
            found.cldr_results,
            cldr_chance,
            "Emoji categories: English head, zero-shot on other languages' names",
            out_dir / "cross_lingual_emoji.png",
        ),
    }


def setting(found: Found, config: Config) -> dict[str, str]:
    bible, cldr = found.bible, found.cldr
    return {
        "data (1)": f"{len(bible.y_train) + len(bible.y_test)} parallel Bible verses (World English Bible / "
        f"Reina-Valera 1909, Debian SWORD modules), stratified, {len(bible.y_train)} train / {len(bible.y_test)} "
        "test, label = section (8 classes)",
        "data (2)": f"{len(cldr.y_train) + len(cldr.y_test)} emoji names with keywords (Unicode CLDR "
        f"annotations, Debian unicode-cldr-core) in {', '.join(LANGUAGE_NAMES[x] for x in cldr.languages)}, "
        f"{len(cldr.y_train)} train / {len(cldr.y_test)} test, label = emoji category ({cldr.num_classes} classes)",
        "encoders": (
            f"English: {SHORT_NAMES[config.english]}; other languages: {SHORT_NAMES[config.multilingual]} "
            "(multilingual)" + (", USE-m3 (multilingual)" if config.use_pairings else "")
        ),
        "anchors": f"{config.anchors} random training texts, parallel (each encoder embeds its language's text)",
        "head": (
            "relreps text head (LayerNorm, 2 x [Linear, SiLU, batch-instance-norm], Linear, ReLU) on L2-normalised "
            "cosine similarities to the anchors (relative) or on the embeddings (absolute)"
        ),
        "training": f"Adam 1e-3, batch 32, {config.epochs} epochs, seeds {list(config.seeds)}; test scored in "
        "batches of 256",
    }


def differences(config: Config, *, quick: bool) -> list[str]:
    return [
        "parallel Bible verses labelled by section and emoji names labelled by category instead of Amazon reviews "
        "labelled by sentiment (no multilingual labelled set ships in a registry package); anchors are "
        "in-domain parallel texts, not Wikipedia sentences",
        "small pretrained sentence encoders (an English MiniLM; multilingual e5-small and USE-m3) instead of "
        "monolingual RoBERTa models per language; the other languages are read by multilingual models, which "
        "also understand English, unlike the paper's Spanish, French and Japanese RoBERTa",
        f"{config.anchors} anchors instead of 768; {config.epochs} epochs; {len(config.seeds)} seed(s) instead of "
        "5; macro-F1 (the paper reports weighted F1, on balanced coarse sentiment classes)",
        'emoji names are a few words each ("grinning face: face, grin"), far shorter than reviews',
    ] + (
        [
            f"--quick: {config.bible_n} verses, {config.cldr_n} emoji, French and Japanese only, one seed, "
            "MiniLM-L3 as the English encoder"
        ]
        if quick
        else []
    )
