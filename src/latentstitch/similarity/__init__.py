"""Similarity indices between representations: CKA (linear, RBF, debiased, minibatch, deconfounded), R^2 of a linear
fit, CCA, SVCCA, PWCCA, GULP, Procrustes, angular and permutation shape metrics, RSA, distance correlation, ENSD,
eigenspace overlap, correlation match, PNKA, and neighbourhood measures (mutual/cycle k-NN, CKNNA...); and whether a
value is real: ``permutation_test``, ``bootstrap_ci``, ``StreamingBootstrap`` and ``pairwise_test`` (over pairs).

Every index is a pure function ``f(x, y)`` of two representations of the same samples (rows): numpy in, float out;
torch in, 0-d tensor out (differentiable where ``MEASURES[name].differentiable``). ``MEASURES`` holds each one's
kind, range, symmetry, centring and invariances (``latentstitch.invariance`` names). ``compare`` computes several
at once, ``pairwise`` the matrix over many representations (``heatmap`` draws it), ``layer_similarity`` every layer
pair of two torch models in one streamed pass (forward hooks, moments only), and the ``Streaming*`` classes the
moment-based ones chunk by chunk with ``update``/``compute``, equal to the one-shot value.
"""

from latentstitch.similarity._bootstrap import BootstrapCI, bootstrap_ci
from latentstitch.similarity._catalog import DEFAULT_MEASURES, SAME_SPACE_MEASURES
from latentstitch.similarity._cca import cca, pwcca, svcca
from latentstitch.similarity._cka import center_gram, cka, gram_linear, gram_rbf, minibatch_cka
from latentstitch.similarity._compare import Comparison, compare
from latentstitch.similarity._deconfounded import deconfounded_cka
from latentstitch.similarity._distance_correlation import distance_correlation
from latentstitch.similarity._gulp import gulp
from latentstitch.similarity._heatmap import heatmap
from latentstitch.similarity._layer_cluster import layer_moments_on_cluster
from latentstitch.similarity._layer_moments import LayerMoments
from latentstitch.similarity._layer_similarity import (
    LAYER_MEASURES,
    LayerSimilarity,
    layer_moments,
    layer_similarity,
    layer_similarity_from_moments,
)
from latentstitch.similarity._matching import aligned_cosine, correlation_match, permutation_metric
from latentstitch.similarity._neighborhood_measures import (
    cknna,
    cycle_knn,
    knn_jaccard,
    mutual_knn,
    rank_similarity,
    second_order_cosine,
)
from latentstitch.similarity._pairwise import pairwise
from latentstitch.similarity._pairwise_test import PairwiseTest, pairwise_test
from latentstitch.similarity._permutation_test import UNPAIRED_P, PermutationTest, pairing_p_value, permutation_test
from latentstitch.similarity._pnka import pnka
from latentstitch.similarity._procrustes import procrustes_distance, shape_metric_angular
from latentstitch.similarity._registry import MEASURES, MeasureSpec, ZeroVarianceError, get_measure, register_measure
from latentstitch.similarity._regression import r2_linear
from latentstitch.similarity._resampling import row_weights
from latentstitch.similarity._retrieval import jaccard_at_k, matched_cosine, mrr
from latentstitch.similarity._rsa import rsa
from latentstitch.similarity._sample_size import SmallSampleWarning, is_trivial
from latentstitch.similarity._streaming import (
    StreamingCCA,
    StreamingCKA,
    StreamingCorrelationMatch,
    StreamingEigenspaceOverlap,
    StreamingENSD,
    StreamingGULP,
    StreamingPermutation,
    StreamingProcrustes,
    StreamingPWCCA,
    StreamingR2,
    StreamingSVCCA,
)
from latentstitch.similarity._streaming_bootstrap import StreamingBootstrap
from latentstitch.similarity._streaming_minibatch import StreamingMinibatchCKA
from latentstitch.similarity._subspace import eigenspace_overlap, ensd

__all__ = [
    "DEFAULT_MEASURES",
    "LAYER_MEASURES",
    "MEASURES",
    "SAME_SPACE_MEASURES",
    "UNPAIRED_P",
    "BootstrapCI",
    "Comparison",
    "LayerMoments",
    "LayerSimilarity",
    "MeasureSpec",
    "PairwiseTest",
    "PermutationTest",
    "SmallSampleWarning",
    "StreamingBootstrap",
    "StreamingCCA",
    "StreamingCKA",
    "StreamingCorrelationMatch",
    "StreamingENSD",
    "StreamingEigenspaceOverlap",
    "StreamingGULP",
    "StreamingMinibatchCKA",
    "StreamingPWCCA",
    "StreamingPermutation",
    "StreamingProcrustes",
    "StreamingR2",
    "StreamingSVCCA",
    "ZeroVarianceError",
    "aligned_cosine",
    "bootstrap_ci",
    "cca",
    "center_gram",
    "cka",
    "cknna",
    "compare",
    "correlation_match",
    "cycle_knn",
    "deconfounded_cka",
    "distance_correlation",
    "eigenspace_overlap",
    "ensd",
    "get_measure",
    "gram_linear",
    "gram_rbf",
    "gulp",
    "heatmap",
    "is_trivial",
    "jaccard_at_k",
    "knn_jaccard",
    "layer_moments",
    "layer_moments_on_cluster",
    "layer_similarity",
    "layer_similarity_from_moments",
    "matched_cosine",
    "minibatch_cka",
    "mrr",
    "mutual_knn",
    "pairing_p_value",
    "pairwise",
    "pairwise_test",
    "permutation_metric",
    "permutation_test",
    "pnka",
    "procrustes_distance",
    "pwcca",
    "r2_linear",
    "rank_similarity",
    "register_measure",
    "row_weights",
    "rsa",
    "second_order_cosine",
    "shape_metric_angular",
    "svcca",
    "top_k",
]
