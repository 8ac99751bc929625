"""Every setting of a latent-similarity-proxy-graph run: the full run and the quick one."""

from __future__ import annotations

from dataclasses import dataclass

#: The grid's optimisers (the paper's: Adam and plain SGD, each at the grid's learning rates ``lr``).
OPTIMIZERS = ("adam", "sgd")
#: Node features: "binary" bag-of-words indicators as the graph has them, or "row-sum" (each row divided by its sum,
#: PyG's NormalizeFeatures, the paper's Cora setting).
FEATURES = ("binary", "row-sum")


@dataclass(frozen=True)
class Config:
    """One run's settings (``FULL`` and ``QUICK`` below)."""

    #: the grid of GCN runs: axis -> values (every combination is one run, in this order; ``optimizer`` names
    #: ``OPTIMIZERS``, ``lr`` is its learning rate).
    grid: dict[str, tuple]
    #: node-classification comparison (relative vs absolute 2-layer GCN): its seeds.
    nc_seeds: tuple[int, ...]
    #: node-classification comparison: full-batch training epochs.
    nc_epochs: int
    #: random training nodes (seed 0) used as anchors.
    anchors: int = 300
    #: node features (``FEATURES``): binary, because on row-sum features (a BBC article has ~80 of the 1,500 words,
    #: so its entries are ~0.012) plain SGD at the paper's learning rates does not leave chance in 50 full-batch
    #: steps, while on the binary ones every SGD run trains (see ``grid``).
    features: str = "binary"
    #: resamples of the percentile-bootstrap interval over runs of the mean per-run correlation.
    bootstrap: int = 2000


FULL = Config(
    grid={
        "seed": (0, 1, 2),
        "epochs": (10, 30, 50),
        "layers": (1, 2),
        "dropout": (0.1, 0.5),
        "optimizer": OPTIMIZERS,
        "lr": (0.01, 0.02),
        "hidden": (64,),
    },
    nc_seeds=(0, 1, 2, 3, 4),
    nc_epochs=200,
)

QUICK = Config(
    grid={
        "seed": (0, 1),
        "epochs": (10, 30),
        "layers": (2,),
        "dropout": (0.5,),
        "optimizer": OPTIMIZERS,
        "lr": (0.01,),
        "hidden": (32,),
    },
    nc_seeds=(0, 1),
    nc_epochs=100,
)
