"""Loss functions for ``fit``: ``(model, batch) -> loss``, for classifiers with or without topological
densification and for the mixed random / class-pure schedule."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from latentstitch._core.params import (
    check_choice,
    check_nonnegative,
    check_optional_positive_int,
    check_positive_int,
    check_probability,
)
from latentstitch.losses import TopologicalDensificationLoss
from latentstitch.relative import RobustRelativeProjection

#: Where the topological loss can look: the encoder output, or the (relative) latents the head reads.
TOPOLOGICAL_SITES = ("embeddings", "latents")


def classification_loss(model: nn.Module, batch: tuple) -> dict[str, torch.Tensor]:
    """Cross-entropy of ``model(x)`` against ``y`` for a batch ``(x, y, ...)``, with the batch accuracy."""
    x, y = batch[0], batch[1]
    logits = model(x)
    return {"loss": F.cross_entropy(logits, y), "accuracy": (logits.argmax(dim=1) == y).float().mean()}


@contextmanager
def batchnorm_eval(model: nn.Module) -> Iterator[nn.Module]:
    """Inside the block, every batch-norm layer of ``model`` (and every ``RobustRelativeProjection``) uses and
    keeps its running statistics (eval mode) while the rest of the model keeps its mode (dropout stays on).
    Modes are restored on exit. This is how class-pure batches must run: their batch statistics are biased."""
    switched = [m for m in model.modules() if isinstance(m, (_BatchNorm, RobustRelativeProjection)) and m.training]
    for module in switched:
        module.eval()
    try:
        yield model
    finally:
        for module in switched:
            module.train()


def cyclical_weight(
    total_steps: int, maximum: float, *, cycles: int = 4, ratio: float = 0.75
) -> Callable[[int], float]:
    """The topological weight schedule of García-Castellanos et al.: ``cycles`` cycles over ``total_steps``
    steps, each ramping linearly from 0 to ``maximum`` over its first ``ratio`` and holding ``maximum`` after."""
    total_steps = check_positive_int(total_steps, "total_steps")
    maximum = check_nonnegative(maximum, "maximum")
    cycles = check_positive_int(cycles, "cycles")
    ratio = check_probability(ratio, "ratio", low_open=True)
    period = total_steps / cycles

    def weight(step: int) -> float:
        within = step % period if step < total_steps else period
        return maximum * min(within / (period * ratio), 1.0)

    return weight


class ClassificationObjective:
    """Cross-entropy, plus ``weight`` times topological densification of the class clusters, for ``fit``.

    The model must expose ``embed(x)`` (encoder output), ``project(embeddings)`` (the latents the head reads:
    relative vector or the embeddings themselves) and ``decode(latents)`` (logits), as ``LatentClassifier`` does.

    Parameters
    ----------
    topological : TopologicalDensificationLoss or mapping, optional
        A loss applied to the ``latents``, or ``{site: (loss, share)}`` over sites ``"embeddings"``/``"latents"``:
        García-Castellanos et al. use ``{"embeddings": (beta=3, 0.1), "latents": (beta=3, 0.9)}`` ("both").
        None: plain cross-entropy.
    weight : float or callable ``step -> float``
        Multiplier of the topological term; a callable (e.g. ``cyclical_weight``) gets the number of loss
        evaluations so far.
    group_size : int, optional
        Sub-batches are consecutive runs of this many rows (``ClassBalancedBatchSampler`` with n samples per
        class). Default: the rows of each label.

    Batches
    -------
    ``(x, y)``: one gradient batch. ``(x, y, class_pure)`` from ``ClassAccumulationSampler.tagged``: a batch with
    ``class_pure=False`` runs forward in train mode without gradient, only to update batch-norm running statistics
    (and the anchor cache), and returns no loss; a class-pure batch runs under ``batchnorm_eval``.
    """

    def __init__(
        self,
        topological: TopologicalDensificationLoss
        | Mapping[str, tuple[TopologicalDensificationLoss, float]]
        | None = None,
        weight: float | Callable[[int], float] = 0.1,
        *,
        group_size: int | None = None,
    ):
        if isinstance(topological, TopologicalDensificationLoss):
            topological = {"latents": (topological, 1.0)}
        self.terms = dict(topological or {})
        for site in self.terms:
            check_choice(site, "topological", TOPOLOGICAL_SITES)
        if not callable(weight):
            check_nonnegative(weight, "weight")
        self.weight = weight
        self.group_size = check_optional_positive_int(group_size, "group_size")
        self.steps = 0

    def __call__(self, model: nn.Module, batch: tuple) -> dict[str, Any] | None:
        x, y = batch[0], batch[1]
        class_pure = bool(batch[2]) if len(batch) > 2 else None
        if class_pure is False:
            with torch.no_grad():
                model(x)
            return None
        with batchnorm_eval(model) if class_pure else nullcontext():
            if not self.terms:
                return classification_loss(model, (x, y))
            embeddings = model.embed(x)
            latents = model.project(embeddings)
            logits = model.decode(latents)
            features = {"embeddings": embeddings, "latents": latents}
            cross_entropy = F.cross_entropy(logits, y)
            labels = None if self.group_size is not None else y
            topological = sum(
                share * loss(features[site].flatten(1), labels, group_size=self.group_size)
                for site, (loss, share) in self.terms.items()
            )
        weight = self.weight(self.steps) if callable(self.weight) else self.weight
        self.steps += 1
        return {
            "loss": cross_entropy + weight * topological,
            "cross_entropy": cross_entropy,
            "topological": topological,
            "accuracy": (logits.argmax(dim=1) == y).float().mean(),
        }
