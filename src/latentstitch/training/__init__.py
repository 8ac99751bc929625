"""Training: one seeded loop (``fit``) for every model, checkpoints as safetensors, batch samplers for
class-balanced and mixed random/class-pure schedules, ready-made loss functions, and anchor studies
(``anchor_study``: zero-shot stitched accuracy of relative classifiers against the number and choice of anchors)."""

from latentstitch.training._anchor_study import STUDY_STRATEGIES, anchor_study, train_relative_head
from latentstitch.training._anchor_study_result import AnchorStudy
from latentstitch.training._checkpoint import load_checkpoint, save_checkpoint
from latentstitch.training._loop import fit
from latentstitch.training._objectives import (
    TOPOLOGICAL_SITES,
    ClassificationObjective,
    batchnorm_eval,
    classification_loss,
    cyclical_weight,
)
from latentstitch.training._samplers import (
    ClassAccumulationSampler,
    ClassBalancedBatchSampler,
    RandomBatchSampler,
    TensorBatches,
)

__all__ = [
    "STUDY_STRATEGIES",
    "TOPOLOGICAL_SITES",
    "AnchorStudy",
    "ClassAccumulationSampler",
    "ClassBalancedBatchSampler",
    "ClassificationObjective",
    "RandomBatchSampler",
    "TensorBatches",
    "anchor_study",
    "batchnorm_eval",
    "classification_loss",
    "cyclical_weight",
    "fit",
    "load_checkpoint",
    "save_checkpoint",
    "train_relative_head",
]
