"""Task-loss matching (Csiszárik et al. 2021, Sec. 4.1): train only the stitching layer through the frozen networks,
and the metrics of a stitched network (relative accuracy, agreement and cross-entropy to model B)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from latentstitch._core.arrays import channels_as_rows
from latentstitch._core.moments import CrossMoments, residual_r2
from latentstitch._core.params import check_choice, check_nonnegative, check_positive, check_positive_int, check_seed
from latentstitch.similarity import cka
from latentstitch.stitching._activations import capture, eval_mode, in_memory, iter_batches, model_device, to_model
from latentstitch.stitching._stitch import LowRankStitch, StitchedModel, affine_map
from latentstitch.training import RandomBatchSampler, TensorBatches, fit

#: What the stitched network is trained to output: the true labels, or model B's outputs as soft labels.
TARGETS = ("labels", "soft")


def soft_cross_entropy(logits: torch.Tensor, target_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``mean_n sum_c softmax(t_n / T)_c * (-log_softmax(o_n / T)_c)``: cross-entropy of the outputs ``o`` against
    the soft labels of the target outputs ``t`` at temperature ``T`` (the reference code's ``SoftCrossEntropy``;
    Hinton et al. 2015 without the T^2 factor). Equals ``F.cross_entropy(o / T, softmax(t / T))``."""
    temperature = check_positive(temperature, "temperature")
    if logits.shape != target_logits.shape or logits.ndim != 2:
        raise ValueError(
            f"logits, target_logits: expected two (N, classes) tensors of one shape, got {tuple(logits.shape)} and "
            f"{tuple(target_logits.shape)}"
        )
    target = F.softmax(target_logits.detach() / temperature, dim=1)
    return -(target * F.log_softmax(logits / temperature, dim=1)).sum(dim=1).mean()


# --- metrics --------------------------------------------------------------------------------------------------------


@torch.no_grad()
def stitch_metrics(stitched: StitchedModel, data: Any, *, batch_size: int = 512) -> dict[str, float]:
    """How well the stitched network does, and how close it is to model B, over ``data`` (eval mode, no gradient).

    Returns
    -------
    dict with
        ``agreement``: share of samples where the stitched network and model B predict the same class;
        ``cross_entropy``: ``mean_n sum_c -p_B(c|x_n) log p_F(c|x_n)`` (softmax outputs; the reference code also
        averaged over the classes, i.e. divided this by their number);
        and when ``data`` has labels: ``accuracy`` (stitched), ``accuracy_b`` (model B), ``relative_accuracy`` =
        accuracy / accuracy_b (the paper's main figure; NaN if model B gets nothing right).
    """
    correct = correct_b = same = 0
    total_ce = 0.0
    count = 0
    labelled = True
    batch_size = check_positive_int(batch_size, "batch_size")
    with eval_mode(stitched):
        for inputs, labels in iter_batches(data, batch_size):
            inputs = to_model(stitched.model_a, inputs)
            logits = stitched(inputs)
            logits_b = stitched.model_b(to_model(stitched.model_b, inputs)).to(logits.device)
            predicted, predicted_b = logits.argmax(dim=1), logits_b.argmax(dim=1)
            same += int((predicted == predicted_b).sum())
            total_ce += float(soft_cross_entropy(logits.double(), logits_b.double())) * len(inputs)
            count += len(inputs)
            if labels is None:
                labelled = False
            else:
                labels = labels.to(logits.device)
                correct += int((predicted == labels).sum())
                correct_b += int((predicted_b == labels).sum())
    metrics = {"agreement": same / count, "cross_entropy": total_ce / count}
    if labelled:
        metrics.update(
            {
                "accuracy": correct / count,
                "accuracy_b": correct_b / count,
                "relative_accuracy": correct / correct_b if correct_b else float("nan"),
            }
        )
    return metrics


# --- tracking similarity along training -------------------------------------------------------------------------------


class _SimilarityTrace:
    """CKA and R^2 between the stitched activations and B's own, and cross-entropy / agreement to B, on a fixed probe
    set, recomputed from the current stitching layer (A and B are frozen, so their activations are computed once)."""

    def __init__(self, stitched: StitchedModel, probe: torch.Tensor):
        self.stitched = stitched
        self.inputs = to_model(stitched.model_a, probe)
        with torch.no_grad(), eval_mode(stitched):
            self.a = capture(stitched.model_a, self.inputs, [stitched.layer_a])[stitched.layer_a]
            self.b = capture(stitched.model_b, self.inputs, [stitched.layer_b])[stitched.layer_b]
            self.logits_b = stitched.model_b(self.inputs)
        self.moments = CrossMoments(products=("aa", "ab", "bb")).update(
            channels_as_rows(self.a, "a"), channels_as_rows(self.b, "b")
        )
        self.records: list[dict[str, float]] = []

    @torch.no_grad()
    def record(self, step: int) -> None:
        layer = self.stitched.stitching_layer
        coef, intercept = affine_map(layer)
        device = self.moments.ab.device
        coef, intercept = (t.detach().to(device, torch.float64) for t in (coef, intercept))
        r2 = residual_r2(self.moments, coef, intercept)
        was_training = layer.training
        layer.eval()
        stitched = layer(self.a)
        layer.train(was_training)
        logits = self.stitched.continue_b(self.inputs, stitched)
        self.records.append(
            {
                "step": step,
                "cka": float(cka(stitched.flatten(1).double(), self.b.flatten(1).double())),
                "r2": r2,
                "cross_entropy": float(soft_cross_entropy(logits.double(), self.logits_b.double())),
                "agreement": float((logits.argmax(1) == self.logits_b.argmax(1)).double().mean()),
            }
        )


# --- training -------------------------------------------------------------------------------------------------------


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


def _step_schedule(optimizer: torch.optim.Optimizer, total_steps: int) -> torch.optim.lr_scheduler.MultiStepLR:
    """The reference trainer's step function: learning rate x0.1 after 1/3 and after 2/3 of the training."""
    milestones = [max(1, round(total_steps / 3)), max(1, round(2 * total_steps / 3))]
    return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=milestones, gamma=0.1)


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
    check_choice(target, "target", TARGETS)
    check_positive(temperature, "temperature")
    check_nonnegative(l1, "l1")
    check_nonnegative(cka_penalty, "cka_penalty")
    epochs = check_positive_int(epochs, "epochs")
    lr = check_positive(lr, "lr")
    weight_decay = check_nonnegative(weight_decay, "weight_decay")
    seed = check_seed(seed)
    batch_size = check_positive_int(batch_size, "batch_size")
    if rank is not None:
        rank = check_positive_int(rank, "rank")
        if l1:
            raise ValueError("l1: the L1 penalty applies to full stitching matrices; it cannot be combined with rank")
    if track_every is not None:
        track_every = check_positive_int(track_every, "track_every")

    layer = stitched.stitching_layer
    needs_rank = rank is not None and not (isinstance(layer, LowRankStitch) and layer.rank == rank)
    if init is not None or layer is None or needs_rank:
        stitched.initialize("least_squares" if init is None else init, data=data, rank=rank, seed=seed)
    elif rank is None and isinstance(layer, LowRankStitch) and l1:
        raise ValueError("l1: the stitching layer is low-rank; the L1 penalty applies to full stitching matrices")

    batches, needs_targets = _training_batches(stitched, data, target, batch_size, seed)
    device = model_device(stitched.model_a)
    trace = _SimilarityTrace(stitched, _probe_inputs(data, probe)) if track_every is not None else None
    steps = 0

    def loss_fn(model: StitchedModel, batch: tuple) -> dict[str, torch.Tensor]:
        nonlocal steps
        if trace is not None and steps % track_every == 0:
            trace.record(steps)
        steps += 1
        inputs = to_model(model.model_a, batch[0] if isinstance(batch, (tuple, list)) else batch)
        if needs_targets:
            with torch.no_grad():
                reference = model.model_b(inputs)
        else:
            reference = batch[1].to(device)
        logits = model(inputs)
        if target == "soft":
            task = soft_cross_entropy(logits, reference, temperature)
            agreement = (logits.argmax(1) == reference.argmax(1)).float().mean()
            out = {"cross_entropy": task, "agreement": agreement}
        else:
            task = F.cross_entropy(logits, reference)
            out = {"cross_entropy": task, "accuracy": (logits.argmax(1) == reference).float().mean()}
        loss = task
        if l1:
            coef, _ = affine_map(model.stitching_layer)
            loss = loss + l1 * coef.abs().mean()
        if cka_penalty:
            similarity = cka(model.last_stitched.flatten(1), model.last_activation_b.flatten(1))
            loss = loss + cka_penalty * similarity
            out["cka"] = similarity
        out["loss"] = loss
        return out

    parameters = [p for p in stitched.stitching_layer.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=lr, weight_decay=weight_decay)
    scheduler = _step_schedule(optimizer, epochs * len(batches)) if hasattr(batches, "__len__") else None
    evaluate = None
    if eval_data is not None:
        evaluate = _prefixed(lambda model: stitch_metrics(model, eval_data))
    stitched.keep_activations = bool(cka_penalty)
    try:
        history = fit(
            stitched,
            loss_fn,
            batches,
            epochs=epochs,
            optimizer=optimizer,
            seed=seed,
            scheduler=scheduler,
            evaluate=evaluate,
            progress=progress,
            description=f"task loss {stitched.layer_a} -> {stitched.layer_b}",
        )
    finally:
        stitched.keep_activations = False
        stitched.last_stitched = stitched.last_activation_b = None
    if trace is not None:
        trace.record(steps)
    return TaskLossResult(stitched, history, trace.records if trace is not None else [])


def _prefixed(evaluate: Callable[[nn.Module], dict[str, float]]) -> Callable[[nn.Module], dict[str, float]]:
    return lambda model: {f"eval_{name}": value for name, value in evaluate(model).items()}


def _training_batches(stitched: StitchedModel, data: Any, target: str, batch_size: int, seed: int):
    """Re-iterable training batches and whether the loss must compute B's outputs per batch."""
    memory = in_memory(data)
    if memory is None:
        if target == "labels":
            return data, False
        return data, True
    inputs, labels = memory
    if target == "labels":
        if labels is None:
            raise ValueError('data: target="labels" needs (inputs, labels); give labels or use target="soft"')
        second = labels.long()
    else:
        with torch.no_grad(), eval_mode(stitched.model_b):
            second = torch.cat(
                [stitched.model_b(to_model(stitched.model_b, x)).cpu() for x, _ in iter_batches(inputs, 512)]
            )
    drop_last = len(inputs) >= batch_size
    sampler = RandomBatchSampler(len(inputs), batch_size, drop_last=drop_last, seed=seed)
    return TensorBatches((inputs, second), sampler), False


def _probe_inputs(data: Any, probe: Any) -> torch.Tensor:
    if probe is not None:
        memory = in_memory(probe)
        if memory is None:
            raise TypeError("probe: expected an array or tensor of inputs")
        return memory[0]
    memory = in_memory(data)
    if memory is not None:
        return memory[0][:512]
    collected, count = [], 0
    for inputs, _ in iter_batches(data):
        collected.append(inputs)
        count += len(inputs)
        if count >= 512:
            break
    return torch.cat(collected)[:512]
