"""The k-nearest-neighbour pieces of the neighbourhood measures: each row's neighbour lists (``(n, k)`` indices,
most similar first, and their cosine similarities), inner products along them, the matches between two lists, and
platonic-rep's outlier clamp.

Everything works on neighbour lists, so memory is O(n k) beyond the chunked neighbour search of
``latentstitch._core.knn.top_k``; no n x n matrix is formed. A permutation of y's rows only relabels y's lists
(``NeighbourLists.permuted``), which is what makes the neighbourhood measures' permutation nulls cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.knn import row_blocks, top_k
from latentstitch._core.numerics import unit_rows
from latentstitch._core.params import check_positive_int
from latentstitch.similarity.measures._registry import prepare_pair


@dataclass
class NeighbourLists:
    """Each row's k nearest neighbours (excluding itself): ``index`` (n, k) most similar first, ``similarity`` (n, k)
    float64 inner products of the (normalised) rows."""

    index: torch.Tensor
    similarity: torch.Tensor

    @property
    def n(self) -> int:
        return self.index.shape[0]

    def permuted(self, permutation: torch.Tensor, inverse: torch.Tensor) -> NeighbourLists:
        """The lists of the rows reordered by ``permutation`` (row i of the result is old row ``permutation[i]``)."""
        return NeighbourLists(inverse[self.index[permutation]], self.similarity[permutation])


def row_dots(a: torch.Tensor, b: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``out[i, j] = <a[i], b[index[i, j]]>`` in float64, chunked over rows (O(chunk k d) memory)."""
    out = torch.empty(index.shape, dtype=torch.float64, device=a.device)
    for start, stop in row_blocks(index.shape[0], index.shape[1] * max(a.shape[1], 1)):
        gathered = b[index[start:stop]]  # (rows, k, d)
        out[start:stop] = torch.einsum("id,ikd->ik", a[start:stop], gathered).to(torch.float64)
    return out


def neighbour_lists(t: torch.Tensor, k: int, name: str, *, normalize: bool = True) -> NeighbourLists:
    """k nearest neighbours of every row by cosine similarity (by raw inner product if ``normalize`` is False)."""
    with torch.no_grad():
        u = unit_rows(t.detach(), name) if normalize else t.detach()
        index = top_k(u, u, k, exclude_self=True)
        return NeighbourLists(index, row_dots(u, u, index))


def neighbour_matches(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``(n, k, k)`` boolean: ``a[i, s] == b[i, t]``."""
    return a[:, :, None] == b[:, None, :]


def prepare_knn(x: ArrayLike, y: ArrayLike, k: int, measure: str) -> tuple[torch.Tensor, torch.Tensor, int]:
    k = check_positive_int(k, "k")
    xt, yt = prepare_pair(x, y, min_rows=k + 1, measure=f"{measure} with k={k}", varying=True)
    return xt, yt, k


def clamp_outliers(t: torch.Tensor, quantile: float) -> torch.Tensor:
    """platonic-rep's ``remove_outliers``: clamp every value to +-(the ``quantile`` of |values| per row, averaged
    over rows)."""
    blocks = row_blocks(t.shape[0], t.shape[1] * 16)
    per_row = torch.cat([torch.quantile(t[start:stop].abs(), quantile, dim=1) for start, stop in blocks])
    limit = per_row.mean()
    return t.clamp(-limit, limit)
