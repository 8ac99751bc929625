"""Every setting of a cross-architecture text run: the full run and the quick one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """One run's settings (``FULL`` and ``QUICK`` below)."""

    #: BBC News articles kept (stratified subset of the 2,225), split 75/25 into train and test.
    n: int
    #: each article cut to its first ``max_chars`` characters (title and lead).
    max_chars: int
    #: frozen sentence encoders compared, every ordered pair (``latentstitch.encoders`` names).
    encoders: tuple[str, ...]
    #: random training articles used as parallel anchors (and to fit the translators).
    anchors: int
    #: seeds of the heads (one head per encoder, route and seed).
    seeds: tuple[int, ...]
    #: training epochs of each head.
    epochs: int
    #: ridge of the least-squares translator, on standard-scaled features.
    ridge: float


# The full run: four encoders of different families and widths. The ridge is ~10% of the 300 anchors, on
# standard-scaled features; chosen before any result was seen.
FULL = Config(
    n=1200,
    max_chars=500,
    encoders=("minilm-l6", "paraphrase-minilm-l3", "use-m3", "e5-small"),
    anchors=300,
    seeds=(0, 1, 2),
    epochs=20,
    ridge=30.0,
)

# The quick run keeps an equal-width pair of unrelated families (MiniLM-L3 and e5-small, both 384-d) so that absolute
# stitching is defined, and USE-m3 (512-d) for a pair of different widths.
QUICK = Config(
    n=200,
    max_chars=500,
    encoders=("paraphrase-minilm-l3", "e5-small", "use-m3"),
    anchors=60,
    seeds=(0,),
    epochs=5,
    ridge=30.0,
)
