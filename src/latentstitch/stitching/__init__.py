"""Model stitching: direct matching of activations, and Frankenstein networks of real torch models.

The methods of Csiszárik et al., "Similarity and Matching of Neural Network Representations" (NeurIPS 2021,
"Dr. Frankenstein"), and latent space translation from parallel anchors.

**Direct matching** (Section 4.2): estimators fitted on paired activations. Every one follows scikit-learn's
contract (parameters stored unchanged, learned state with a trailing underscore, ``fit`` returns ``self``,
``clone`` works) and shares one interface:

- ``fit(a, b)`` / ``partial_fit(a_chunk, b_chunk)``: ``a`` (source) and ``b`` (target) are activations of the same
  samples, numpy arrays or torch tensors. (N, p) rows are used as they are; (N, T, p) sequences and (N, p, H, W)
  feature maps are matched per feature, every token or position being a sample, as the paper does for
  convolutional layers ((N*H*W, C) rows, a 1x1 convolution).
- ``transform(x)``: ``x @ coef_ + intercept_``, same type, dtype, device and layout as ``x``.
- ``score(a, b)``: R^2 of the prediction of ``b`` (variance-weighted over features).
- ``to_torch()``: an ``nn.Linear`` (or 1x1 ``nn.Conv2d`` for feature maps) reproducing ``transform``.
- ``save(path)`` / ``load(path)``: one safetensors file, never pickle.

Every stitcher (and every map of ``latentstitch.alignment``) is an ``AffineMap``: the base class that holds a
fitted ``coef_`` / ``intercept_`` and provides ``transform``, ``score``, ``to_torch``, ``save`` and ``load``.

Estimators: ``LeastSquares`` (``pinv([A, 1]) B``, optionally ridge in scale-free units), ``LeastSquaresCV`` (the ridge
chosen by cross-validation, ``ridge_path``: every ridge from one eigendecomposition per fold), ``LeastSquaresLOO``
(scikit-learn's ``RidgeCV``: the alpha of least leave-one-out error, raw rows, an intercept), ``Procrustes``
(orthogonal), ``ReducedRank`` (rank-k), ``SparseLasso`` (L1), and ``LatentTranslator`` (standard-scale, fit a
stitcher on anchors, unscale).

**Frankenstein networks** (Sections 3-8), on torch models with named layers (``named_modules()`` names):

- ``get_activations(model, data, layers)``: capture layers' outputs over a dataset (hooks; batched; optional
  spatial downsampling; in memory, chunked to disk as an ``ActivationStore``, or streamed to a callback).
  ``fit_direct(estimator, model_a, model_b, layer_a, layer_b, data)``: stream paired activations into a direct
  matching estimator. ``layer_shapes(model, example)``: every layer's output shape.
- ``stitch(model_a, model_b, layer_a, layer_b, stitcher)``: a ``StitchedModel`` running A up to ``layer_a``, the
  stitching layer (1x1 conv for feature maps, linear for vectors, token-wise linear for sequences, or a
  ``LowRankStitch`` bottleneck), then B after ``layer_b`` (residual paths intact). Initialised from any fitted
  estimator above, by least squares, randomly or as the identity.
- ``fit_task_loss(stitched, data, ...)``: train only the stitching layer through both frozen networks (the paper's
  defaults), with soft or hard labels, L1 sparsity, low rank, a CKA penalty, and CKA / R^2 traced along training.
- ``stitch_layers(models, layers, connectors)``: a ``MultiStitchedModel``, a chain of networks stitched at several
  layers at once (e.g. A's first block, B's middle block, A's last block), with a direct-matched or a relative
  (``RelativeConnector``: parallel anchors only, decoder fitted on the target network alone) connector at each
  junction.
- ``stitch_metrics``: accuracy, relative accuracy (stitched / model B), agreement and cross-entropy to model B;
  ``stitch_nulls`` / ``sweep(..., nulls=True)``: the same metrics for the same stitch fitted from a shuffled sender
  and from noise with the sender's covariance, the control that says whether stitching works at all.
- ``sweep`` (every layer x every method, Figure 2), ``sparsity_sweep`` (Figure 8), ``interpolate_layers`` (mode
  connectivity), ``save_stitching_layer`` / ``load_stitching_layer`` (safetensors).

Data arguments (``data``, ``eval_data``) are an array or tensor of inputs, an ``(inputs, labels)`` tuple, or an
iterable of batches (a ``DataLoader``) of input tensors or ``(inputs, labels, ...)`` tuples.

Modules, by concern: estimators ``_base`` (``AffineMap``), ``_paired`` (layouts and statistics of paired
activations), ``_least_squares``, ``_ridge``, ``_procrustes``, ``_reduced_rank``, ``_lasso``, ``_translator``;
running torch models ``_data`` (the data argument), ``_hooks`` (layer names, capture), ``_activations``, ``_store``
(``ActivationStore``), ``_direct`` (``fit_direct``); Frankenstein networks ``_layers`` (stitching layers and their
algebra), ``_io`` (safetensors), ``_initialize`` (one function per initialisation), ``_model`` (``StitchedModel``),
``_task_loss``, ``_metrics``; studies ``_methods`` (``TaskLoss``), ``_sweep``, ``_sparsity``, ``_nulls``;
multi-layer stitching ``_connectors``, ``_multilayer``.
"""

from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch.stitching._activations import get_activations
from latentstitch.stitching._adapter import ResidualAdapter
from latentstitch.stitching._base import AffineMap
from latentstitch.stitching._connectors import CONNECTORS, RelativeConnector
from latentstitch.stitching._direct import fit_direct
from latentstitch.stitching._hooks import layer_names, layer_shapes
from latentstitch.stitching._initialize import INITS
from latentstitch.stitching._io import load, load_stitching_layer, save_stitching_layer
from latentstitch.stitching._lasso import SPARSITY_THRESHOLD, SparseLasso
from latentstitch.stitching._layers import LowRankStitch, affine_map, interpolate_layers, sparsify_layer
from latentstitch.stitching._least_squares import LeastSquares
from latentstitch.stitching._methods import TaskLoss
from latentstitch.stitching._metrics import soft_cross_entropy, stitch_metrics
from latentstitch.stitching._model import StitchedModel, stitch
from latentstitch.stitching._multilayer import MultiStitchedModel, run_segment, stitch_layers
from latentstitch.stitching._nulls import NULLS, fit_direct_null, stitch_nulls
from latentstitch.stitching._procrustes import Procrustes
from latentstitch.stitching._reduced_rank import ReducedRank
from latentstitch.stitching._ridge import DEFAULT_RIDGES, LeastSquaresCV, LeastSquaresLOO, RidgePath, ridge_path
from latentstitch.stitching._sparsity import SparsityResult, sparsity_sweep
from latentstitch.stitching._store import ActivationStore
from latentstitch.stitching._sweep import SweepResult, plot_sweep, sweep
from latentstitch.stitching._task_loss import TARGETS, TaskLossResult, fit_task_loss
from latentstitch.stitching._translator import LatentTranslator

__all__ = [
    "CONNECTORS",
    "DEFAULT_RIDGES",
    "INITS",
    "NULLS",
    "SPARSITY_THRESHOLD",
    "TARGETS",
    "ActivationStore",
    "AffineMap",
    "LatentTranslator",
    "LeastSquares",
    "LeastSquaresCV",
    "LeastSquaresLOO",
    "LowRankStitch",
    "MultiStitchedModel",
    "Procrustes",
    "RankDeficiencyWarning",
    "ReducedRank",
    "RelativeConnector",
    "ResidualAdapter",
    "RidgePath",
    "SparseLasso",
    "SparsityResult",
    "StitchedModel",
    "SweepResult",
    "TaskLoss",
    "TaskLossResult",
    "affine_map",
    "fit_direct",
    "fit_direct_null",
    "fit_task_loss",
    "get_activations",
    "interpolate_layers",
    "layer_names",
    "layer_shapes",
    "load",
    "load_stitching_layer",
    "plot_sweep",
    "ridge_path",
    "run_segment",
    "save_stitching_layer",
    "soft_cross_entropy",
    "sparsify_layer",
    "sparsity_sweep",
    "stitch",
    "stitch_layers",
    "stitch_metrics",
    "stitch_nulls",
    "sweep",
]
