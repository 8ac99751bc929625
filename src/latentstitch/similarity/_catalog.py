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
from latentstitch.similarity._cca import cca, pwcca, svcca
from latentstitch.similarity._cka import cka, minibatch_cka
from latentstitch.similarity._neighbors import jaccard_at_k, matched_cosine, mrr, mutual_knn
from latentstitch.similarity._procrustes import procrustes_distance, shape_metric_angular
from latentstitch.similarity._registry import register_measure
from latentstitch.similarity._regression import r2_linear
from latentstitch.similarity._rsa import rsa

# Orthogonal maps include permutations and sign flips of coordinates.
RIGID = {ORTHOGONAL, PERMUTATION, AXIS_REFLECTION}
SHAPE = RIGID | {ISOTROPIC_SCALE, TRANSLATION}
LINEAR = SHAPE | {AXIS_SCALE, INVERTIBLE_LINEAR}
COLUMNS = "columns centred"


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
_register("linear_cka", cka, SHAPE, options={"kernel": "linear"}, streaming="StreamingCKA")
_register(
    "debiased_cka",
    cka,
    SHAPE,
    options={"kernel": "linear", "debiased": True},
    value_range=(-1.0, 1.0),
    centering=U_CENTRED,
    min_samples=4,
    streaming="StreamingCKA",
)
_register("rbf_cka", cka, SHAPE, options={"kernel": "rbf"}, centering="Gram matrices double-centred")
_register(
    "minibatch_cka",
    minibatch_cka,
    SHAPE,
    value_range=(-1.0, 1.0),
    centering=f"{U_CENTRED}, per minibatch",
    min_samples=4,
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
)
FITTED = {"trivial_when_n_le_d": True}  # a fit with at least as many features as samples matches anything
_register("mean_cca", cca, LINEAR, options={"reduce": "mean"}, streaming="StreamingCCA", **FITTED)
_register("r2_cca", cca, LINEAR, options={"reduce": "r2"}, streaming="StreamingCCA", **FITTED)
_register("svcca", svcca, SHAPE, streaming="StreamingSVCCA", **FITTED)
_register(
    "pwcca",
    pwcca,
    {ISOTROPIC_SCALE, TRANSLATION, PERMUTATION, AXIS_REFLECTION},
    invariances_y=LINEAR,
    symmetric=False,
    streaming="StreamingPWCCA",
    **FITTED,
)
_register(
    "procrustes_distance",
    procrustes_distance,
    SHAPE,
    kind="distance",
    value_range=(0.0, 2.0),
    centering="columns centred, unit Frobenius norm",
    streaming="StreamingProcrustes",
)
_register(
    "shape_metric_angular",
    shape_metric_angular,
    SHAPE,
    kind="distance",
    value_range=(0.0, math.pi / 2),
    streaming="StreamingProcrustes",
)
_register(
    "rsa",
    rsa,
    SHAPE,
    value_range=(-1.0, 1.0),
    differentiable=False,
    centering="none (Euclidean RDMs ignore translation)",
    min_samples=3,
)
COSINE = RIGID | {ISOTROPIC_SCALE}
_register("mutual_knn", mutual_knn, COSINE, differentiable=False, centering="none (cosine)", min_samples=11)
_register(
    "jaccard_at_k",
    jaccard_at_k,
    COSINE,
    symmetric=False,
    differentiable=False,
    centering="none (cosine)",
    min_samples=5,
    same_space=True,
)
_register(
    "mrr", mrr, COSINE, symmetric=False, differentiable=False, centering="none (cosine)", min_samples=1, same_space=True
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
