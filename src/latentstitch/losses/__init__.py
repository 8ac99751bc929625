"""Training losses: topological densification of class clusters and the autoencoders' reconstruction terms."""

from latentstitch.losses._reconstruction import calibrated_reconstruction_loss, free_bits_kl, gaussian_kl
from latentstitch.losses._topological import TopologicalDensificationLoss, death_times, minimum_spanning_trees

__all__ = [
    "TopologicalDensificationLoss",
    "calibrated_reconstruction_loss",
    "death_times",
    "free_bits_kl",
    "gaussian_kl",
    "minimum_spanning_trees",
]
