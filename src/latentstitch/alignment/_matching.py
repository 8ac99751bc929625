"""Matching two spaces without pairs: k centroids by their internal geometry alone, then rows through them.

The quadratic assignment of mini-vec2vec: the permutation ``p`` maximising ``sum_ab Gx[a, b] Gy[p(a), p(b)]`` for
the two centred Gram matrices. Solved by steepest-ascent 2-opt (swap the images of two centroids while a swap
gains), every restart in one batch of numpy operations: the gains of all k(k-1)/2 swaps of every restart come from
one batched matrix product, O(restarts k^3) per step. The first start is not random: the Hungarian assignment
(``scipy.optimize.linear_sum_assignment``) between *relational signatures* -- each centroid's squared norm and its
sorted inner products with the others, which any rotation of the space leaves unchanged.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from latentstitch._core.numerics import matmul, unit_rows
from latentstitch.alignment._common import mean_of_neighbours, orthogonal_on_rows

__all__ = ["match_by_structure", "nearest_cosine", "pseudo_pair_map", "qap_objective", "swap_gains"]


def signatures(gram: np.ndarray) -> np.ndarray:
    """(k, k) rotation-invariant descriptors: the diagonal entry, then the row's other entries sorted."""
    k = gram.shape[0]
    off = gram[~np.eye(k, dtype=bool)].reshape(k, k - 1)
    return np.concatenate([np.diag(gram)[:, None], -np.sort(-off, axis=1)], axis=1)


def qap_objective(gram_x: np.ndarray, gram_y: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """``sum_ab Gx[a, b] Gy[p(a), p(b)]`` for each permutation row of ``perms`` (r, k)."""
    permuted = gram_y[perms[:, :, None], perms[:, None, :]]
    return (gram_x[None] * permuted).sum(axis=(1, 2))


def swap_gains(gram_x: np.ndarray, permuted: np.ndarray) -> np.ndarray:
    """(r, k, k): the objective's change when the images of centroids i and j are swapped, for every restart's
    permuted target Gram ``permuted[r] = Gy[p_r][:, p_r]`` (both Gram matrices symmetric)."""
    a = np.einsum("ic,rjc->rij", gram_x, permuted)  # a[r, i, j] = sum_c Gx[i, c] M[j, c]
    diag_a = np.diagonal(a, axis1=1, axis2=2)
    full = a + a.transpose(0, 2, 1) - diag_a[:, :, None] - diag_a[:, None, :]
    gx_diag, m_diag = np.diag(gram_x), np.diagonal(permuted, axis1=1, axis2=2)
    # remove the terms c = i and c = j from the sum over c, then add the swapped diagonal pair
    term_i = (gx_diag[:, None] - gram_x.T)[None] * (permuted.transpose(0, 2, 1) - m_diag[:, :, None])
    term_j = (gram_x - gx_diag[None, :])[None] * (m_diag[:, None, :] - permuted)
    diagonal = (gx_diag[:, None] - gx_diag[None, :])[None] * (m_diag[:, None, :] - m_diag[:, :, None])
    return 2 * (full - term_i - term_j) + diagonal


def match_by_structure(gram_x: np.ndarray, gram_y: np.ndarray, restarts: int, rng: np.random.Generator) -> np.ndarray:
    """The permutation ``p`` (k,) pairing centroid a of x with centroid p[a] of y: best of ``restarts`` 2-opt
    ascents, the first from the signature assignment, the others from random permutations."""
    k = gram_x.shape[0]
    cost = np.linalg.norm(signatures(gram_x)[:, None, :] - signatures(gram_y)[None, :, :], axis=2)
    first = linear_sum_assignment(cost)[1]
    perms = np.stack([first] + [rng.permutation(k) for _ in range(restarts - 1)])
    tolerance = 1e-12 * max(float(np.abs(gram_x).sum() * np.abs(gram_y).max()), 1e-300)
    rows = np.arange(len(perms))
    for _ in range(k * k):
        gains = swap_gains(gram_x, gram_y[perms[:, :, None], perms[:, None, :]])
        flat = gains.reshape(len(perms), -1)
        best = flat.argmax(axis=1)
        improving = flat[rows, best] > tolerance
        if not improving.any():
            break
        i, j = np.divmod(best[improving], k)
        active = rows[improving]
        perms[active, i], perms[active, j] = perms[active, j], perms[active, i]
    return perms[int(np.argmax(qap_objective(gram_x, gram_y, perms)))]


def pseudo_pair_map(
    x: torch.Tensor,
    y: torch.Tensor,
    x64: torch.Tensor,
    y64: torch.Tensor,
    centres_x: torch.Tensor,
    centres_y: torch.Tensor,
    n_neighbors: int,
) -> torch.Tensor:
    """Step 3: each row of x paired with the mean of the ``n_neighbors`` rows of y whose cosines to their matched
    centroids are most like its own; the orthogonal map fitted on these pseudo-pairs."""
    relative_x = unit_rows(matmul(x, unit_rows(centres_x, "centroids").T), "relative source")
    relative_y = unit_rows(matmul(y, unit_rows(centres_y, "centroids").T), "relative target")
    pseudo = mean_of_neighbours(relative_x, relative_y, n_neighbors, values=y64)
    return orthogonal_on_rows(x64, pseudo)


def nearest_cosine(x: torch.Tensor, rotation: torch.Tensor, y: torch.Tensor) -> float:
    """Mean over rows of x of the cosine between its image and its nearest row of y (unit rows)."""
    mapped = unit_rows(matmul(x, rotation.float()), "mapped source")
    return float(matmul(mapped, y.T).amax(dim=1).double().mean())
