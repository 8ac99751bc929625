"""Label-free scores of a bridged set of vectors against their true partners, and their chance levels.

For n held-out anchor pairs, ``bridged[i]`` (the route's output for source vector i) should be closest to
``partner[i]`` (the target-side representation of the same item) among all n partners:

- ``top1``: the fraction of items whose own partner is the most cosine-similar of the n partners;
- ``mrr``: the mean reciprocal rank of the own partner (1 = always first; chance ``H_n / n``);
- ``cosine``: the mean cosine between bridged vectors and their partners;
- ``r2``: ``1 - sum |partner - bridged|^2 / sum |partner - mean partner|^2`` (variance-weighted R^2; reported for
  translation routes, whose output should equal the target vectors themselves);
- ``agreement``: with a head, the fraction of items on which the head's prediction from the bridged vector equals
  its prediction from the true target vector.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import as_float_tensor, to_numpy
from latentstitch._core.numerics import matmul, unit_rows

SCORES = ("top1", "mrr", "cosine", "r2")


def partner_ranks(bridged: torch.Tensor, partner: torch.Tensor) -> torch.Tensor:
    """Rank (1 = first) of each row's own partner among all partners by cosine similarity. Ties share the mean of
    their ranks, so a route that maps everything to one vector ranks every partner (n + 1) / 2, not first."""
    with torch.no_grad():
        scores = matmul(unit_rows(bridged.detach(), "bridged"), unit_rows(partner.detach(), "partner").T)
        own = scores.diagonal()[:, None]
        above = (scores > own).sum(dim=1).to(torch.float64)
        tied = (scores == own).sum(dim=1).to(torch.float64) - 1  # the own partner always ties with itself
        return 1 + above + tied / 2


def pair_scores(bridged: Any, partner: Any, *, per_item: bool = False) -> dict[str, Any]:
    """``top1``, ``mrr``, ``cosine`` and ``r2`` of bridged vectors against their partners (same shape, same items
    in the same order). Computed in float64. ``per_item``: also ``reciprocal_ranks``, one per item (numpy)."""
    b = as_float_tensor(bridged, "bridged", ndim=2).detach()
    p = as_float_tensor(partner, "partner", ndim=2).detach().to(device=b.device, dtype=b.dtype)
    ranks = partner_ranks(b, p)  # ranks in the vectors' own precision, the rest in float64
    b, p = b.to(torch.float64), p.to(torch.float64)
    cosine = (unit_rows(b, "bridged") * unit_rows(p, "partner")).sum(dim=1).mean()
    total = ((p - p.mean(dim=0)) ** 2).sum()
    r2 = 1.0 - ((p - b) ** 2).sum() / total if total > 0 else torch.tensor(float("nan"))
    scores: dict[str, Any] = {
        "top1": float((ranks == 1).to(torch.float64).mean()),
        "mrr": float((1.0 / ranks).mean()),
        "cosine": float(cosine),
        "r2": float(r2),
    }
    if per_item:
        scores["reciprocal_ranks"] = (1.0 / ranks).cpu().numpy()
    return scores


def derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A seeded permutation of ``range(n)`` that moves every item (each item gets another item's partner)."""
    order = rng.permutation(n)
    out = np.empty(n, dtype=np.int64)
    out[order] = np.roll(order, -1)
    return out


def chance_mrr(n: int) -> tuple[float, float]:
    """Mean and variance of ``1 / rank`` when the own partner's rank is uniform on 1..n, as it is for any route
    when the pairs carry no information (shuffled pairs): mean ``H_n / n``, variance ``(sum 1/r^2) / n - mean^2``."""
    reciprocal = 1.0 / np.arange(1, n + 1)
    mean = float(reciprocal.mean())
    return mean, float((reciprocal**2).mean() - mean**2)


def mrr_z_score(mrr_per_fold: list[float], sizes: list[int]) -> float:
    """How many standard errors the pooled held-out MRR lies above the shuffled-pairs (chance) MRR, pooling every
    held-out item of every fold (a fold of n items has its own chance level ``chance_mrr(n)``)."""
    total = sum(sizes)
    observed = sum(m * n for m, n in zip(mrr_per_fold, sizes, strict=True)) / total
    mean = sum(chance_mrr(n)[0] * n for n in sizes) / total
    variance = sum(chance_mrr(n)[1] * n for n in sizes) / total**2
    return (observed - mean) / math.sqrt(variance) if variance > 0 else 0.0


def predictions(head: Callable[[Any], Any], x: Any, name: str = "head") -> np.ndarray:
    """A head's predictions on ``x`` as a 1-D numpy array: its output as it is when 1-D (labels), the argmax of
    each row when 2-D (scores, logits, probabilities)."""
    try:
        out = head(x)
    except Exception as error:
        raise ValueError(
            f"{name}: calling it on {tuple(x.shape)} vectors failed ({type(error).__name__}: {error})"
        ) from error
    values = to_numpy(out, name) if isinstance(out, torch.Tensor) else np.asarray(out)
    if values.ndim == 2:
        values = values.argmax(axis=1)
    if values.ndim != 1 or values.shape[0] != x.shape[0]:
        raise ValueError(
            f"{name}: expected one prediction per row (a 1-D array of {x.shape[0]} labels or a 2-D array of scores "
            f"with {x.shape[0]} rows), got shape {values.shape}"
        )
    return values


def agreement(predicted: np.ndarray, reference: np.ndarray) -> float:
    return float(np.mean(predicted == reference))
