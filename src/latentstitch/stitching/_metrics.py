"""How a stitched network does: its metrics against model B (relative accuracy, agreement, cross-entropy), and the
similarity between its stitched activations and B's own traced along training."""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional as F

from latentstitch._core.arrays import channels_as_rows
from latentstitch._core.least_squares import residual_r2
from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import check_positive, check_positive_int
from latentstitch.similarity import cka
from latentstitch.stitching._data import in_memory, iter_batches
from latentstitch.stitching._hooks import capture, eval_mode, to_model
from latentstitch.stitching._layers import affine_map
from latentstitch.stitching._model import StitchedModel


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


class SimilarityTrace:
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


def probe_inputs(data: Any, probe: Any) -> torch.Tensor:
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
