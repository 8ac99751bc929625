"""Comparing a translation route's parameter settings (the ridge path's penalties, the ranks) on the share of the
held-out anchors kept for it (``Anchors.param_rows``), computing only the score the choice reads: every setting's
bridged rows of a fold meet every target vector in one product (not one per setting), the partner's rank is a count
of larger similarities (MRR, top-1, Recall@k need no top-k), and R^2 needs no similarity at all. The same numbers as
``fold_scores`` on those rows (``tests/bridge/test_bridge_fast_paths.py`` compares them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentstitch.bridge._pool import (
    item_scores,
    partner_ranks,
    r_squared,
    rank_scores,
    squared_errors,
    translation_sims,
)

#: The scores read from the partner's rank alone.
RANK_SCORES = ("mrr", "top1", "recall_at_k")
#: The scores ``setting_scores`` computes (any other is computed by ``fold_scores``, setting by setting).
TRIAL_SCORES = (*RANK_SCORES, "knn_jaccard", "cosine", "r2", "r2_scaled")


def setting_scores(anchors: Any, outputs: dict[str, list[tuple[Any, int, torch.Tensor]]], score: str) -> dict:
    """Per setting (``outputs``: key -> [(fold, k, bridged queries), ...]), one entry per fold in the form
    ``pooled`` reads (``{"items": {name: per-item array}}`` or ``{"r2": .., "r2_scaled": ..}``), for ``score``."""
    trial: dict[str, list[dict[str, Any]]] = {key: [] for key in outputs}
    by_fold: dict[int, tuple[Any, list[tuple[str, torch.Tensor]]]] = {}
    for key, entries in outputs.items():
        for fold, k, output in entries:
            by_fold.setdefault(k, (fold, []))[1].append((key, output))
    for k, (fold, settings) in by_fold.items():
        keep = anchors.param_rows[k]
        rows = [output[torch.as_tensor(keep, device=output.device)] for _, output in settings]
        for (key, _), entry in zip(settings, _fold_trial(anchors, fold.queries[keep], rows, score), strict=True):
            trial[key].append(entry)
    return trial


def _fold_trial(anchors: Any, queries: np.ndarray, rows: list[torch.Tensor], score: str) -> list[dict[str, Any]]:
    if score in ("r2", "r2_scaled"):
        partner = anchors.target64[torch.as_tensor(queries, device=rows[0].device)]
        fits = [r_squared(squared_errors(b, partner, anchors.target_scale)) for b in rows]
        return [{"r2": r2, "r2_scaled": r2_scaled} for r2, r2_scaled in fits]
    pool = anchors.pool
    sims = translation_sims(torch.cat([b.to(pool.unit.dtype) for b in rows]), pool)
    items = np.tile(queries, len(rows))
    if score in RANK_SCORES:
        per_item = rank_scores(partner_ranks(sims, items).cpu().numpy(), pool.k)
    elif score == "cosine":
        index = torch.as_tensor(items, device=sims.device)
        per_item = {"cosine": sims[torch.arange(len(items), device=sims.device), index].double().cpu().numpy()}
    else:
        per_item = item_scores(sims, items, pool)
    n = len(queries)
    return [{"items": {name: v[i * n : (i + 1) * n] for name, v in per_item.items()}} for i in range(len(rows))]
