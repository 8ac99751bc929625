"""Alignment beyond parallel anchors: few or no pairs, inverse relative projection, many models at once.

- ``InverseRelativeProjection`` (Maiorca et al. 2024): translate through relative space back into a target's
  absolute space, in closed form, from parallel anchors.
- ``bootstrap_anchors`` (Cannistraci et al. 2023): grow ~10-20 seed pairs into many matched pairs by optimal
  transport between relative representations, with a confidence per pair.
- ``UnpairedAlignment`` (mini-vec2vec, Dar 2025): a linear map between two spaces from no pairs at all, with a
  self-consistency score that tells a failed alignment from a good one.
- ``GeneralizedProcrustes``: M spaces into one shared universe (one orthogonal map each), from streamed statistics
  (``partial_fit``, dask arrays).
- ``PoolProcrustes``, ``SelfLearning`` (VecMap), ``BootstrappedProcrustes``: a few pairs plus many unpaired
  vectors of each model (*pools*): Procrustes refined by matching the pools (``fit(source, target, source_pool=...,
  target_pool=...)``); ``PoolRidge``: an affine (ridge) map on the pairs and ``PoolProcrustes``'s pseudo-pairs.
- ``FunctionalMap`` (Fumero et al. 2024): latent functional maps between k-NN graphs' Laplacian eigenbases from a
  few anchors: a similarity, point correspondences and a linear transfer.

The estimators take numpy arrays or torch tensors and return the type they were given; ``fit(source, target)`` on
parallel rows and ``transform(source)`` into the target's absolute space make each of them usable as a ``Bridge``
translation route, and ``save``/``load`` write one safetensors file.
"""

from latentstitch.alignment._bootstrap import BootstrappedAnchors, bootstrap_anchors
from latentstitch.alignment._functional_map import FunctionalMap
from latentstitch.alignment._generalized import GeneralizedProcrustes
from latentstitch.alignment._inverse import InverseRelativeProjection
from latentstitch.alignment._pooled import BootstrappedProcrustes, PoolProcrustes, PoolRidge, SelfLearning
from latentstitch.alignment._unpaired import UnpairedAlignment

__all__ = [
    "BootstrappedAnchors",
    "BootstrappedProcrustes",
    "FunctionalMap",
    "GeneralizedProcrustes",
    "InverseRelativeProjection",
    "PoolProcrustes",
    "PoolRidge",
    "SelfLearning",
    "UnpairedAlignment",
    "bootstrap_anchors",
]
