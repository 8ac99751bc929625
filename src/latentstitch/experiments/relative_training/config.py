"""Every setting of a relative-training run: the full run and the quick one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """One run's settings (``FULL`` and ``QUICK`` below)."""

    #: seeds of the classifiers (one absolute and one relative per dataset and seed).
    seeds: tuple[int, ...]
    #: training epochs of each classifier.
    epochs: int
    #: stratified training images (seed 0) used as anchors, re-embedded by the current encoder at every step.
    anchors: int
    #: dataset key -> (training images, test images): stratified subsets (None: all of them).
    sizes: dict[str, tuple[int | None, int | None]]


FULL = Config(seeds=(0, 1, 2), epochs=10, anchors=500, sizes={"mnist": (None, None), "fashion-mnist": (6000, 2000)})

QUICK = Config(seeds=(0, 1), epochs=6, anchors=100, sizes={"mnist": (2000, 500), "fashion-mnist": (2000, 500)})
