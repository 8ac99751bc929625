"""Every setting of a cross-lingual run: the full run and the quick one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """One run's settings (``FULL`` and ``QUICK`` below)."""

    #: English sentence encoder, whose head is trained (``latentstitch.encoders`` name).
    english: str
    #: multilingual encoder that reads the other languages.
    multilingual: str
    #: parallel English/Spanish Bible verses kept (stratified; None: all).
    bible_n: int | None
    #: CLDR emoji names kept (stratified; None: all).
    cldr_n: int | None
    #: languages the English head reads zero-shot on the emoji names (besides English).
    targets: tuple[str, ...]
    #: seeds of the heads.
    seeds: tuple[int, ...]
    #: training epochs of each head.
    epochs: int
    #: random parallel training texts used as anchors.
    anchors: int
    #: also the pairings through USE-m3 (one multilingual model for both languages, Spanish upper bound).
    use_pairings: bool


FULL = Config(
    english="minilm-l6",
    multilingual="e5-small",
    bible_n=3000,
    cldr_n=None,
    targets=("es", "fr", "ja"),
    seeds=(0, 1, 2),
    epochs=20,
    anchors=300,
    use_pairings=True,
)

QUICK = Config(
    english="paraphrase-minilm-l3",
    multilingual="e5-small",
    bible_n=300,
    cldr_n=400,
    targets=("fr", "ja"),
    seeds=(0,),
    epochs=5,
    anchors=60,
    use_pairings=False,
)
