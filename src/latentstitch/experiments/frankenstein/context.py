"""What every Frankenstein experiment shares: the data, the base networks (trained once, on demand), the task-loss
settings, and the figure helpers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from latentstitch._core.figures import save_figure
from latentstitch.data import load_fashion_mnist
from latentstitch.experiments._checkpoint import Checkpoint
from latentstitch.experiments.frankenstein.config import Config
from latentstitch.models import accuracy, tiny10, train_classifier
from latentstitch.stitching import stitch_metrics


class Context:
    """Data, base networks and the stitching settings every experiment uses; ``stage(text)`` reports progress;
    ``checkpoint`` keeps the trained base networks (and the run's finished stages) of a run that may be resumed;
    ``device``: where the data, the networks and every stitching layer live (networks are built on the CPU, so
    they start from the same weights on every device)."""

    def __init__(
        self,
        config: Config,
        stage: Callable[[str], None],
        checkpoint: Checkpoint | None = None,
        device: str | torch.device = "cpu",
    ):
        self.config = config
        self.device = torch.device(device)
        self.stage = stage
        self.checkpoint = checkpoint if checkpoint is not None else Checkpoint(None, {}, resume=False)
        data = load_fashion_mnist(n_train=config.n_train, n_test=config.n_test, seed=0)
        self.x_train = torch.from_numpy(data.x_train).to(self.device)
        self.y_train = torch.from_numpy(data.y_train).to(self.device)
        self.x_test = torch.from_numpy(data.x_test).to(self.device)
        self.y_test = torch.from_numpy(data.y_test).to(self.device)
        self.stitch_data = (self.x_train[: config.n_stitch], self.y_train[: config.n_stitch])
        self.direct_data = self.x_train[: config.n_direct]
        self.eval_data = (self.x_test, self.y_test)
        self.probe = self.x_test[:512]
        self.models: dict[tuple[float, int], nn.Module] = {}
        self.base_accuracy: dict[tuple[float, int], float] = {}

    def model(self, width: float, seed: int) -> nn.Module:
        """Tiny-10 at ``width`` trained from ``seed`` (trained on first use)."""
        if (width, seed) not in self.models:

            def train() -> dict[str, torch.Tensor]:
                self.stage(f"training Tiny-10 x{width:g} seed {seed}")
                torch.manual_seed(seed)
                model = tiny10(width).to(self.device)
                train_classifier(
                    model,
                    self.x_train,
                    self.y_train,
                    epochs=self.config.base_epochs,
                    batch_size=self.config.base_batch,
                    seed=seed,
                )
                return {name: tensor.cpu() for name, tensor in model.state_dict().items()}

            model = tiny10(width)
            model.load_state_dict(self.checkpoint.tensors(f"base_x{width:g}_seed{seed}", train))
            model.to(self.device)
            self.models[width, seed] = model
            self.base_accuracy[width, seed] = accuracy(model, self.x_test, self.y_test)
        return self.models[width, seed]

    def pair(self, width: float | None = None) -> tuple[nn.Module, nn.Module]:
        """Models A and B of the main pair (seed 0 -> seed 1) at ``width`` (default: the main width)."""
        width = self.config.width if width is None else width
        a, b = self.config.seeds
        return self.model(width, a), self.model(width, b)

    def task_loss(self, *, sweep: bool = False, **options: Any) -> dict[str, Any]:
        """``fit_task_loss`` options shared by every run (overridable): the long budget, or the sweeps' one."""
        epochs = self.config.sweep_epochs if sweep else self.config.stitch_epochs
        base = {"epochs": epochs, "batch_size": self.config.stitch_batch, "progress": False}
        return {**base, **options}

    def metrics(self, stitched: Any) -> dict[str, float]:
        """``stitch_metrics`` on the evaluation images (relative accuracy, cross-entropy to B...)."""
        return stitch_metrics(stitched, self.eval_data)


def new_figure(width: float, height: float, columns: int = 1):
    """A matplotlib Figure (no pyplot state) with ``columns`` axes in one row."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    axes = figure.subplots(1, columns, squeeze=False)[0]
    return figure, list(axes)


def save(figure: Any, path: Path) -> str:
    figure.tight_layout()
    return save_figure(figure, path)


def interpolated(points: list[tuple[float, float]], at: float) -> float | None:
    """Relative accuracy at sparsity ``at`` by linear interpolation along a sparsity curve (None outside it)."""
    points = sorted(points)
    xs = [p[0] for p in points]
    if not points or at < xs[0] or at > xs[-1]:
        return None
    return float(np.interp(at, xs, [p[1] for p in points]))
