"""Relative representations: samples described by their similarities to a set of anchors.

Moschella et al., "Relative representations enable zero-shot latent space communication", ICLR 2023; the robust
variant from García-Castellanos et al., arXiv 2409.10967; the product of invariances (Cannistraci et al., ICLR
2024); geodesic and whitened similarities, ASIF sparsification (``top_k``/``power``), learned prototype anchors,
multi-layer relative representations. Anchor studies (``anchor_study``) train classifiers, so they live in
``latentstitch.training``.
"""

# Importing these modules registers the "geodesic" and "whitened" similarities.
from latentstitch._core.errors import ZeroNormError
from latentstitch.relative import _geodesic, _whitened  # noqa: F401
from latentstitch.relative._aggregation import AGGREGATIONS, SpaceAggregation, aggregate_spaces, standardize_rows
from latentstitch.relative._anchors import STRATEGIES, select_anchors
from latentstitch.relative._geodesic import GeodesicGraph, geodesic_graph
from latentstitch.relative._modules import OUTPUT_NORMS, RelativeProjection, RobustRelativeProjection
from latentstitch.relative._multilayer import MultiLayerRelativeProjection, multilayer_relative_projection
from latentstitch.relative._product import ProductOfInvariances, product_of_invariances, shared_invariances
from latentstitch.relative._projection import relative_projection
from latentstitch.relative._prototypes import LearnedAnchors, fit_prototypes
from latentstitch.relative._similarities import SIMILARITIES, SimilaritySpec, get_similarity, register_similarity
from latentstitch.relative._sparsify import sparsify_similarities
from latentstitch.relative._transforms import (
    SPREAD_FLOOR,
    Centering,
    L2Normalization,
    StandardScaling,
    check_spread_floor,
    floored_spread,
)

__all__ = [
    "AGGREGATIONS",
    "OUTPUT_NORMS",
    "SIMILARITIES",
    "SPREAD_FLOOR",
    "STRATEGIES",
    "Centering",
    "GeodesicGraph",
    "L2Normalization",
    "LearnedAnchors",
    "MultiLayerRelativeProjection",
    "ProductOfInvariances",
    "RelativeProjection",
    "RobustRelativeProjection",
    "SimilaritySpec",
    "SpaceAggregation",
    "StandardScaling",
    "ZeroNormError",
    "aggregate_spaces",
    "check_spread_floor",
    "fit_prototypes",
    "floored_spread",
    "geodesic_graph",
    "get_similarity",
    "multilayer_relative_projection",
    "product_of_invariances",
    "register_similarity",
    "relative_projection",
    "select_anchors",
    "shared_invariances",
    "sparsify_similarities",
    "standardize_rows",
]
