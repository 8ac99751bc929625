"""Predictions and macro-F1 of the trained classifiers."""

from __future__ import annotations

import numpy as np
import torch


@torch.no_grad()
def predict(model: torch.nn.Module, x: torch.Tensor, batch: int = 1000) -> np.ndarray:
    """Predicted classes (argmax of the logits) in eval mode, in batches."""
    model.eval()
    return torch.cat([model(x[i : i + batch]).argmax(dim=1) for i in range(0, len(x), batch)]).numpy()


def macro_f1_score(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(y_true, y_pred, average="macro"))


def macro_f1(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    return macro_f1_score(y.numpy(), predict(model, x))
