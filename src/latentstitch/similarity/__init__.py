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

The modules live in a folder per concept: ``measures/`` (the registry and the indices), ``inference/`` (the tests and
intervals), ``streaming/`` and ``layers/``; ``compare``, ``pairwise`` and ``heatmap`` use them from the top. Every
public name is imported from here.
"""

from latentstitch.similarity._compare import Comparison, compare
from latentstitch.similarity._heatmap import heatmap
from latentstitch.similarity._pairwise import pairwise
from latentstitch.similarity.inference._bootstrap import BootstrapCI, bootstrap_ci
from latentstitch.similarity.inference._pairwise_test import PairwiseTest, pairwise_test
from latentstitch.similarity.inference._permutation_test import (
    UNPAIRED_P,
    PermutationTest,
    pairing_p_value,
    permutation_test,
)
from latentstitch.similarity.inference._resampling import row_weights
from latentstitch.similarity.layers._cluster import layer_moments_on_cluster
from latentstitch.similarity.layers._moments import LayerMoments
from latentstitch.similarity.layers._similarity import (
    LAYER_MEASURES,
    LayerSimilarity,
    layer_moments,
    layer_similarity,
    layer_similarity_from_moments,
)
from latentstitch.similarity.measures._catalog import DEFAULT_MEASURES, SAME_SPACE_MEASURES
from latentstitch.similarity.measures._cca import cca, pwcca, svcca
from latentstitch.similarity.measures._cka import center_gram, cka, gram_linear, gram_rbf, minibatch_cka
from latentstitch.similarity.measures._deconfounded import deconfounded_cka
from latentstitch.similarity.measures._distance_correlation import distance_correlation
from latentstitch.similarity.measures._gulp import gulp
from latentstitch.similarity.measures._matching import aligned_cosine, correlation_match, permutation_metric
from latentstitch.similarity.measures._neighborhood_measures import (
    cknna,
    cycle_knn,
    knn_jaccard,
    mutual_knn,
    rank_similarity,
    second_order_cosine,
)
from latentstitch.similarity.measures._pnka import pnka
from latentstitch.similarity.measures._procrustes import procrustes_distance, shape_metric_angular
from latentstitch.similarity.measures._registry import (
    MEASURES,
    MeasureSpec,
    ZeroVarianceError,
    get_measure,
    register_measure,
)
from latentstitch.similarity.measures._regression import r2_linear
from latentstitch.similarity.measures._retrieval import jaccard_at_k, matched_cosine, mrr
from latentstitch.similarity.measures._rsa import rsa
from latentstitch.similarity.measures._sample_size import SmallSampleWarning, is_trivial
from latentstitch.similarity.measures._subspace import eigenspace_overlap, ensd
from latentstitch.similarity.streaming._bootstrap import StreamingBootstrap
from latentstitch.similarity.streaming._measures import (
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
from latentstitch.similarity.streaming._minibatch import StreamingMinibatchCKA

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
]
