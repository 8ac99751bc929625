"""Reading features through a trained head: batch-wise predictions (the heads standardise over the batch) and the
relative head's anchors."""

from __future__ import annotations

import itertools

import numpy as np
import torch


def predict_in_batches(logits_of, x: torch.Tensor, batch: int = 32) -> np.ndarray:
    """Argmax of ``logits_of(chunk)`` over chunks of ``batch`` rows (a last chunk of one row joins the one before:
    the heads standardise over the batch)."""
    bounds = [*range(0, len(x), batch), len(x)]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] == 1:
        bounds.pop(-2)
    with torch.no_grad():
        return torch.cat([logits_of(x[a:b]).argmax(dim=1) for a, b in itertools.pairwise(bounds)]).numpy()


def head_reader(head: torch.nn.Module, anchors: torch.Tensor | None):
    """``features -> logits`` of a head: a relative head reads them through ``anchors`` (the anchor embeddings of
    the encoder that produced the features), an absolute head as they are."""
    head.eval()
    if anchors is None:
        return head
    return lambda x: head(x, anchors=anchors)
