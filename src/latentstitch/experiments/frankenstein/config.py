"""Every setting of a Frankenstein run, fixed before looking at results: the full run and the quick miniature."""

from __future__ import annotations

from dataclasses import dataclass

from latentstitch.models import TINY10_CHANNELS, scaled_channels

TINY10_LAYERS = tuple(f"bn{i}" for i in range(1, 9))


@dataclass(frozen=True)
class Config:
    """One run's settings (``FULL`` and ``QUICK`` below). Its fields are the checkpoint's settings (a resumed run
    must have the same), so a new field makes earlier checkpoints unusable."""

    n_train: int  # base networks' training images (stratified subset of the official 60k)
    n_test: int  # evaluation images (stratified subset of the official 10k test split)
    n_stitch: int  # images the stitching layers are trained on (the first of the training subset)
    n_direct: int  # images direct matching is fitted on (all spatial positions of each)
    width: float  # Tiny-10 width multiplier of the main pair (1.0 = the paper's 16..64 channels)
    widths: tuple[float, ...]  # Experiment 2: widths compared (x1, x2, x4...)
    seeds: tuple[int, int]  # the two base networks
    base_epochs: int  # training epochs of the base networks (Adam 1e-3)
    base_batch: int  # batch size of the base networks' training
    layers: tuple[str, ...]  # Figure 2: the layers stitched (after each batch norm, bn1..bn8)
    stitch_epochs: int  # task-loss epochs of Figures 4-5 and Experiments 5-6 at long_layers (the paper: 30 of 50k)
    sweep_epochs: int  # task-loss epochs of the many layers of Figures 2, 3, 7 and 8, and of the other init layers
    stitch_batch: int  # batch size of every task-loss training of a stitching layer
    track_every: int  # Adam steps between two points of a traced training (Figures 4 and 5)
    trace_layer: str  # Figure 4 (the paper: Tiny-10 layer 3)
    cka_layer: str  # Figure 5
    cka_penalty: float  # Figure 5: weight of the CKA penalty per batch (fixed before the run: the pattern's)
    cka_penalty_sweep: tuple[float, ...]  # Experiment 4 also at these weights, reported as a sweep (not a tuned point)
    rank_layers: tuple[str, ...]  # Figure 7: layers of the low-rank matching
    ranks: tuple[int, ...]  # Figure 7: ranks compared (SVD of the least-squares matrix vs a trained bottleneck)
    sparsity_layer: str  # Figure 8
    l1: tuple[float, ...]  # Figure 8: L1 strengths of the task-loss matching
    alphas: tuple[float, ...]  # Figure 8: Lasso alphas of direct matching
    init_layers: tuple[str, ...]  # Experiments 5 and 6
    long_layers: tuple[str, ...]  # init layers trained with stitch_epochs (the others with sweep_epochs)
    init_runs: int  # Experiment 5: runs per layer and init (random, least squares); Figure 4 traces them
    mode_threshold: float  # Experiment 6 keeps transformations above this relative accuracy (the paper: 0.8)
    lambdas: tuple[float, ...]  # Experiment 6: interpolation weights between two random-init matrices
    width_layers: tuple[str, ...]  # Experiment 2: layers stitched at every width

    def steps(self, epochs: int) -> int:
        """Adam steps of a task-loss training of ``epochs`` epochs (incomplete last batch dropped)."""
        return epochs * (self.n_stitch // self.stitch_batch)


# The paper trains each stitching layer for 30 epochs of CIFAR-10's 50,000 training images at batch 128: ~11,700
# Adam steps. The full run gives that budget to every stitched layer (Figures 2-8, Experiments 2, 5, 6): about 11
# hours of one core, so it is meant to be run with --resume over several sessions (or --device cuda). Figure 5's CKA
# penalty is also swept over a few weights (the paper does not state its own).
FULL = Config(
    n_train=50_000,
    n_test=10_000,
    n_stitch=50_000,
    n_direct=5_000,
    width=0.5,
    widths=(0.25, 0.5, 1.0),
    seeds=(0, 1),
    base_epochs=6,
    base_batch=128,
    layers=TINY10_LAYERS,
    stitch_epochs=30,
    sweep_epochs=30,
    stitch_batch=128,
    track_every=250,
    trace_layer="bn3",
    cka_layer="bn4",
    cka_penalty=1.0,
    cka_penalty_sweep=(0.3, 1.0, 3.0, 10.0),
    rank_layers=("bn4", "bn7"),
    ranks=(4, 8, 16),
    sparsity_layer="bn6",
    l1=(0.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0),
    alphas=(0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0),
    init_layers=("bn3", "bn6"),
    long_layers=("bn3",),
    init_runs=3,
    mode_threshold=0.8,
    lambdas=(0.0, 0.25, 0.5, 0.75, 1.0),
    width_layers=("bn3", "bn5", "bn7"),
)

# A miniature of every experiment in a minute or two: the main pair trained on 6,000 images (a few hundred steps, to
# about 0.8 accuracy), three layers, a few dozen steps per stitching layer. It is built to show the headline
# patterns; the rest needs the full run.
QUICK = Config(
    n_train=6_000,
    n_test=1_000,
    n_stitch=4_096,
    n_direct=500,
    width=0.5,
    widths=(0.25, 0.5),
    seeds=(0, 1),
    base_epochs=6,
    base_batch=128,
    layers=("bn2", "bn5", "bn7"),
    stitch_epochs=2,
    sweep_epochs=2,
    stitch_batch=128,
    track_every=8,
    trace_layer="bn2",
    cka_layer="bn5",
    cka_penalty=1.0,
    cka_penalty_sweep=(1.0, 10.0),
    rank_layers=("bn7",),
    ranks=(4,),
    sparsity_layer="bn7",
    l1=(0.0, 300.0, 3000.0),
    alphas=(0.0, 0.03, 0.3),
    init_layers=("bn2",),
    long_layers=("bn2",),
    init_runs=2,
    mode_threshold=0.8,
    lambdas=(0.0, 0.5, 1.0),
    width_layers=("bn7",),
)


def channels(width: float) -> tuple[int, ...]:
    """Tiny-10's channels at ``width`` (1.0 = the paper's)."""
    return scaled_channels(TINY10_CHANNELS, width)


def layer_channels(config: Config, layer: str) -> int:
    """Channels of ``bnK`` in the main pair."""
    return channels(config.width)[int(layer[2:]) - 1]
