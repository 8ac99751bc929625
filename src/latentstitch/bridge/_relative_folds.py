"""Relative routes in the bridge's cross-validation: the all-anchor products every fold downdates.

A relative vector's coordinates are similarities to the training anchors, so the cosine between a
bridged query's relative vector and a target item's is ``phi(x)^T M phi(y) / (|r_s(x)| |r_t(y)|)`` with
``M = Phi_s^T Phi_t`` over the training anchors (p x q), where ``phi`` normalises a row (after centring, or after
the robust per-feature standardisation). The products are taken once per part of the k-fold split; ``M`` of a
fold is the all-anchor sum less its held-out part's (a downdate without another product), so all three relative
routes cost a few p x q products per fit instead of N x N similarity matrices per fold. Below ``EXACT_NORMS`` the
target items' exact relative norms over a fold's training anchors come the same way, from per-part sums of squared
similarities (one N x N x q pass per fit). While cross-validating, ``phi``'s centre and feature scales are the
all-anchor statistics (label-free; the anchor set itself is the fold's), and above ``EXACT_NORMS`` multiply-adds the
target items' relative norms come from the all-anchor Gram matrix (the held-out rows' share of every norm is near the
same fraction, which does not change the ranking much).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from latentstitch._core.numerics import matmul
from latentstitch.bridge._folds import Candidate, Fold
from latentstitch.relative import SPREAD_FLOOR, floored_spread

#: Above this many multiply-adds (N items x training anchors x target features) a relative route's target norms
#: are taken from the all-anchor Gram matrix while cross-validating.
EXACT_NORMS = 1e9


@dataclass
class RelativeCache:
    """Per relative variant, the all-anchor products the folds downdate (built lazily, once per fit). With the
    anchors' folds (``parts``), the products are taken part by part and summed, so a fold's downdate is a
    subtraction of its own part's products, not another product over its rows. ``extra``: target vectors of other
    items (``Bridge.fit(target_pool=...)``), scored as items of the pool after the anchors, never used as anchors;
    ``phi`` of them takes the anchors' centre and feature scales."""

    source: torch.Tensor  # compute dtype
    target: torch.Tensor
    parts: list[np.ndarray] | None = None
    extra: torch.Tensor | None = None
    _phi: dict[str, Any] = field(default_factory=dict)

    def phi(self, variant: str) -> tuple[Any, ...]:
        """(phi of every source anchor, of every target item (the anchors, then ``extra``), M over all anchors, the
        source's Gram matrix ``Phi_s^T Phi_t`` over all anchors, and per part its (M, Gram) or None)."""
        if variant not in self._phi:
            s = _phi(self.source, variant)
            items = self.target if self.extra is None else torch.cat([self.target, self.extra.to(self.target.dtype)])
            t = _phi(items, variant, reference=self.target)
            anchors = t[: len(self.target)]
            per_part = None
            if self.parts is not None:
                per_part = []
                for rows in self.parts:
                    index = torch.as_tensor(rows, device=s.device)
                    si, ti = s[index], anchors[index]
                    per_part.append((matmul(si.T, ti), matmul(si.T, si)))
                m, gram = sum(pm for pm, _ in per_part), sum(pg for _, pg in per_part)
            else:
                m, gram = matmul(s.T, anchors), matmul(s.T, s)
            self._phi[variant] = (s, t, m, gram, per_part)
        return self._phi[variant]

    def norms(self, variant: str) -> torch.Tensor:
        """Every target item's relative-vector norm over all anchors (from the anchors' Gram matrix ``T^T T``)."""
        key = variant + ":norms"
        if key not in self._phi:
            t = self.phi(variant)[1]
            anchors = t[: len(self.target)]
            self._phi[key] = (matmul(t, matmul(anchors.T, anchors)) * t).sum(dim=1).clamp(min=0).sqrt()
        return self._phi[key]

    def part_squares(self, variant: str) -> list[torch.Tensor]:
        """Per part, every target item's squared relative coordinates over that part's anchors, summed: a fold's
        exact norms are the square root of the total less its own part's."""
        key = variant + ":parts"
        if key not in self._phi:
            t = self.phi(variant)[1]
            self._phi[key] = [
                matmul(t, t[torch.as_tensor(rows, device=t.device)].T).pow(2).sum(dim=1) for rows in self.parts
            ]
        return self._phi[key]


def _phi(x: torch.Tensor, variant: str, reference: torch.Tensor | None = None) -> torch.Tensor:
    """Rows of ``x`` centred (and for "robust" standardised) by the statistics of ``reference`` (default ``x``),
    then normalised."""
    reference = x if reference is None else reference
    if variant == "centered":
        x = x - reference.mean(dim=0)
    elif variant == "robust":
        x = (x - reference.mean(dim=0)) / floored_spread(reference.std(dim=0, correction=0), SPREAD_FLOOR)
    return x / torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp(min=1e-30)


def relative_candidates(fold: Fold, variant: str) -> list[Candidate]:
    """Similarity rows (queries x all N target items of the pool) of a relative route: cosine (``"plain"``), centred
    (``"centered"``) or robust (``"robust"``) relative vectors over the fold's training anchors."""
    s, t, m_all, gram_all, per_part = fold.relative.phi(variant)
    n, items = s.shape[0], t.shape[0]
    train = torch.as_tensor(fold.train, device=s.device)
    if per_part is not None and fold.part is not None:
        m, gram = m_all - per_part[fold.part][0], gram_all - per_part[fold.part][1]
    elif len(fold.train) * 2 < n:
        m, gram = matmul(s[train].T, t[train]), matmul(s[train].T, s[train])
    else:
        rest = torch.as_tensor(np.setdiff1d(np.arange(n), fold.train), device=s.device)
        m, gram = m_all - matmul(s[rest].T, t[rest]), gram_all - matmul(s[rest].T, s[rest])
    if items * len(fold.train) * t.shape[1] > EXACT_NORMS:
        norms = fold.relative.norms(variant) * np.sqrt(len(fold.train) / n)
    elif per_part is not None and fold.part is not None:
        squares = fold.relative.part_squares(variant)
        norms = (sum(squares) - squares[fold.part]).clamp(min=0).sqrt()
    else:
        norms = torch.linalg.vector_norm(matmul(t, t[train].T), dim=1)
    queries = s[torch.as_tensor(fold.queries, device=s.device)]
    query_norms = (matmul(queries, gram) * queries).sum(dim=1).clamp(min=0).sqrt()
    return [({}, matmul(matmul(queries, m), t.T) / norms.clamp(min=1e-30) / query_norms[:, None].clamp(min=1e-30))]
