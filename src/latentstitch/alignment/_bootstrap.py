"""Bootstrapping parallel anchors (Cannistraci et al., Tiny Papers @ ICLR 2023, arXiv 2303.00721).

From a few seed pairs, both spaces are described relative to their seed anchors (relative representations are
comparable across spaces), the two clouds of relative vectors are matched by entropic optimal transport (Sinkhorn,
as the official code ``icannistraci/bootstrapping-ao`` does: Euclidean cost between relative vectors), and the
most confident mutual matches become new anchors. Repeating with the grown anchor set sharpens the relative
representations, so the matches improve round after round.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.errors import ZeroNormError
from latentstitch._core.numerics import lower_median
from latentstitch._core.params import check_bool, check_positive_int
from latentstitch.alignment._common import as_pairs, check_positive, space
from latentstitch.relative import relative_projection


class BootstrappedAnchors(NamedTuple):
    """Matched rows found by ``bootstrap_anchors``, most confident first.

    ``pairs`` (n, 2) int64: ``(source row, target row)``; ``confidence`` (n,) float64 in [0, 1]: the smaller of
    the two conditional probabilities of the transport plan (P(target | source) and P(source | target)).
    """

    pairs: np.ndarray
    confidence: np.ndarray


def sinkhorn_plan(cost: torch.Tensor, epsilon: float, max_iter: int = 100, tol: float = 1e-9) -> torch.Tensor:
    """Entropic optimal transport plan between uniform marginals (Sinkhorn-Knopp).

    ``P = argmin <P, C> - epsilon H(P)`` subject to ``P 1 = 1/n``, ``P^T 1 = 1/m``; rows sum to 1/n, columns to
    1/m. The kernel ``exp(-C / epsilon)`` is taken row-shifted (each row's smallest cost subtracted), which the
    scalings absorb, so no row underflows; if a whole column underflows, the iterations run in the log domain.
    Stops when the column marginals are met to ``tol`` (relative) or after ``max_iter`` sweeps.
    """
    n, m = cost.shape
    shifted = cost - cost.min(dim=1, keepdim=True).values
    kernel = torch.exp(-shifted / epsilon)
    if bool((kernel.sum(dim=0) == 0).any()):
        return _log_sinkhorn(shifted, epsilon, max_iter)
    a, b = 1.0 / n, 1.0 / m
    # A sweep is u = a / (K v), v = b / (K^T u), u = a / (K v), then the column sums of the plan, (K^T u) v, checked.
    # The next sweep's first u is this sweep's last (v has not changed since) and its K^T u is the one just checked,
    # so each product is computed once: two per sweep instead of four, the same iterates.
    u = a / (kernel @ torch.ones(m, dtype=cost.dtype, device=cost.device))
    columns = kernel.T @ u
    for _ in range(max_iter):
        v = b / columns
        u = a / (kernel @ v)
        columns = kernel.T @ u
        if float((columns * v / b - 1.0).abs().max()) < tol:
            break
    return u[:, None] * kernel * v[None, :]


def _log_sinkhorn(cost: torch.Tensor, epsilon: float, max_iter: int) -> torch.Tensor:
    n, m = cost.shape
    f = torch.zeros(n, dtype=cost.dtype, device=cost.device)
    g = torch.zeros(m, dtype=cost.dtype, device=cost.device)
    scaled = -cost / epsilon
    for _ in range(max_iter):
        f = -torch.logsumexp(scaled + g[None, :], dim=1) - math.log(n)
        g = -torch.logsumexp(scaled + f[:, None], dim=0) - math.log(m)
    return torch.exp(scaled + f[:, None] + g[None, :])


#: A centred seed row shorter than this many machine epsilons (of the table's dtype) times the longest seed row is
#: taken as zero: it is rounding, not a direction (three equal rows are not exactly their own mean in floating point).
_ZERO_EPSILONS = 16


def _check_seeds(table: torch.Tensor, seeds: np.ndarray, side: str, center: bool) -> None:
    """Seed rows of one side that every item can take a cosine against: none is the zero vector (after centring on
    the seeds' mean with ``center``), so one seed pair is too few with ``center`` (it is its own mean)."""
    rows = seeds[:, 0 if side == "source" else 1]
    tolerance = _ZERO_EPSILONS * torch.finfo(table.dtype).eps
    anchors = table[torch.as_tensor(rows, device=table.device)].double()
    if center and len(seeds) == 1:
        raise ValueError(
            "seed_pairs: one seed pair gives one cosine per item, and center=True removes even that (a single "
            "anchor centred on itself is the zero vector); give at least 2 seed pairs (about 10-20 work well), "
            "or pass center=False"
        )
    scale = float(torch.linalg.vector_norm(anchors, dim=1).max())
    if center:
        anchors = anchors - anchors.mean(dim=0)
    norms = torch.linalg.vector_norm(anchors, dim=1)
    zero = (norms <= tolerance * scale).nonzero().flatten().tolist()
    if not zero:
        return
    if center and len(zero) == len(rows):
        raise ValueError(
            f"seed_pairs: the {len(rows)} seed rows of {side} are all the same vector, so centring on their mean "
            "(center=True) leaves no direction to take cosines against; give seed pairs of at least 2 distinct "
            "rows (about 10-20 work well), or pass center=False"
        )
    pair = zero[0]
    why = "equals the mean of the seed rows (center=True centres on it)" if center else "is the zero vector"
    raise ValueError(
        f"seed_pairs: pair {pair} (row {int(rows[pair])} of {side}) {why}, so cosines to it are undefined; drop "
        "that pair or choose another seed"
    )


def _relative(x: torch.Tensor, rows: np.ndarray, center: bool, side: str) -> torch.Tensor:
    try:
        return relative_projection(x, x[torch.as_tensor(rows, device=x.device)], center=center)
    except ZeroNormError as error:  # a row of the table (the seeds were checked): name the user's argument
        if error.name != "x":
            raise
        centred = " after centring on the anchors' mean (center=True)" if center else ""
        raise ValueError(
            f"{side}: row {error.row} has zero norm{centred}, so its cosines to the anchors are undefined; remove "
            "that row"
        ) from None


def _match(rel_s: torch.Tensor, rel_t: torch.Tensor, epsilon: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mutual best matches of the transport plan between two clouds of relative vectors, with confidences."""
    cost = torch.cdist(rel_s, rel_t)
    scale = lower_median(cost)
    plan = sinkhorn_plan(cost / (scale if scale > 0 else 1.0), epsilon)
    best_t = plan.argmax(dim=1)
    best_s = plan.argmax(dim=0)
    rows = torch.arange(plan.shape[0], device=plan.device)
    mutual = best_s[best_t] == rows
    i, j = rows[mutual], best_t[mutual]
    confidence = torch.minimum(plan[i, j] * plan.shape[0], plan[i, j] * plan.shape[1]).clamp(0.0, 1.0)
    return i, j, confidence


def bootstrap_anchors(
    source: ArrayLike,
    target: ArrayLike,
    seed_pairs: ArrayLike,
    n: int,
    *,
    n_rounds: int = 3,
    epsilon: float = 0.05,
    center: bool = True,
) -> BootstrappedAnchors:
    """Grow a few seed pairs into ``n`` new parallel anchors between two embedding tables of different items.

    Parameters
    ----------
    source, target : (n_s, d_s), (n_t, d_t) arrays or tensors
        Two embedding tables; their rows need not correspond (different items, different counts).
    seed_pairs : (k, 2) integer array
        Known matches ``(source row, target row)``: about 10-20 are enough when the spaces are similar.
    n : int
        Number of new pairs wanted (seeds excluded). Fewer are returned, with a warning, when fewer rows match
        mutually.
    n_rounds : int
        Rounds of matching; each adds its most confident mutual matches to the anchors (``n / n_rounds`` more per
        round), so later rounds describe every row relative to more anchors.
    epsilon : float
        Entropic regularisation of Sinkhorn, relative to the median cost (smaller: sharper, slower to converge).
    center : bool
        Centre each space on its current anchors' mean before taking cosines (``relative_projection(center=...)``).

    Returns
    -------
    BootstrappedAnchors
        ``pairs`` (n, 2) and ``confidence`` (n,), most confident first; numpy arrays.

    Memory is O(n_s x n_t) (the transport plan): subsample tables beyond a few thousand rows. Invariant to
    rotations, reflections and isotropic rescaling of either space (and translations with ``center``), since only
    cosine relative representations are compared. Confidences of a failed bootstrap (unrelated spaces, wrong
    seeds) stay near 0; of a good one, near 1.
    """
    s = space(source, "source")
    t = space(target, "target")
    n = check_positive_int(n, "n")
    n_rounds = check_positive_int(n_rounds, "n_rounds")
    epsilon = check_positive(epsilon, "epsilon")
    check_bool(center, "center")
    seeds = as_pairs(seed_pairs, "seed_pairs", s.shape[0], t.shape[0])
    if len(set(seeds[:, 0].tolist())) < len(seeds) or len(set(seeds[:, 1].tolist())) < len(seeds):
        raise ValueError("seed_pairs: a row appears in two seed pairs; each row can match only once")
    available = min(s.shape[0], t.shape[0]) - len(seeds)
    if n > available:
        raise ValueError(f"n: asked for {n} new pairs but only {available} rows of each table are not seeds")
    _check_seeds(s.detach(), seeds, "source", center)
    _check_seeds(t.detach(), seeds, "target", center)
    s64, t64 = s.detach().double(), t.detach().double().to(s.device)

    anchors = seeds
    found: list[tuple[int, int, float]] = []
    for round_index in range(n_rounds):
        free_s = np.setdiff1d(np.arange(s.shape[0]), anchors[:, 0])
        free_t = np.setdiff1d(np.arange(t.shape[0]), anchors[:, 1])
        rel_s = _relative(s64, anchors[:, 0], center, "source")[torch.as_tensor(free_s)]
        rel_t = _relative(t64, anchors[:, 1], center, "target")[torch.as_tensor(free_t)]
        i, j, confidence = _match(rel_s, rel_t, epsilon)
        order = torch.argsort(confidence, descending=True)
        wanted = math.ceil(n * (round_index + 1) / n_rounds) - len(found)
        last = round_index == n_rounds - 1
        chosen = order if last else order[:wanted]
        new = [(int(free_s[i[c]]), int(free_t[j[c]]), float(confidence[c])) for c in chosen.tolist()]
        if last:
            found = found + new
            break
        found += new
        anchors = np.concatenate([seeds, np.asarray([(a, b) for a, b, _ in found], dtype=np.int64).reshape(-1, 2)])
    # The last round rescored every free row; earlier rounds' pairs keep their confidence when they were chosen.
    found.sort(key=lambda item: -item[2])
    if len(found) < n:
        warnings.warn(
            f"bootstrap_anchors: only {len(found)} rows matched mutually, fewer than the n={n} asked for",
            stacklevel=2,
        )
    found = found[:n]
    pairs = np.asarray([(a, b) for a, b, _ in found], dtype=np.int64).reshape(-1, 2)
    return BootstrappedAnchors(pairs, np.asarray([c for _, _, c in found], dtype=np.float64))
