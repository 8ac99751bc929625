"""Every setting of a latent-similarity-proxy-graph run: the full run and the quick one."""

from __future__ import annotations

from dataclasses import dataclass

#: Optimiser settings of the grid: every run trains in 10 full-batch steps (see ``grid``'s docstring for why the
#: second optimiser is RMSprop).
OPTIMIZERS = {"adam": {"lr": 0.01}, "rmsprop": {"lr": 0.01}}


@dataclass(frozen=True)
class Config:
    """One run's settings (``FULL`` and ``QUICK`` below)."""

    #: the grid of GCN runs: axis -> values (every combination is one run, in this order; ``optimizer`` names
    #: ``OPTIMIZERS``).
    grid: dict[str, tuple]
    #: node-classification comparison (relative vs absolute 2-layer GCN): its seeds.
    nc_seeds: tuple[int, ...]
    #: node-classification comparison: full-batch training epochs.
    nc_epochs: int
    #: random training nodes (seed 0) used as anchors.
    anchors: int = 300


FULL = Config(
    grid={
        "seed": (0, 1),
        "epochs": (10, 30, 50),
        "layers": (1, 2),
        "hidden": (32, 128),
        "dropout": (0.1, 0.5),
        "optimizer": tuple(OPTIMIZERS),
    },
    nc_seeds=(0, 1, 2, 3, 4),
    nc_epochs=200,
)

QUICK = Config(
    grid={
        "seed": (0, 1),
        "epochs": (10, 30),
        "layers": (2,),
        "hidden": (32,),
        "dropout": (0.5,),
        "optimizer": tuple(OPTIMIZERS),
    },
    nc_seeds=(0, 1),
    nc_epochs=100,
)
