"""What the contract suite runs over (our ``check_estimator`` registry).

A new public estimator, measure, torch module or CLI command is covered by adding its name here, with the
invalid values of its own hyperparameters. The generic checks (containers, dtypes, shapes, NaN/inf placements,
empty inputs, magnitudes, persistence, unknown keyword arguments) then run on it without further code.
"""

from __future__ import annotations

import math

import numpy as np

NAN, INF = math.nan, math.inf

# Bad values every positive count / size / period must refuse, and every flag.
BAD_COUNTS = [0, -1, 2.5, True, "3"]
BAD_FLAGS = ["yes", 2, None]
BAD_POSITIVE = [0.0, -1.0, NAN, INF, "1"]  # eps, bandwidth, learning rates, temperatures
BAD_NONNEGATIVE = [-1.0, NAN, INF, "0.1"]  # regularisation strengths, tolerances
BAD_SEEDS = [-1, 2.5, "0", 2**40]
BAD_NEIGHBOURS = [*BAD_COUNTS, 40]  # neighbour counts: also as many neighbours as the 40 samples

# --- similarity measures (names in latentstitch.similarity.MEASURES) and the bad values of their options -------
MEASURES: dict[str, dict[str, list]] = {
    "linear_cka": {"debiased": BAD_FLAGS, "kernel": ["poly", None], "method": ["fast", 1]},
    "debiased_cka": {"method": ["fast"]},
    "rbf_cka": {"bandwidth": BAD_POSITIVE},
    "minibatch_cka": {"batch_size": [0, 3, 2.5, True, "8"]},
    "r2_linear": {},
    "mean_cca": {"rtol": [-1.0, NAN, INF, "0"]},
    "r2_cca": {"rtol": [-1.0, NAN]},
    "svcca": {"keep": [0.0, 1.5, -1, NAN, True, "0.9", 0], "rtol": [-1.0, NAN]},
    "pwcca": {"rtol": [-1.0, NAN, "x"]},
    "procrustes_distance": {},
    "shape_metric_angular": {},
    "rsa": {"rdm": ["manhattan", None], "correlation": ["kendall"]},
    "mutual_knn": {"k": BAD_COUNTS, "clamp_quantile": [0.0, 1.5, NAN, "0.9"]},
    "jaccard_at_k": {"k": BAD_COUNTS},
    "mrr": {"k": BAD_COUNTS},
    "matched_cosine": {},
    "aligned_cosine": {},
    "cknna": {"k": BAD_NEIGHBOURS, "normalize": BAD_FLAGS},
    "correlation_match": {"soft": BAD_FLAGS},
    "cycle_knn": {"k": BAD_NEIGHBOURS},
    # the confounder is a row option (one row per sample): wrong rows, NaN, constant, missing, not an array
    "deconfounded_cka": {
        "confounder": [np.ones((39, 3)), np.full((40, 3), NAN), np.zeros((40, 3)), None, "inputs", np.ones(40)]
    },
    "distance_correlation": {},
    "eigenspace_overlap": {},
    "ensd": {},
    "gulp": {"ridge": BAD_NONNEGATIVE},
    "knn_jaccard": {"k": BAD_NEIGHBOURS},
    "permutation": {"score": ["cosine", None, 1]},
    "pnka": {"pointwise": BAD_FLAGS},
    "rank_similarity": {"k": BAD_NEIGHBOURS},
    "second_order_cosine": {"k": BAD_NEIGHBOURS},
    "soft_correlation_match": {"soft": BAD_FLAGS},
}
# Options a measure cannot go without, built by contract_grid for each input: the row options (one row per sample,
# following x's rows: a confounder of the same 40 samples).
REQUIRED_ROW_OPTIONS: dict[str, tuple[str, ...]] = {"deconfounded_cka": ("confounder",)}
# Measures registered but deliberately not covered (none): a registered measure missing from both lists fails
# tests/contract/test_contract_registry.py, so that new measures join the contract.
NOT_COVERED_MEASURES: list[str] = []

# --- streaming accumulators: name -> (constructor options, the one-shot measure it equals, bad options) ----------
STREAMING: dict[str, tuple[dict, str, dict[str, list]]] = {
    "StreamingCKA": ({}, "linear_cka", {"debiased": BAD_FLAGS}),
    "StreamingCKA(debiased)": ({"debiased": True}, "debiased_cka", {}),
    "StreamingR2": ({}, "r2_linear", {}),
    "StreamingCCA": ({}, "mean_cca", {"reduce": ["median"], "rtol": [-1.0, NAN]}),
    "StreamingSVCCA": ({}, "svcca", {"keep": [0.0, 1.5, NAN, True], "rtol": [-1.0]}),
    "StreamingPWCCA": ({}, "pwcca", {"rtol": [-1.0, NAN]}),
    "StreamingProcrustes": ({}, "procrustes_distance", {"metric": ["euclidean"]}),
    "StreamingMinibatchCKA": ({}, "minibatch_cka", {}),
    "StreamingCorrelationMatch": ({}, "correlation_match", {"soft": BAD_FLAGS}),
    "StreamingCorrelationMatch(soft)": ({"soft": True}, "soft_correlation_match", {}),
    "StreamingENSD": ({}, "ensd", {"device": ["gpu0", 3]}),
    "StreamingEigenspaceOverlap": ({}, "eigenspace_overlap", {"device": ["gpu0"]}),
    "StreamingGULP": ({}, "gulp", {"ridge": BAD_NONNEGATIVE}),
    "StreamingPermutation": ({}, "permutation", {"score": ["cosine", None]}),
    # the bootstrap of a stream: its value is the stream's (the interval around it is checked too)
    "StreamingBootstrap": (
        {"stream": "StreamingCKA", "replicates": 20},
        "linear_cka",
        {
            "stream": [None, "linear_cka"],
            "replicates": [0, 1, 2.5, "20"],
            "seed": BAD_SEEDS,
            "level": [0.0, 1.0, NAN, "0.9"],
            "interval": ["bca", None],
            "scheme": ["jackknife"],
        },
    ),
}

# --- estimators (latentstitch._core.persist.Persistable classes): name -> settings ---
# params: constructor arguments of the instance under test; bad: invalid values per parameter; paired: fit(a, b)
# (else fit(anchors)); same_rows (default True): a paired fit needs the same rows on both sides (False for an
# unpaired alignment); arguments: the names of fit's arguments where they are not a/b/anchors/x; reference (default
# True): the fit is a deterministic function of the data, so other dtypes and containers must match the float64
# result (False for a randomised search such as an unpaired alignment on unrelated data: any finite map is right);
# scale: k such that fitting and transforming inputs scaled by s scales the output by s**k (None: not
# equivariant, e.g. an absolute L1 strength); maps: an affine map with to_torch; labels: fit(x, labels) takes class
# labels as its second argument; method: the method read after fit (default transform). An estimator is found by
# its class name among latentstitch._core.persist's registered classes: adding its entry here is all it takes.
ESTIMATORS: dict[str, dict] = {
    "LeastSquares": {
        "params": {},
        "bad": {"bias": BAD_FLAGS, "ridge": BAD_NONNEGATIVE},
        "paired": True,
        "scale": 1,
        "maps": True,
    },
    "Procrustes": {
        "params": {},
        "bad": {"center": BAD_FLAGS, "scale": BAD_FLAGS},
        "paired": True,
        "scale": 1,
        "maps": True,
    },
    "ReducedRank": {
        "params": {"rank": 3},
        "bad": {"rank": [0, -1, 2.5, "3", 99], "bias": BAD_FLAGS, "ridge": BAD_NONNEGATIVE},
        "paired": True,
        "scale": 1,
        "maps": True,
    },
    "SparseLasso": {
        "params": {"alpha": 0.001},
        "bad": {"alpha": BAD_NONNEGATIVE, "max_iter": BAD_COUNTS, "tol": BAD_NONNEGATIVE, "bias": BAD_FLAGS},
        "paired": True,
        "scale": None,
        "maps": True,
    },
    "LatentTranslator": {
        "params": {},
        "bad": {"standardize": BAD_FLAGS, "stitcher": ["procrustes", 3]},
        "arguments": ("source", "target"),
        "paired": True,
        "scale": 1,
        "maps": True,
    },
    "Centering": {"params": {}, "bad": {}, "paired": False, "scale": 1, "maps": False},
    "StandardScaling": {"params": {}, "bad": {}, "paired": False, "scale": 0, "maps": False},
    "L2Normalization": {"params": {}, "bad": {"eps": BAD_POSITIVE}, "paired": False, "scale": 0, "maps": False},
    # latentstitch.alignment
    "InverseRelativeProjection": {
        "params": {},
        "bad": {"center": BAD_FLAGS, "rescale": ["norm", None], "ridge": BAD_NONNEGATIVE},
        "arguments": ("source_anchors", "target_anchors"),
        "paired": True,
        "scale": 1,
        "maps": False,
    },
    "GeneralizedProcrustes": {
        "params": {},
        "bad": {"center": BAD_FLAGS, "scale": BAD_FLAGS, "max_iter": BAD_COUNTS, "tol": BAD_NONNEGATIVE},
        "arguments": ("spaces", "target", "spaces[0]", "spaces[1]"),
        "paired": True,
        "scale": 1,
        "maps": False,
    },
    "FunctionalMap": {
        "params": {"n_neighbors": 4, "n_eigenvectors": 6, "refine": 2},
        "bad": {
            "n_neighbors": BAD_COUNTS,
            "n_eigenvectors": BAD_COUNTS,
            "refine": [-1, 2.5, "3"],
            "laplacian_weight": BAD_NONNEGATIVE,
            "transfer": ["affine", None],
        },
        "arguments": ("source", "target"),
        "paired": True,
        "scale": 1,
        "maps": False,
    },
    # latentstitch.alignment, semi-supervised (pairs plus pools of unpaired vectors; without pools: Procrustes on the
    # pairs, which is what the grid fits)
    "PoolProcrustes": {
        "params": {},
        "bad": {
            "max_iter": [-1, 2.5, True, "3"],
            "tol": [-0.1, 1.5, NAN, "0.1"],
            "subsample": [1, 2.5, "3"],
            "target_subsample": [1, 2.5, "3"],
            "random_state": BAD_SEEDS,
        },
        "paired": True,
        "arguments": ("source", "target"),
        "scale": 1,
        "maps": True,
    },
    "SelfLearning": {
        "params": {},
        "bad": {
            "max_iter": [-1, 2.5, True, "3"],
            "threshold": BAD_NONNEGATIVE,
            "stochastic_initial": [0.0, 1.5, NAN, "0.5"],
            "stochastic_multiplier": [1.0, 0.5, NAN, "2"],
            "stochastic_interval": BAD_COUNTS,
            "subsample": [1, 2.5, "3"],
            "target_subsample": [1, 2.5, "3"],
            "random_state": BAD_SEEDS,
        },
        "paired": True,
        "arguments": ("source", "target"),
        "scale": 1,
        "maps": True,
    },
    "BootstrappedProcrustes": {
        "params": {},
        "bad": {
            "grow": [0.0, 1.5, NAN, "0.5"],
            "n_rounds": BAD_COUNTS,
            "subsample": [1, 2.5, "3"],
            "target_subsample": [1, 2.5, "3"],
            "random_state": BAD_SEEDS,
        },
        "paired": True,
        "arguments": ("source", "target"),
        "scale": 1,
        "maps": True,
    },
    "PoolRidge": {
        "params": {},
        "bad": {
            "ridges": [[-1.0], [NAN], [], "0.1", [None]],
            "anchor_share": [0.0, 1.0, NAN, "0.5"],
            "max_iter": [-1, 2.5, True, "3"],
            "tol": [-0.1, 1.5, NAN, "0.1"],
            "subsample": [1, 2.5, "3"],
            "target_subsample": [1, 2.5, "3"],
            "random_state": BAD_SEEDS,
        },
        "paired": True,
        "arguments": ("source", "target"),
        "scale": 1,
        "maps": True,
    },
    "UnpairedAlignment": {
        "params": {
            "n_clusters": 3,
            "n_matchings": 2,
            "n_restarts": 2,
            "subsample": 200,
            "n_neighbors": 3,
            "refine_iter": 2,
            "refine_sample": 20,
            "refine_clusters": 4,
            "n_null": 1,
        },
        "bad": {"n_clusters": BAD_COUNTS, "refine_iter": [-1, 2.5], "check": BAD_FLAGS, "random_state": BAD_SEEDS},
        "arguments": ("source", "target"),
        "paired": True,
        "reference": False,
        "same_rows": False,
        "scale": 1,
        "maps": True,
    },
    # latentstitch.stitching: ridge least squares with the ridge chosen by cross-validation (relative ridge units)
    "LeastSquaresCV": {
        "params": {"folds": 3},
        "bad": {
            "ridges": [[-1.0], [NAN], [], "0.1", [None]],
            "folds": [0, 1, 2.5, "3", 41],
            "seed": BAD_SEEDS,
            "bias": BAD_FLAGS,
        },
        # too few rows for the folds: the error names the fold count to lower (or asks for more rows)
        "arguments": ("folds",),
        "paired": True,
        "scale": 1,
        "maps": True,
    },
    # latentstitch.stitching: ridge least squares with the alpha of least leave-one-out error (scikit-learn's RidgeCV)
    "LeastSquaresLOO": {
        "params": {},
        "bad": {"alphas": [[-1.0], [0.0], [NAN], [], "0.1", [None]]},
        "paired": True,
        # not scale-equivariant by design: RidgeCV's alphas are absolute (Gram units), so rows scaled by 1e20 choose
        # another alpha than the same rows at 1; at every scale the map must still be finite or a clear error
        "scale": None,
        "maps": True,
    },
    # latentstitch.bridge
    "Bridge": {
        "params": {"cv": 2},
        "bad": {
            "routes": ["no_such_route", 3, [], [3]],
            "cv": [0, 1, 2.5, "2", 20],
            "seed": BAD_SEEDS,
            "budget": [[1], "50", 3, [0]],
        },
        "arguments": ("source", "target", "cv"),  # cv: too few anchors for the folds
        "paired": True,
        "scale": 1,
        "maps": False,
    },
    "RelativeRoute": {
        "params": {},
        "bad": {
            "similarity": ["cos", None],
            "center": BAD_FLAGS,
            "robust": BAD_FLAGS,
            "spread_floor": [-0.1, 1.0, NAN, "0.001"],
        },
        "arguments": ("source", "target"),
        "paired": True,
        "scale": 0,
        "maps": False,
    },
    "ResidualAdapter": {
        "params": {"hidden": 8, "epochs": 5},
        "bad": {
            "hidden": BAD_COUNTS,
            "ridge": BAD_NONNEGATIVE,
            "epochs": BAD_COUNTS,
            "lr": BAD_POSITIVE,
            "weight_decay": BAD_NONNEGATIVE,
            "validation_fraction": [0.0, 0.5, -0.1, NAN, "0.1"],
            "patience": BAD_COUNTS,
            "seed": BAD_SEEDS,
        },
        "arguments": ("source", "target"),
        "paired": True,
        "scale": None,
        "maps": False,
    },
    "StackedRoute": {
        "params": {"routes": ["ridge_raw", "procrustes_scaled"], "params": [{"ridge": 0.1}, {}], "weights": [0.5, 0.5]},
        "bad": {"routes": ["ridge_raw", None], "params": ["x", None], "weights": [0.5, None]},
        "arguments": ("source", "target"),
        "paired": True,
        "scale": None,
        "maps": False,
    },
    # a classifier: fit(x, labels) on class labels, read through decision_function (class scores of standardised x)
    "LinearHead": {
        "params": {},
        "bad": {"C": BAD_POSITIVE, "max_iter": BAD_COUNTS},
        "arguments": ("x", "labels"),
        "labels": True,
        "method": "decision_function",
        "paired": True,
        "scale": 0,
        "maps": False,
    },
}
# The estimator classes whose fits run on the kernels of issue 21 (moments and solves): their overflow/underflow
# cases are scale-safety cases of that branch.
# L2Normalization divides by the row norms of relative/_similarities (the cosine's norm kernel, also issue 21's).
SCALE_SAFETY_ESTIMATORS = {
    "LeastSquares",
    "Procrustes",
    "ReducedRank",
    "SparseLasso",
    "LatentTranslator",
    "L2Normalization",
    "InverseRelativeProjection",  # cosines to the anchors: the cosine norm kernel
}

# --- relative projection ---------------------------------------------------------------------------------------------
SIMILARITIES = ["cosine", "angular", "dot", "euclidean", "l1", "linf", "basis_change"]

# --- torch modules: name -> bad constructor arguments (the generic checks build each with good defaults) ---------
# A new module also needs one line in contract_grid.build_module saying how to build a small instance of it.
MODULES: dict[str, dict[str, list]] = {
    "RelativeProjection": {
        "similarity": ["cos", None],
        "output_norm": ["batch", None],
        "num_anchors": [0, 2.5, "8"],
        "center": BAD_FLAGS,
        "eps": [-1.0, NAN, "0"],
        "foo": [1],
    },
    "RobustRelativeProjection": {
        "num_features": [0, 2.5, "6"],
        "momentum": [-0.1, 1.5, NAN, "0.1"],
        "eps": [-1.0, NAN, INF],
        "output_norm": ["batch"],
    },
    "BatchInstanceNorm": {"eps": [0.0, -1.0, NAN, "x"]},
    "LowRankStitch": {"in_features": [0, 2.5], "out_features": [0], "rank": [0, 9, 2.5]},
    "TopologicalDensificationLoss": {"beta": [-1.0, NAN, INF, "1"], "p": [0.0, -1.0, NAN, INF]},
    "LatentClassifier": {
        "latent_dim": [0, 2.5],
        "num_classes": [0, 2.5],
        "anchor_refresh": [0, 2.5],
        "projection": ["dot"],
        "center": BAD_FLAGS,
    },
    "ConvAutoencoder": {
        "latent_dim": [0],
        "width": [0.0, -1.0, NAN],
        "kl_weight": [-1.0, NAN],
        "loss": ["l1"],
        "anchor_refresh": [0],
        "variational": BAD_FLAGS,
    },
    "GCNClassifier": {"hidden": [0], "layers": [0], "dropout": [-0.1, 1.0, NAN, "0.5"], "projection": ["dot"]},
    "RelativeHead": {"num_classes": [0], "recipe": ["audio"], "center": BAD_FLAGS},
    "AbsoluteHead": {"in_features": [0], "num_classes": [0], "recipe": ["audio"]},
    # latentstitch.relative
    "LearnedAnchors": {"num_anchors": BAD_COUNTS, "pool_size": [0, 2.5, "16"], "mode": ["concave", None]},
    "MultiLayerRelativeProjection": {
        "num_layers": [0, 2.5, "2", 3],  # 3: but 2 arrays of anchors
        "num_anchors": [0, 2.5, "8"],
        "similarity": ["cos", None],
        "aggregation": ["max", None],
        "center": BAD_FLAGS,
        "foo": [1],
    },
    "ProductOfInvariances": {
        "similarities": [[], ["cos"], ["cosine", "cosine"], [None]],
        "aggregation": ["max", None],
        "num_anchors": [0, 2.5, 9],
        "center": BAD_FLAGS,
        "similarity_options": [{"cos": {}}, {"euclidean": {"foo": 1}}, "p=2"],
    },
    "SpaceAggregation": {"num_anchors": [0, 2.5, "6"], "num_spaces": [0, 2.5], "aggregation": ["max", None]},
    # latentstitch.stitching
    "RelativeConnector": {"similarity": ["cos", None], "center": BAD_FLAGS, "foo": [1]},
}

# Layers built from torch primitives follow torch's convention: a NaN input propagates to the output (never a finite
# wrong number). Modules that wrap a library function (the relative projections, the losses) check their inputs
# as the function does and name the bad argument.
PROPAGATE_NAN = {"LowRankStitch", "BatchInstanceNorm", "AbsoluteHead", "ConvAutoencoder", "SpaceAggregation"}
# The name of each module's input where it is not x (the NaN / int64 input cases expect it in the error).
INPUT_NAMES = {"LearnedAnchors": "pool", "MultiLayerRelativeProjection": "layers", "SpaceAggregation": "spaces"}
# Modules whose input has a size fixed at construction: a batch of 1 (LearnedAnchors: the pool of 16) is refused.
FIXED_BATCH = {"LearnedAnchors"}

# --- command-line commands (latentstitch.cli.COMMANDS) and option values that must be refused ---------------------
CLI: dict[str, list[tuple[list[str], str]]] = {
    "demo": [
        (["--epochs", "0"], "--epochs"),
        (["--epochs", "-1"], "--epochs"),
        (["--epochs", "2.5"], "--epochs"),
        (["--anchors", "0"], "--anchors"),
        (["--anchors", "100000"], "--anchors"),
        (["--latent-dim", "0"], "--latent-dim"),
        (["--seeds", "1", "1"], "--seeds"),
        (["--seeds", "-1", "0"], "--seeds"),
        (["--threads", "0"], "--threads"),
        (["--threads", "x"], "--threads"),
    ],
    "reproduce": [
        (["no-such-reproduction"], "NAME"),
        (["ae-stitching", "--workers", "0"], "--workers"),
        (["ae-stitching", "--workers", "2", "--scheduler", "tcp://nowhere:1"], "--workers"),
        (["ae-stitching", "--threads", "0"], "--threads"),
    ],
    "bridge": [
        (["fit", "{source}", "{target}", "-o", "{out}/b.safetensors", "--cv", "0"], "--cv"),
        (["fit", "{source}", "{target}", "-o", "{out}/b.safetensors", "--cv", "x"], "--cv"),
        (["fit", "{source}", "{target}", "-o", "{out}/b.safetensors", "--cv", "20"], "--cv"),  # 2 anchors a fold
        (["fit", "{source}", "{target}", "-o", "{out}/b.safetensors", "--routes", "nope"], "--routes"),
        (["fit", "{source}", "{target}", "-o", "{out}/b.safetensors", "--seed", "-1"], "--seed"),
        (["fit", "{source}", "{target}", "-o", "{out}/b.safetensors", "--budget", "0"], "--budget"),
        (["fit", "{source}", "{target}", "-o", "{out}/b.safetensors", "--threads", "0"], "--threads"),
        (["fit", "{source}", "{short}", "-o", "{out}/b.safetensors"], "TARGET"),  # 40 rows against 39
        (["fit", "{missing}", "{target}", "-o", "{out}/b.safetensors"], "{missing}"),
        (["fit", "{source}", "{target}", "-o", "{source}/b.safetensors"], "--output"),  # under a file
        (["fit", "{source}", "{target}", "-o", "{out}/b.safetensors", "--key", "nope"], "--key"),
        (["apply", "{source}", "{source}", "-o", "{out}/x.npy"], "BRIDGE"),  # a table, not a saved bridge
        (["apply", "{missing}", "{source}", "-o", "{out}/x.npy"], "{missing}"),
        # outputs that would overwrite an input or another output (issue 27)
        (["fit", "{source}", "{target}", "-o", "{out}/b.safetensors", "--json", "{target}"], "--json"),
        (["fit", "{source}", "{target}", "-o", "{out}/b.safetensors", "--json", "{out}/b.safetensors"], "--json"),
        (["apply", "{source}", "{target}", "-o", "{target}"], "--output"),
        (["apply", "{source}", "{target}", "-o", "{source}"], "--output"),
        (["routes", "--foo"], "--foo"),
        (["nope"], "nope"),
    ],
    "compare": [
        (["{source}", "{target}", "--measures", "nope"], "--measures"),
        (["{source}", "{target}", "--max-rows", "0"], "--max-rows"),
        (["{source}", "{target}", "--seed", "-1"], "--seed"),
        (["{source}", "{target}", "--threads", "0"], "--threads"),
        (["{source}", "{short}"], "B"),  # 40 rows against 39
        (["{missing}", "{target}"], "{missing}"),
        (["{source}", "{target}", "--json", "{source}/r.json"], "--json"),  # under a file
        (["{source}", "{target}", "--json", "{source}"], "--json"),  # an input (issue 27)
        (["{source}", "{target}", "--json", "{target}"], "--json"),
        (["{source}", "{target}", "--key", "nope"], "--key"),
        (["{source}", "{target}", "--permutations", "-1"], "--permutations"),
        (["{source}", "{target}", "--permutations", "x"], "--permutations"),
    ],
    "layers": [
        (["e5-small", "minilm-l6"], "A"),  # no torch layers to hook
        (["minilm-l6", "use-m3"], "B"),
        (["{source}", "minilm-l6"], "A"),  # a file, not an encoder or a model folder
        (["minilm-l6", "efficientnet-lite0"], "A, B"),  # text against images
        (["minilm-l6", "minilm-l6", "--measures", "rbf_cka"], "--measures"),
        (["minilm-l6", "minilm-l6", "--pooling", "max"], "--pooling"),
        (["minilm-l6", "minilm-l6", "--max-items", "0"], "--max-items"),
        (["minilm-l6", "minilm-l6", "--data", "{missing}"], "--data"),
        (["minilm-l6", "minilm-l6", "--data", "{out}"], "--data"),  # a folder for a text model
        (["efficientnet-lite0", "efficientnet-lite1", "--data", "{source}"], "--data"),  # a file for images
        (["minilm-l6", "minilm-l6", "--layers-a", ","], "--layers-a"),
    ],
    "migrate": [
        (["plan", "{source}", "--budget", "0", "-o", "{out}/p.csv"], "--budget"),
        (["plan", "{source}", "--budget", "0.1", "--holdout", "2", "-o", "{out}/p.csv"], "--holdout"),
        (["plan", "{missing}", "--budget", "0.1", "-o", "{out}/p.csv"], "{missing}"),
        (["plan", "{source}", "--budget", "0.1", "-o", "{source}"], "--output"),  # an input (issue 27)
        (["fit", "{source}", "{missing}", "-o", "{out}/m.json"], "{missing}"),
        (["apply", "{missing}", "{source}", "-o", "{out}/n.npy"], "{missing}"),
        (["search", "{missing}", "{source}", "{out}/n.npy", "{source}"], "{missing}"),
        (["search", "{source}", "{source}", "{out}/n.npy", "{source}", "--depth", "0"], "--depth"),
        (["search", "{source}", "{source}", "{out}/n.npy", "{source}", "-k", "x"], "-k"),
        (["status", "{source}", "{source}", "{out}/n.npy", "--depths", "0"], "--depths"),
        (["status", "{source}", "{source}", "{out}/n.npy", "--queries-relevant", "id"], "--queries-relevant"),
        (["nope"], "nope"),
    ],
    "report": [
        (["{missing}", "-o", "{out}/r.html"], "RESULTS_DIR"),
        (["{out}", "-o", "{out}/r.html"], "RESULTS_DIR"),  # a folder without any result file
        (["{source}", "-o", "{out}/r.html"], "RESULTS_DIR"),  # an embedding table, not a result file
        (["{out}", "-o", "{out}/r.json"], "--output"),
        (["{out}", "-o", "{source}/r.html"], "--output"),  # under a file
        (["{out}", "--foo"], "--foo"),
    ],
}
# Commands that take --out FOLDER and --quiet: every bad case above runs with them, into a fresh folder.
CLI_WITH_OUT = {"demo", "reproduce", "layers"}
# Placeholders of the argument lists (and of the option an error must name): {source} a (40, 6) .npy file, {target}
# a (40, 5) one, {short} a (39, 5) one, {missing} a path that does not exist, {out} a fresh folder.
