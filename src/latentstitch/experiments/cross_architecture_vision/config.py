"""The encoders, routes, settings and the paper's numbers."""

from __future__ import annotations

from dataclasses import dataclass

ENCODERS = ("efficientnet-lite0", "efficientnet-lite1")
SHORT = {"efficientnet-lite0": "lite0", "efficientnet-lite1": "lite1"}
ROUTES = ("absolute", "relative", "translation (ridge LS)", "translation (Procrustes)")
# CIFAR-100 coarse macro-F1 (x 100) with the vit-base-patch16-224 head: its own encoder, and vit-base-resnet50-384
# as the other encoder (/work/shared/papers/relative-representations.md). The paper has no translation numbers.
PAPER_F1 = {
    ("non-stitched", "absolute"): (93.15, 0.05),
    ("non-stitched", "relative"): (91.94, 0.10),
    ("stitched", "absolute"): (6.21, 0.33),
    ("stitched", "relative"): (81.42, 0.38),
}
RIDGES = tuple(10.0**k for k in range(5))  # candidates, chosen per direction by 5-fold CV on the anchors


@dataclass(frozen=True)
class Config:
    """One run's settings (``FULL`` and ``QUICK`` below)."""

    #: Fashion-MNIST training images (stratified subset of the official split): the heads' training set.
    n_train: int
    #: Fashion-MNIST test images, where every route is scored.
    n_test: int
    #: random training images (seed 42) used as parallel anchors, the same for both encoders.
    anchors: int
    #: seeds of the heads (one absolute and one relative head per encoder and seed).
    seeds: tuple[int, ...]
    #: training epochs of each head.
    epochs: int
    #: ridge candidates of the least-squares translator, chosen per direction by 5-fold CV on the anchors (one
    #: candidate: used as it is, no cross-validation).
    ridges: tuple[float, ...]


FULL = Config(n_train=2000, n_test=1000, anchors=768, seeds=(0, 1, 2, 3, 4), epochs=10, ridges=RIDGES)

# One ridge, no cross-validation (each fit solves a 1280 x 1280 system): the number of anchors, which is the mean
# eigenvalue of the standardised anchors' Gram matrix.
QUICK = Config(n_train=200, n_test=100, anchors=64, seeds=(0, 1), epochs=10, ridges=(64.0,))
