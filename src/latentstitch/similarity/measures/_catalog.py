"""The built-in measures, registered with their metadata (see ``_registry.MeasureSpec``)."""

from __future__ import annotations

import math

from latentstitch.invariance import (
    AXIS_REFLECTION,
    AXIS_SCALE,
    INVERTIBLE_LINEAR,
    ISOTROPIC_SCALE,
    ORTHOGONAL,
    PERMUTATION,
    TRANSLATION,
)
from latentstitch.similarity.measures._cca import cca, pwcca, svcca
from latentstitch.similarity.measures._cka import cka, minibatch_cka
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
from latentstitch.similarity.measures._registry import register_measure
from latentstitch.similarity.measures._regression import r2_linear
from latentstitch.similarity.measures._retrieval import jaccard_at_k, matched_cosine, mrr
from latentstitch.similarity.measures._rsa import rsa
from latentstitch.similarity.measures._subspace import eigenspace_overlap, ensd

# Orthogonal maps include permutations and sign flips of coordinates.
RIGID = {ORTHOGONAL, PERMUTATION, AXIS_REFLECTION}
SHAPE = RIGID | {ISOTROPIC_SCALE, TRANSLATION}
LINEAR = SHAPE | {AXIS_SCALE, INVERTIBLE_LINEAR}
COLUMNS = "columns centred"


def ids(*identifiers: str) -> dict:
    """The measure's identifiers in nacloos/similarity-repository (``measure/<repository>/<identifier>``)."""
    return {"similarity_repository": identifiers}


def _register(name, function, invariances, **metadata):
    """Defaults: a differentiable, symmetric similarity in [0, 1] of column-centred data."""
    defaults = {
        "kind": "similarity",
        "value_range": (0.0, 1.0),
        "symmetric": True,
        "differentiable": True,
        "centering": COLUMNS,
    }
    register_measure(name, function, invariances=invariances, **{**defaults, **metadata})


U_CENTRED = "Gram matrices U-centred (unbiased HSIC)"
TWO = {"trivial_samples": 2}  # centred, 2 samples are one direction per side: "identical" on any data
_register(
    "linear_cka",
    cka,
    SHAPE,
    options={"kernel": "linear"},
    streaming="StreamingCKA",
    **TWO,
    similarity_repository=("cka-kernel=linear-hsic=gretton-score",),
)
_register(
    "debiased_cka",
    cka,
    SHAPE,
    options={"kernel": "linear", "debiased": True},
    value_range=(-1.0, 1.0),
    centering=U_CENTRED,
    min_samples=4,
    resampling="without_replacement",
    streaming="StreamingCKA",
    similarity_repository=("cka-kernel=linear-hsic=song-score",),
)
_register("rbf_cka", cka, SHAPE, options={"kernel": "rbf"}, centering="Gram matrices double-centred", **TWO)
_register(
    "minibatch_cka",
    minibatch_cka,
    SHAPE,
    value_range=(-1.0, 1.0),
    centering=f"{U_CENTRED}, per minibatch",
    min_samples=4,
    resampling="without_replacement",
    streaming="StreamingMinibatchCKA",
)
_register(
    "r2_linear",
    r2_linear,
    SHAPE,
    invariances_x=LINEAR,
    symmetric=False,
    centering="intercept fitted (equivalent to centring both)",
    streaming="StreamingR2",
    trivial_when_n_le_d=True,
    similarity_repository=("linear_regression (ReSi's, arguments swapped: linear_regression(y, x))",),
)
FITTED = {"trivial_when_n_le_d": True}  # a fit with at least as many features as samples matches anything
_register("mean_cca", cca, LINEAR, options={"reduce": "mean"}, streaming="StreamingCCA", **FITTED, **ids("cca-score"))
_register(
    "r2_cca", cca, LINEAR, options={"reduce": "r2"}, streaming="StreamingCCA", **FITTED, **ids("cca-squared_score")
)
_register("svcca", svcca, SHAPE, streaming="StreamingSVCCA", **FITTED, **ids("svcca-var=0.99-score"))
_register(
    "pwcca",
    pwcca,
    {ISOTROPIC_SCALE, TRANSLATION, PERMUTATION, AXIS_REFLECTION},
    invariances_y=LINEAR,
    symmetric=False,
    streaming="StreamingPWCCA",
    **FITTED,
    **ids("pwcca-score"),
)
_register(
    "procrustes_distance",
    procrustes_distance,
    SHAPE,
    kind="distance",
    value_range=(0.0, 2.0),
    centering="columns centred, unit Frobenius norm",
    streaming="StreamingProcrustes",
    **TWO,
    **ids("procrustes-distance=squared_euclidean"),
)
_register(
    "shape_metric_angular",
    shape_metric_angular,
    SHAPE,
    kind="distance",
    value_range=(0.0, math.pi / 2),
    streaming="StreamingProcrustes",
    **TWO,
    **ids("procrustes-distance=angular"),
)
_register(
    "rsa",
    rsa,
    SHAPE,
    value_range=(-1.0, 1.0),
    differentiable=False,
    centering="none (Euclidean RDMs ignore translation)",
    min_samples=3,
    **ids("rsa-rdm=euclidean-compare=spearman"),
)
COSINE = RIGID | {ISOTROPIC_SCALE}
NEIGHBOURS = {"differentiable": False, "centering": "none (cosine)", "min_samples": 11, "resampling": "none"}
_register("mutual_knn", mutual_knn, COSINE, **NEIGHBOURS, **ids("mutual_knn-topk={topk}"))
_register(
    "jaccard_at_k",
    jaccard_at_k,
    COSINE,
    symmetric=False,
    differentiable=False,
    centering="none (cosine)",
    min_samples=5,
    same_space=True,
    resampling="none",
)
_register(
    "mrr",
    mrr,
    COSINE,
    symmetric=False,
    differentiable=False,
    centering="none (cosine)",
    min_samples=1,
    same_space=True,
    resampling="none",
)
_register(
    "matched_cosine",
    matched_cosine,
    COSINE,
    value_range=(-1.0, 1.0),
    centering="none (cosine)",
    min_samples=1,
    same_space=True,
)

# --- the measures of platonic-rep, ReSi, netrep and others (issue 17) ---------------------------------------------
# asymmetric: the k-NN masks are not symmetric, so 1^T (M K)(M L) 1 changes when K and L swap (as in platonic-rep)
_register(
    "cknna",
    cknna,
    COSINE,
    symmetric=False,
    **{**NEIGHBOURS, "value_range": (-1.0, 1.0)},
    **ids("cknna-topk={topk}"),
)
_register("cycle_knn", cycle_knn, COSINE, symmetric=False, **NEIGHBOURS, **ids("cycle_knn-topk={topk}"))
_register("knn_jaccard", knn_jaccard, COSINE, **NEIGHBOURS, **ids("jaccard_similarity"))
_register("rank_similarity", rank_similarity, COSINE, **NEIGHBOURS, **ids("rank_similarity"))
_register(
    "second_order_cosine",
    second_order_cosine,
    COSINE,
    **{**NEIGHBOURS, "value_range": (-1.0, 1.0)},
    **ids("second_order_cosine_similarity"),
)
_register(
    "gulp",
    gulp,
    LINEAR,
    kind="distance",
    value_range=(0.0, math.inf),
    centering="columns centred, each side scaled to unit total variance",
    streaming="StreamingGULP",
    **FITTED,
    **ids("gulp"),
)
_register("pnka", pnka, SHAPE, value_range=(-1.0, 1.0), **TWO)
_register(
    "deconfounded_cka",
    deconfounded_cka,
    SHAPE,
    value_range=(-1.0, 1.0),
    centering="columns centred; Gram matrices regressed on the confounder's",
    min_samples=3,  # with 2 samples every centred Gram matrix is the confounder's up to scale
    row_options=("confounder",),
)
_register(
    "distance_correlation",
    distance_correlation,
    SHAPE,
    centering="none (double-centred distance matrices)",
    **TWO,
    **ids("distance_correlation"),
)
_register(
    "eigenspace_overlap",
    eigenspace_overlap,
    LINEAR - {TRANSLATION},
    centering="none (column spaces of the raw data)",
    min_samples=1,
    streaming="StreamingEigenspaceOverlap",
    **FITTED,
    **ids("eigenspace_overlap_score"),
)
_register(
    "ensd",
    ensd,
    SHAPE,
    value_range=(0.0, math.inf),
    streaming="StreamingENSD",
    **TWO,
    **ids("ensd"),
)
CORRELATIONS = {PERMUTATION, AXIS_SCALE, ISOTROPIC_SCALE, TRANSLATION}  # positive rescaling of neurons
_register(
    "correlation_match",
    correlation_match,
    CORRELATIONS,
    value_range=(-1.0, 1.0),
    streaming="StreamingCorrelationMatch",
    **TWO,
    **ids("hard_correlation_match"),
)
_register(
    "soft_correlation_match",
    correlation_match,
    CORRELATIONS,
    value_range=(-1.0, 1.0),
    options={"soft": True},
    streaming="StreamingCorrelationMatch",
    **TWO,
    **ids("soft_correlation_match"),
)
_register(
    "permutation",
    permutation_metric,
    {PERMUTATION, ISOTROPIC_SCALE, TRANSLATION},
    kind="distance",
    value_range=(0.0, math.pi),
    streaming="StreamingPermutation",
    **ids("permutation_metric-distance=angular"),
)
_register(
    "aligned_cosine",
    aligned_cosine,
    COSINE,
    value_range=(-1.0, 1.0),
    differentiable=False,
    centering="none",
    min_samples=1,
    **ids("aligned_cosine_similarity"),
)

DEFAULT_MEASURES = (
    "linear_cka",
    "debiased_cka",
    "rbf_cka",
    "r2_linear",
    "mean_cca",
    "r2_cca",
    "svcca",
    "pwcca",
    "procrustes_distance",
    "shape_metric_angular",
    "rsa",
    "mutual_knn",
)
"""What ``compare`` computes by default; the same-space measures are added when x and y have the same width."""
SAME_SPACE_MEASURES = ("jaccard_at_k", "mrr", "matched_cosine")
