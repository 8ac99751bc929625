"""k-means in torch, on the rows' device: k-means++ seeding and Lloyd iterations, several starts side by side.

``kmeans`` runs several Lloyd iterations at once from a batch of starts over the same rows (one matrix product per
iteration for the whole batch): the unpaired alignment starts the target's k-means from the mapped source centroids
of the fitted map and of its random-rotation null in one call; the cascade's inverted lists (``migrate._lists``)
draw their centroids with it.
"""

from __future__ import annotations

import numpy as np
import torch

from latentstitch._core.numerics import matmul

#: Lloyd iterations at most; they stop earlier once no assignment changes.
MAX_ITER = 50
#: Convergence tolerance, relative to the mean feature variance (sklearn's default).
TOL = 1e-4


def kmeans_plus_plus(x: torch.Tensor, k: int, rng: np.random.Generator) -> torch.Tensor:
    """k-means++ seeding (Arthur & Vassilvitskii 2007): ``k`` rows of ``x``, each drawn with probability
    proportional to its squared distance to the nearest row drawn before. Random numbers come from ``rng``."""
    n = x.shape[0]
    squared = (x * x).sum(dim=1)
    chosen = [int(rng.integers(n))]
    nearest = (squared - 2 * matmul(x, x[chosen[0]][:, None])[:, 0] + squared[chosen[0]]).clamp_min(0)
    for _ in range(1, k):
        total = nearest.cumsum(dim=0)
        if float(total[-1]) <= 0:  # fewer distinct rows than k: any row
            pick = int(rng.integers(n))
        else:
            pick = int(torch.searchsorted(total, total[-1] * float(rng.random())).clamp_max(n - 1))
        chosen.append(pick)
        distance = (squared - 2 * matmul(x, x[pick][:, None])[:, 0] + squared[pick]).clamp_min(0)
        nearest = torch.minimum(nearest, distance)
    return x[torch.as_tensor(chosen, device=x.device)].clone()


def kmeans(
    x: torch.Tensor,
    k: int,
    rng: np.random.Generator,
    init: torch.Tensor | None = None,
    max_iter: int = MAX_ITER,
    n_init: int = 1,
) -> torch.Tensor:
    """Lloyd's k-means of the rows of ``x`` (n, d): the centroids (k, d), or (b, k, d) for a batch of starts.

    ``init``: starting centroids (k, d), or a batch (b, k, d) run side by side; default the best (least inertia)
    of ``n_init`` runs from k-means++ seeds (``rng``), run side by side. A cluster that loses every row keeps its
    previous centroid.
    """
    if init is None:
        seeds = torch.stack([kmeans_plus_plus(x, k, rng) for _ in range(n_init)])
        runs = _lloyd(x, seeds, max_iter)
        return runs[int(_inertia(x, runs).argmin())]
    starts = init.to(dtype=x.dtype, device=x.device)
    return _lloyd(x, starts, max_iter) if starts.dim() == 3 else _lloyd(x, starts[None], max_iter)[0]


def _inertia(x: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    """(b,): sum of squared distances of the rows to their nearest centroid, per batch of centroids (b, k, d)."""
    b, k, d = centres.shape
    scores = matmul(x, centres.reshape(b * k, d).T).reshape(-1, b, k)
    distances = (centres * centres).sum(dim=2)[None] - 2 * scores + (x * x).sum(dim=1)[:, None, None]
    return distances.amin(dim=2).clamp_min(0).sum(dim=0)


def _lloyd(x: torch.Tensor, starts: torch.Tensor, max_iter: int) -> torch.Tensor:
    """Lloyd iterations from a batch of starts (b, k, d); the centroids (b, k, d)."""
    centres = starts.clone()
    b, k, d = centres.shape
    squared_x = (x * x).sum(dim=1)
    # sklearn's rule: stop once the centroids move less (sum of squared shifts) than 1e-4 x the mean feature variance
    tolerance = TOL * float(x[:: max(1, x.shape[0] // 1000)].var(dim=0).mean()) if x.shape[0] > 1 else 0.0
    for _ in range(max_iter):
        scores = matmul(x, centres.reshape(b * k, d).T).reshape(-1, b, k)  # (n, b, k)
        distances = (centres * centres).sum(dim=2)[None] - 2 * scores + squared_x[:, None, None]
        labels = distances.argmin(dim=2).T  # (b, n)
        sums = torch.zeros(b, k, d, dtype=x.dtype, device=x.device)
        for start, rows in zip(sums, labels, strict=True):
            start.index_add_(0, rows, x)
        counts = torch.stack([torch.bincount(rows, minlength=k) for rows in labels]).to(x.dtype)[:, :, None]
        updated = torch.where(counts > 0, sums / counts.clamp_min(1), centres)
        shift = float(((updated - centres) ** 2).sum(dim=(1, 2)).max())
        centres = updated
        if shift <= tolerance:
            break
    return centres
