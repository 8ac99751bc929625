"""Stitching layers by direct matching: affine maps from one network's activations to another's.

The direct-matching methods of Csiszárik et al., "Similarity and Matching of Neural Network Representations"
(NeurIPS 2021, "Dr. Frankenstein"), Section 4.2, and latent space translation from parallel anchors.

Every estimator follows scikit-learn's contract (parameters stored unchanged, learned state with a trailing
underscore, ``fit`` returns ``self``, ``clone`` works) and shares one interface:

- ``fit(a, b)`` / ``partial_fit(a_chunk, b_chunk)``: ``a`` (source) and ``b`` (target) are activations of the same
  samples, numpy arrays or torch tensors. (N, p) rows are used as they are; (N, T, p) sequences and (N, p, H, W)
  feature maps are matched per feature, every token or position being a sample, as the paper does for
  convolutional layers ((N*H*W, C) rows, a 1x1 convolution).
- ``transform(x)``: ``x @ coef_ + intercept_``, same type, dtype, device and layout as ``x``.
- ``score(a, b)``: R^2 of the prediction of ``b`` (variance-weighted over features).
- ``to_torch()``: an ``nn.Linear`` (or 1x1 ``nn.Conv2d`` for feature maps) reproducing ``transform``.
- ``save(path)`` / ``load(path)``: one safetensors file, never pickle.

Estimators: ``LeastSquares`` (``pinv([A, 1]) B``), ``Procrustes`` (orthogonal), ``ReducedRank`` (rank-k),
``SparseLasso`` (L1), and ``LatentTranslator`` (standard-scale, fit a stitcher on anchors, unscale).
"""

from latentstitch._moments import RankDeficiencyWarning
from latentstitch.stitching._io import load
from latentstitch.stitching._lasso import SPARSITY_THRESHOLD, SparseLasso
from latentstitch.stitching._least_squares import LeastSquares
from latentstitch.stitching._procrustes import Procrustes
from latentstitch.stitching._reduced_rank import ReducedRank
from latentstitch.stitching._translator import LatentTranslator

__all__ = [
    "SPARSITY_THRESHOLD",
    "LatentTranslator",
    "LeastSquares",
    "Procrustes",
    "RankDeficiencyWarning",
    "ReducedRank",
    "SparseLasso",
    "load",
]
