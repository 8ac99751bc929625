"""Relative representations: samples described by their similarities to a set of anchors.

Moschella et al., "Relative representations enable zero-shot latent space communication", ICLR 2023; the robust
variant from García-Castellanos et al., arXiv 2409.10967.
"""

from latentstitch.relative._anchors import STRATEGIES, select_anchors
from latentstitch.relative._modules import OUTPUT_NORMS, RelativeProjection, RobustRelativeProjection
from latentstitch.relative._projection import relative_projection
from latentstitch.relative._similarities import (
    SIMILARITIES,
    SimilaritySpec,
    ZeroNormError,
    get_similarity,
    register_similarity,
)
from latentstitch.relative._transforms import SPREAD_FLOOR, Centering, L2Normalization, StandardScaling, floored_spread

__all__ = [
    "OUTPUT_NORMS",
    "SIMILARITIES",
    "SPREAD_FLOOR",
    "STRATEGIES",
    "Centering",
    "L2Normalization",
    "RelativeProjection",
    "RobustRelativeProjection",
    "SimilaritySpec",
    "StandardScaling",
    "ZeroNormError",
    "floored_spread",
    "get_similarity",
    "register_similarity",
    "relative_projection",
    "select_anchors",
]
