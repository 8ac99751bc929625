"""What ``fit`` is told, checked once: the optimisation options (``Optimisation``) and what is kept of a run
(``RunOutputs``: the JSON-lines log, the checkpoints, the per-epoch callback)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from latentstitch._core.atomic import append_text
from latentstitch._core.params import check_positive, check_positive_int, check_seed
from latentstitch.training._checkpoint import writable_folder


@dataclass(frozen=True)
class Optimisation:
    """The optimisation options of a training run (see ``fit``), validated by ``checked``."""

    epochs: int
    lr: float = 1e-3
    seed: int | None = 0
    grad_clip: float | None = None
    accumulate: int = 1

    @classmethod
    def checked(cls, *, epochs: Any, lr: Any, seed: Any, grad_clip: Any, accumulate: Any) -> Optimisation:
        """The options with their types and ranges checked, each error naming its option."""
        epochs = check_positive_int(epochs, "epochs", minimum=0)
        accumulate = check_positive_int(accumulate, "accumulate")
        lr = check_positive(lr, "lr")
        grad_clip = None if grad_clip is None else check_positive(grad_clip, "grad_clip")
        seed = check_seed(seed, allow_none=True)
        return cls(epochs, lr, seed, grad_clip, accumulate)


class Stepper:
    """Optimiser steps: clip the gradients' global norm, step, zero the gradients, step the scheduler; counts them."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any, grad_clip: float | None):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.grad_clip = grad_clip
        self.steps = 0

    def __call__(self) -> None:
        if self.grad_clip is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad()
        if self.scheduler is not None:
            self.scheduler.step()
        self.steps += 1


@dataclass(frozen=True)
class RunOutputs:
    """What is kept of every epoch besides the returned history: a JSON-lines log, checkpoints (every
    ``checkpoint_every`` epochs and after the last), and a callback."""

    checkpoint_dir: Path | None = None
    checkpoint_every: int | None = None
    log_path: Path | None = None
    on_epoch: Callable[[int, dict[str, float]], None] | None = None

    @classmethod
    def checked(
        cls,
        checkpoint_dir: str | Path | None,
        checkpoint_every: Any,
        log_path: str | Path | None,
        on_epoch: Callable[[int, dict[str, float]], None] | None,
    ) -> RunOutputs:
        """The outputs, with their folders created (or refused) before any training, not after the first epoch."""
        if checkpoint_every is not None:
            checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
        folder = None if checkpoint_dir is None else Path(checkpoint_dir)
        if folder is not None:
            writable_folder(folder, "checkpoint_dir")
        log_file = None if log_path is None else Path(log_path)
        if log_file is not None:
            writable_folder(log_file.parent, "log_path")
        return cls(folder, checkpoint_every, log_file, on_epoch)

    def after_epoch(self, record: dict[str, float], *, last: bool, checkpoint: Callable[[Path], Any]) -> None:
        """Log the epoch's record, checkpoint when it is due (``checkpoint(folder)`` writes it), call
        ``on_epoch``."""
        epoch = int(record["epoch"])
        if self.log_path is not None:
            append_text(self.log_path, json.dumps(record) + "\n", option="log_path")  # whole lines, even if killed
        if self.checkpoint_dir is not None and (
            last or (self.checkpoint_every and (epoch + 1) % self.checkpoint_every == 0)
        ):
            checkpoint(self.checkpoint_dir)
        if self.on_epoch is not None:
            self.on_epoch(epoch, record)
