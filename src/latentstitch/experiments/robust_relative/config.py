"""Every setting of a robust-relative run: the full run and the quick one (a smoke test)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """One run's settings (``FULL`` and ``QUICK`` below)."""

    #: frozen English sentence encoder under the English domain (``latentstitch.encoders`` name).
    english: str
    #: frozen multilingual encoder under every other language's domain.
    multilingual: str
    #: parallel English/Spanish Bible verses kept (stratified; None: no Bible verses at all).
    bible_n: int | None
    #: CLDR emoji names kept (stratified; None: all).
    cldr_n: int | None
    #: languages paired with English on the emoji names (one domain each).
    targets: tuple[str, ...]
    #: seeds of the adapters and heads.
    seeds: tuple[int, ...]
    #: training epochs of each model.
    epochs: int


FULL = Config(
    english="minilm-l6",
    multilingual="e5-small",
    bible_n=3000,
    cldr_n=None,
    targets=("es", "fr", "ja"),
    seeds=(0, 1, 2),
    epochs=10,
)

QUICK = Config(
    english="paraphrase-minilm-l3",
    multilingual="e5-small",
    bible_n=None,
    cldr_n=600,
    targets=("fr",),
    seeds=(0,),
    epochs=5,
)
