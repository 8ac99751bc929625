"""Task-loss matching (Csiszárik et al. 2021, Sec. 4.1): train only the stitching layer through the frozen networks.

``fit_task_loss`` does four things, one function each: check the optimisation settings (``TaskLossSettings``),
(re)initialise the stitching layer (``prepare_layer``), build the training batches and the loss
(``TaskLossObjective``), and run the training loop (``latentstitch.training.fit``). The metrics of a stitched network
and the similarity trace: ``latentstitch.stitching._metrics``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from latentstitch._core.params import check_choice, check_nonnegative, check_positive, check_positive_int, check_seed
from latentstitch.similarity import cka
from latentstitch.stitching._data import in_memory, iter_batches
from latentstitch.stitching._hooks import eval_mode, model_device, to_model
from latentstitch.stitching._layers import LowRankStitch, affine_map
from latentstitch.stitching._metrics import SimilarityTrace, probe_inputs, soft_cross_entropy, stitch_metrics
from latentstitch.stitching._model import StitchedModel
from latentstitch.training import RandomBatchSampler, TensorBatches, fit

#: What the stitched network is trained to output: the true labels, or model B's outputs as soft labels.
TARGETS = ("labels", "soft")


@dataclass
class TaskLossResult:
    """What ``fit_task_loss`` returns.

    ``stitched``: the trained stitched network (the same object that was passed in). ``history``: one record per
    epoch from ``latentstitch.training.fit`` (``loss``, ``cross_entropy``, ``lr``... and ``eval_*`` metrics when
    ``eval_data`` was given). ``trace``: the similarity records taken along training when ``track_every`` is set
    (``step``, ``cka``, ``r2``, ``cross_entropy``, ``agreement``, on the probe set).
    """

    stitched: StitchedModel
    history: list[dict[str, float]]
    trace: list[dict[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class TaskLossSettings:
    """The optimisation settings of ``fit_task_loss`` (see its parameters), each checked when the settings are made,
    naming the one at fault."""

    target: str = "soft"
    temperature: float = 1.0
    l1: float = 0.0
    rank: int | None = None
    cka_penalty: float = 0.0
    epochs: int = 30
    lr: float = 1e-3
    batch_size: int = 128
    weight_decay: float = 0.0
    seed: int = 0
    track_every: int | None = None

    def __post_init__(self) -> None:
        check_choice(self.target, "target", TARGETS)
        check_positive(self.temperature, "temperature")
        check_nonnegative(self.l1, "l1")
        check_nonnegative(self.cka_penalty, "cka_penalty")
        checked = {
            "epochs": check_positive_int(self.epochs, "epochs"),
            "lr": check_positive(self.lr, "lr"),
            "weight_decay": check_nonnegative(self.weight_decay, "weight_decay"),
            "seed": check_seed(self.seed),
            "batch_size": check_positive_int(self.batch_size, "batch_size"),
        }
        if self.rank is not None:
            checked["rank"] = check_positive_int(self.rank, "rank")
            if self.l1:
                raise ValueError(
                    "l1: the L1 penalty applies to full stitching matrices; it cannot be combined with rank"
                )
        if self.track_every is not None:
            checked["track_every"] = check_positive_int(self.track_every, "track_every")
        for name, value in checked.items():
            object.__setattr__(self, name, value)


def fit_task_loss(
    stitched: StitchedModel,
    data: Any,
    *,
    target: str = "soft",
    temperature: float = 1.0,
    l1: float = 0.0,
    rank: int | None = None,
    init: Any = None,
    cka_penalty: float = 0.0,
    epochs: int = 30,
    lr: float = 1e-3,
    batch_size: int = 128,
    weight_decay: float = 0.0,
    seed: int = 0,
    track_every: int | None = None,
    probe: Any = None,
    eval_data: Any = None,
    progress: Any = True,
) -> TaskLossResult:
    """Task-loss matching: train the stitching layer of ``stitched`` (only it) on ``data`` through both frozen networks.

    Defaults follow the paper and its code: Adam, lr 1e-3, no weight decay, batch 128 (incomplete last batch
    dropped), learning rate x0.1 after 1/3 and 2/3 of the optimiser steps, batch norm frozen (eval mode),
    initialisation from the least-squares matching, soft labels from model B at temperature 1.

    Parameters
    ----------
    stitched : StitchedModel
        Trained in place. Its layer is (re)initialised first when ``init`` is given, when it has none yet (least
        squares on ``data``), or when ``rank`` asks for a bottleneck it does not have.
    data : (inputs, labels) tuple, inputs array, or iterable of batches
        In-memory data is shuffled every epoch by a sampler seeded with ``seed``; a loader is used as it comes.
    target : {"soft", "labels"}
        ``"soft"``: cross-entropy to model B's outputs (``soft_cross_entropy`` at ``temperature``; the paper's
        choice, Sec. 4.1; B's outputs on in-memory data are computed once). ``"labels"``: cross-entropy to the
        labels (the reference code's default), which ``data`` must then hold.
    l1 : float
        Adds ``l1 * mean|W|`` over the stitching matrix (the reference code's sparsity penalty; the bias is not
        penalised). Not combined with ``rank``, as in the reference code.
    rank : int, optional
        Train a bottleneck ``W = W1 W2`` of this rank (``LowRankStitch``).
    init : optional
        Anything ``StitchedModel.initialize`` takes: ``"least_squares"``, ``"random"``, ``"identity"``, a fitted
        or unfitted estimator, an ``nn.Module``.
    cka_penalty : float
        Adds ``cka_penalty * CKA(S(a), b)`` per batch: linear CKA between the stitched activations and B's own at
        ``layer_b``, flattened to one row per sample (the paper's Experiment 4, low CKA at high accuracy). Needs B's
        full forward pass per batch.
    epochs, lr, batch_size, weight_decay, seed
        Training settings; the same seed gives the same result bit for bit on a CPU (initialisation, data order).
    track_every : int, optional
        Every this many optimiser steps (and before the first and after the last), record CKA and R^2 between the
        stitched activations and B's, and cross-entropy / agreement to B, on ``probe`` (the paper's Figure 4).
        CKA: linear, biased, one flattened row per sample (as the reference code). R^2:
        ``1 - ||S(a) - b||^2 / ||b - mean(b)||^2`` over per-position rows, the least-squares objective, largest at
        the least-squares map.
    probe : inputs, optional
        Default: the first 512 inputs of ``data``.
    eval_data : optional
        Evaluated with ``stitch_metrics`` after every epoch; the values join ``history`` as ``eval_<name>``.
    progress : bool or rich Progress

    Returns
    -------
    TaskLossResult
    """
    if not isinstance(stitched, StitchedModel):
        raise TypeError(f"stitched: expected a StitchedModel (from stitch()), got {type(stitched).__name__}")
    settings = TaskLossSettings(
        target=target,
        temperature=temperature,
        l1=l1,
        rank=rank,
        cka_penalty=cka_penalty,
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        weight_decay=weight_decay,
        seed=seed,
        track_every=track_every,
    )
    prepare_layer(stitched, data, init, settings)
    batches, needs_targets = training_batches(stitched, data, settings)
    trace = SimilarityTrace(stitched, probe_inputs(data, probe)) if settings.track_every is not None else None
    objective = TaskLossObjective(settings, needs_targets, model_device(stitched.model_a), trace)
    history = train_layer(stitched, objective, batches, settings, eval_data=eval_data, progress=progress)
    if trace is not None:
        trace.record(objective.steps)
    return TaskLossResult(stitched, history, trace.records if trace is not None else [])


def prepare_layer(stitched: StitchedModel, data: Any, init: Any, settings: TaskLossSettings) -> None:
    """(Re)initialise the stitching layer when ``init`` is given, when there is none yet (least squares on ``data``)
    or when ``rank`` asks for a bottleneck it does not have; refuse an L1 penalty on a low-rank layer."""
    layer, rank = stitched.stitching_layer, settings.rank
    needs_rank = rank is not None and not (isinstance(layer, LowRankStitch) and layer.rank == rank)
    if init is not None or layer is None or needs_rank:
        stitched.initialize("least_squares" if init is None else init, data=data, rank=rank, seed=settings.seed)
    elif rank is None and isinstance(layer, LowRankStitch) and settings.l1:
        raise ValueError("l1: the stitching layer is low-rank; the L1 penalty applies to full stitching matrices")


def training_batches(stitched: StitchedModel, data: Any, settings: TaskLossSettings) -> tuple[Any, bool]:
    """Re-iterable training batches and whether the loss must compute B's outputs per batch. In-memory data gets
    its targets once (the labels, or B's outputs) and a seeded sampler; a loader is used as it comes."""
    memory = in_memory(data)
    if memory is None:
        return data, settings.target != "labels"
    inputs, labels = memory
    if settings.target == "labels":
        if labels is None:
            raise ValueError('data: target="labels" needs (inputs, labels); give labels or use target="soft"')
        second = labels.long()
    else:
        with torch.no_grad(), eval_mode(stitched.model_b):
            second = torch.cat(
                [stitched.model_b(to_model(stitched.model_b, x)).cpu() for x, _ in iter_batches(inputs, 512)]
            )
    drop_last = len(inputs) >= settings.batch_size
    sampler = RandomBatchSampler(len(inputs), settings.batch_size, drop_last=drop_last, seed=settings.seed)
    return TensorBatches((inputs, second), sampler), False


class TaskLossObjective:
    """The loss of one training batch: cross-entropy to B's outputs (soft) or to the labels, plus the L1 and CKA
    penalties; records the similarity trace every ``track_every`` steps (before the step)."""

    def __init__(
        self, settings: TaskLossSettings, needs_targets: bool, device: torch.device, trace: SimilarityTrace | None
    ):
        self.settings = settings
        self.needs_targets = needs_targets
        self.device = device
        self.trace = trace
        self.steps = 0

    def __call__(self, model: StitchedModel, batch: tuple) -> dict[str, torch.Tensor]:
        settings = self.settings
        if self.trace is not None and self.steps % settings.track_every == 0:
            self.trace.record(self.steps)
        self.steps += 1
        inputs = to_model(model.model_a, batch[0] if isinstance(batch, (tuple, list)) else batch)
        if self.needs_targets:
            with torch.no_grad():
                reference = model.model_b(inputs)
        else:
            reference = batch[1].to(self.device)
        logits = model(inputs)
        if settings.target == "soft":
            task = soft_cross_entropy(logits, reference, settings.temperature)
            agreement = (logits.argmax(1) == reference.argmax(1)).float().mean()
            out = {"cross_entropy": task, "agreement": agreement}
        else:
            task = F.cross_entropy(logits, reference)
            out = {"cross_entropy": task, "accuracy": (logits.argmax(1) == reference).float().mean()}
        loss = task
        if settings.l1:
            coef, _ = affine_map(model.stitching_layer)
            loss = loss + settings.l1 * coef.abs().mean()
        if settings.cka_penalty:
            similarity = cka(model.last_stitched.flatten(1), model.last_activation_b.flatten(1))
            loss = loss + settings.cka_penalty * similarity
            out["cka"] = similarity
        out["loss"] = loss
        return out


def train_layer(
    stitched: StitchedModel,
    objective: TaskLossObjective,
    batches: Any,
    settings: TaskLossSettings,
    *,
    eval_data: Any = None,
    progress: Any = True,
) -> list[dict[str, float]]:
    """The training loop on the stitching layer's parameters only: Adam, the reference step schedule (when the
    batches have a length), ``stitch_metrics`` on ``eval_data`` after every epoch; returns the history."""
    parameters = [p for p in stitched.stitching_layer.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=settings.lr, weight_decay=settings.weight_decay)
    scheduler = _step_schedule(optimizer, settings.epochs * len(batches)) if hasattr(batches, "__len__") else None
    evaluate = None
    if eval_data is not None:
        evaluate = _prefixed(lambda model: stitch_metrics(model, eval_data))
    stitched.keep_activations = bool(settings.cka_penalty)
    try:
        return fit(
            stitched,
            objective,
            batches,
            epochs=settings.epochs,
            optimizer=optimizer,
            seed=settings.seed,
            scheduler=scheduler,
            evaluate=evaluate,
            progress=progress,
            description=f"task loss {stitched.layer_a} -> {stitched.layer_b}",
        )
    finally:
        stitched.keep_activations = False
        stitched.last_stitched = stitched.last_activation_b = None


def _step_schedule(optimizer: torch.optim.Optimizer, total_steps: int) -> torch.optim.lr_scheduler.MultiStepLR:
    """The reference trainer's step function: learning rate x0.1 after 1/3 and after 2/3 of the training."""
    milestones = [max(1, round(total_steps / 3)), max(1, round(2 * total_steps / 3))]
    return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=milestones, gamma=0.1)


def _prefixed(evaluate: Callable[[nn.Module], dict[str, float]]) -> Callable[[nn.Module], dict[str, float]]:
    return lambda model: {f"eval_{name}": value for name, value in evaluate(model).items()}
