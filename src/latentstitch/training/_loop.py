"""One seeded training loop for every model of the library: classifiers, autoencoders, heads and graph networks.

``fit`` checks what it is told (``Optimisation``, ``RunOutputs``), then runs ``train_epoch`` once per epoch and
keeps each epoch's record (log, checkpoint, callback)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from latentstitch._core.progress import progress_bar
from latentstitch.training._checkpoint import save_checkpoint
from latentstitch.training._settings import Optimisation, RunOutputs, Stepper

LossOutput = torch.Tensor | Mapping[str, Any] | None
LossFunction = Callable[[nn.Module, Any], LossOutput]


def fit(
    model: nn.Module,
    loss_fn: LossFunction,
    batches: Iterable,
    *,
    epochs: int,
    optimizer: torch.optim.Optimizer | None = None,
    lr: float = 1e-3,
    seed: int | None = 0,
    grad_clip: float | None = None,
    accumulate: int = 1,
    scheduler: Any = None,
    evaluate: Callable[[nn.Module], Mapping[str, float]] | None = None,
    progress: Any = True,
    description: str = "train",
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int | None = None,
    log_path: str | Path | None = None,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
) -> list[dict[str, float]]:
    """Train ``model`` for ``epochs`` passes over ``batches``; return one record of metrics per epoch.

    Parameters
    ----------
    model : nn.Module
        Put in train mode at the start of every epoch and left in eval mode at the end.
    loss_fn : callable ``(model, batch) -> loss``
        ``loss`` is a scalar tensor, a mapping with a ``"loss"`` tensor and any other metrics to log (tensors or
        numbers), or ``None`` for a forward-only batch that takes no gradient (e.g. the batch-norm statistics
        batch of ``ClassAccumulationSampler``). Ready-made: ``classification_loss``, ``ClassificationObjective``,
        the autoencoders' ``reconstruction_objective``.
    batches : iterable
        Re-iterated every epoch: a ``TensorBatches``, a ``DataLoader``, or a list (e.g. ``[full_graph]`` for
        full-batch training). Seed its sampler for a reproducible data order.
    optimizer : torch.optim.Optimizer, optional
        Default ``Adam(model.parameters(), lr)``.
    seed : int or None
        Seeds torch's global generator at the start (dropout, VAE noise, anything drawing from it). Initialise the
        model under ``torch.manual_seed`` too: the same seeds then give the same losses, bit for bit, on a CPU.
    grad_clip : float, optional
        Clip the gradients' global 2-norm before each optimiser step (the relreps AE runs use 10).
    accumulate : int
        One optimiser step every ``accumulate`` batches (forward-only batches included), each loss divided by
        ``accumulate``, as in PyTorch Lightning's ``accumulate_grad_batches``. A partial window at the end of an
        epoch still steps.
    scheduler : optional
        A learning-rate scheduler stepped after every optimiser step.
    evaluate : callable ``model -> {name: value}``, optional
        Run after every epoch under ``torch.no_grad()`` with the model in eval mode; its values join the record.
    progress : bool or rich.progress.Progress
        A progress bar (rich) over the batches of all epochs, showing the running loss; pass an open ``Progress``
        to add a task to it.
    checkpoint_dir : path, optional
        Where ``save_checkpoint`` writes the model and optimiser (safetensors) and the history (JSON): after every
        ``checkpoint_every`` epochs and after the last, each overwriting the previous (the last checkpoint is what
        the papers' runs kept). Training can resume from it with ``load_checkpoint`` and a new ``fit`` call
        (with the data order of a new run of the samplers).
    log_path : path, optional
        Every epoch's record is appended to this JSON-lines file.
    on_epoch : callable ``(epoch, record)``, optional
        Called after every epoch.

    Returns
    -------
    list of dict
        Per epoch: ``epoch``, ``step`` (optimiser steps so far), ``lr``, ``seconds``, and the mean over the epoch
        of ``loss`` and of every other metric ``loss_fn`` returned, weighted by batch size (the length of the
        batch's first tensor; 1 for other batches). Forward-only batches are not counted.
    """
    if not callable(loss_fn):
        raise TypeError(f"loss_fn: expected a function (model, batch) -> loss, got {loss_fn!r}")
    if not isinstance(batches, Iterable) or isinstance(batches, (str, bytes)):
        raise TypeError(f"batches: expected a re-iterable collection of batches, got {type(batches).__name__}")
    options = Optimisation.checked(epochs=epochs, lr=lr, seed=seed, grad_clip=grad_clip, accumulate=accumulate)
    outputs = RunOutputs.checked(checkpoint_dir, checkpoint_every, log_path, on_epoch)
    if options.seed is not None:
        torch.manual_seed(options.seed)
    if optimizer is None:
        optimizer = torch.optim.Adam(model.parameters(), lr=options.lr)
    stepper = Stepper(model, optimizer, scheduler, options.grad_clip)
    history: list[dict[str, float]] = []
    with progress_bar(progress) as bar:
        show = _progress(bar, description, options.epochs, batches)
        for epoch in range(options.epochs):
            started = time.perf_counter()
            means = train_epoch(model, loss_fn, batches, stepper, options.accumulate, epoch, show)
            record = {"epoch": epoch, "step": stepper.steps, **means, "lr": optimizer.param_groups[0]["lr"]}
            record.update(_evaluation(model, evaluate))
            record["seconds"] = round(time.perf_counter() - started, 3)
            history.append(record)

            def checkpoint(folder: Path, epoch: int = epoch) -> None:
                metadata = {"epoch": epoch, "step": stepper.steps, "seed": options.seed, "history": history}
                save_checkpoint(folder, model, optimizer, metadata)

            outputs.after_epoch(record, last=epoch == options.epochs - 1, checkpoint=checkpoint)
    model.eval()
    return history


def train_epoch(
    model: nn.Module,
    loss_fn: LossFunction,
    batches: Iterable,
    step: Stepper,
    accumulate: int,
    epoch: int,
    show: Callable[[int, dict[str, float], float], None] | None = None,
) -> dict[str, float]:
    """One pass over ``batches`` in train mode, an optimiser step every ``accumulate`` batches (and after a partial
    window at the end); the batch-size-weighted mean of every metric (``{"loss": nan}`` when every batch was
    forward-only). ``show(epoch, totals, weight)`` after every batch."""
    model.train()
    totals: dict[str, float] = {}
    weight = 0.0
    pending = False
    step.optimizer.zero_grad()
    index = -1
    for index, batch in enumerate(batches):
        output = loss_fn(model, batch)
        if output is not None:
            loss, metrics = _split_output(output)
            if not torch.isfinite(loss.detach()):
                raise FloatingPointError(f"loss is {loss.item()} at epoch {epoch}, batch {index}")
            (loss / accumulate).backward()
            pending = True
            size = _batch_size(batch)
            weight += size
            for name, value in metrics.items():
                totals[name] = totals.get(name, 0.0) + value * size
        if (index + 1) % accumulate == 0 and pending:
            step()
            pending = False
        if show is not None:
            show(epoch, totals, weight)
    if pending:
        step()
    if index < 0:
        raise ValueError(f"batches: yielded no batch in epoch {epoch}; nothing was trained")
    return {name: total / weight for name, total in totals.items()} if weight else {"loss": math.nan}


def _progress(bar: Any, description: str, epochs: int, batches: Iterable) -> Callable | None:
    """What ``train_epoch`` calls after every batch to advance the bar with the running loss (None: no bar)."""
    if bar is None:
        return None
    task = bar.add_task(description, total=epochs * len(batches) if hasattr(batches, "__len__") else None)

    def show(epoch: int, totals: dict[str, float], weight: float) -> None:
        shown = f"{description} epoch {epoch + 1}/{epochs}"
        if weight:
            shown += f" loss {totals['loss'] / weight:.4g}"
        bar.update(task, advance=1, description=shown)

    return show


def _evaluation(model: nn.Module, evaluate: Callable[[nn.Module], Mapping[str, float]] | None) -> dict[str, float]:
    if evaluate is None:
        return {}
    model.eval()
    with torch.no_grad():
        return {name: float(value) for name, value in evaluate(model).items()}


def _split_output(output: torch.Tensor | Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
    if isinstance(output, torch.Tensor):
        loss, extra = output, {}
    elif isinstance(output, Mapping):
        if "loss" not in output:
            raise KeyError(f"loss_fn: the returned mapping has no 'loss' entry (keys: {sorted(output)})")
        loss, extra = output["loss"], {k: v for k, v in output.items() if k != "loss"}
    else:
        raise TypeError(f"loss_fn: expected a tensor, a mapping with 'loss', or None; got {type(output).__name__}")
    if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
        raise ValueError("loss_fn: the loss must be a scalar tensor")
    metrics = {"loss": float(loss.detach())}
    metrics.update(
        {name: float(value.detach() if isinstance(value, torch.Tensor) else value) for name, value in extra.items()}
    )
    return loss, metrics


def _batch_size(batch: Any) -> int:
    first = batch
    if isinstance(batch, (tuple, list)) and batch:
        first = batch[0]
    elif isinstance(batch, Mapping) and batch:
        first = next(iter(batch.values()))
    return len(first) if isinstance(first, torch.Tensor) and first.ndim > 0 else 1
