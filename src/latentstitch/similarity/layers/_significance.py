"""The closed-form permutation test of linear CKA for every layer pair, from the streamed ``LayerMoments``.

Linear CKA is the RV coefficient; its permutation null has exact moments in a few invariants of each layer's
trace-zero centred Gram matrix ``A = Zc Zc^T - c H`` (``_permutation_moments``; Z the rows minus their mean,
``c = tr(Zc^T Zc) / (n - 1)``, ``a = diag A``, ``w_i = |z_i|^2``, ``a_i = w_i - c (1 - 1/n)``). Per layer, what each
needs and where it comes from:

- ``tr A^2``, ``tr A^3``: from the d x d scatter matrix C (``tr C^2``, ``tr C^3``): exact.
- ``sum a_i^2``: from ``sum w_i = tr C`` and ``sum w_i^2 = sum |z_i|^4`` (streamed about a shift, moved to the mean
  exactly: ``LayerMoments.higher``): exact. With ``tr A^2`` this gives the exact mean and variance.
- ``a^T A a = |sum_i w_i z_i|^2 - c sum a_i^2`` (``sum a_i = 0``): from the streamed ``sum |z|^2 z``: exact.
- ``sum a_i^3`` (sixth order in the rows), ``sum_ij A_ij^3`` and ``sum_i a_i (A^2)_ii`` (sums over row pairs): not
  streamable in O(d^2); from the shared uniform sample of rows (``LayerMoments.sample_rows``, 1,024 by default):
  ``(n / m) sum_sample a_i^3`` and ``n (n - 1) / (m (m - 1))`` times the sums over distinct sampled pairs (unbiased);
  exact when the sample holds every row (n <= sample_rows). They enter the third moment only: the skewness of the
  Pearson type III tail (without a sample, ``sample_rows=0``: unknown, a normal tail).

The moments and the p-value are ``closed_form_from_invariants``: the same code as ``permutation_test(...,
method="moments")``, which gives the same p-values on the collected activations (tested).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from latentstitch.similarity.inference._closed_form import ClosedForm, closed_form_from_invariants
from latentstitch.similarity.inference._pairwise_test import step_down
from latentstitch.similarity.inference._permutation_moments import GramInvariants
from latentstitch.similarity.layers._moments import LayerMoments


def layer_invariants(moments: LayerMoments, side: str, index: int) -> tuple[GramInvariants, float, float]:
    """``(invariants of the layer's trace-zero centred Gram matrix, tr C^2, tr C)`` (see the module docstring)."""
    layer = moments.layer(side, index)
    n = layer.count
    cov = layer.centered_aa()
    total = float(torch.trace(cov))
    c, k = total / (n - 1), total / n  # k = c (1 - 1/n): a_i = w_i - k
    norm2 = float((cov * cov).sum())
    cube = float(torch.trace(cov @ cov @ cov))
    fourth, third = (float(t) if t.ndim == 0 else t for t in moments.higher(side, index))
    diag2 = fourth - 2 * k * total + n * k * k
    skew = _sampled_sums(moments, side, index, layer.mean_a, c, k) if moments.sample_keys is not None else None
    diag3, cubes, squares = skew if skew is not None else (math.nan,) * 3
    invariants = GramInvariants(
        n=n,
        trace=0.0,
        trace2=norm2 - total**2 / (n - 1),
        diag2=diag2,
        trace3=cube - 3 * c * norm2 + 3 * c**2 * total - c**3 * (n - 1),
        diag3=diag3,
        cubes=diag3 + cubes,
        diag_form=float(third @ third) - c * diag2,
        diag_square=diag3 + squares,
    )
    return invariants, norm2, total


def _sampled_sums(
    moments: LayerMoments, side: str, index: int, mean: torch.Tensor, c: float, k: float
) -> tuple[float, float, float] | None:
    """``sum a_i^3``, ``sum_{i != j} A_ij^3``, ``sum_{i != j} a_i A_ij^2`` from the sampled rows (scaled to all rows:
    unbiased; exact when every row is in the sample); None with fewer than 2 sampled rows."""
    n = moments.count
    columns = moments.column_slices(side)[index]
    z = moments.sample[side][:, columns].to(torch.float64) - mean.to(moments.sample[side].device)
    m = z.shape[0]
    if m < 2:
        return None
    a = (z * z).sum(dim=1) - k
    gram = z @ z.T + c / n  # the off-diagonal entries of A = Zc Zc^T - c H
    off = ~torch.eye(m, dtype=torch.bool, device=z.device)
    pairs = n * (n - 1) / (m * (m - 1))
    return (
        float((a**3).sum()) * n / m,
        pairs * float((gram**3)[off].sum()),
        pairs * float((a[:, None] * gram**2)[off].sum()),
    )


def layer_tests(moments: LayerMoments, values: np.ndarray) -> list[list[ClosedForm | None]]:
    """The closed-form test of every cell of ``values`` (linear CKA per layer pair; None where the value is NaN)."""
    n = moments.count
    rows = 0 if moments.sample_keys is None else moments.sample_keys.shape[0]
    exact = rows == n
    with torch.no_grad():
        sides = {s: [layer_invariants(moments, s, k) for k in range(len(moments.names[s]))] for s in "ab"}
    tests: list[list[ClosedForm | None]] = []
    for i, (x, norm_x, total_x) in enumerate(sides["a"]):
        tests.append([])
        for j, (y, norm_y, total_y) in enumerate(sides["b"]):
            if not math.isfinite(values[i, j]) or n < 4:
                tests[-1].append(None)
                continue
            denominator, offset = math.sqrt(norm_x * norm_y), total_x * total_y / (n - 1)
            tests[-1].append(
                closed_form_from_invariants(float(values[i, j]), x, y, denominator, offset, exact=exact, rows=rows)
            )
    return tests


def layer_p_values(moments: LayerMoments, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(p, Holm-corrected p)`` of linear CKA per layer pair (NaN where undefined; Holm over the defined cells)."""
    p = np.array([[np.nan if t is None else t.p_value for t in row] for row in layer_tests(moments, values)])
    p = p.reshape(values.shape)
    corrected = np.full_like(p, np.nan)
    defined = np.isfinite(p)
    if defined.any():
        corrected[defined] = step_down(p[defined], "holm")
    return p, corrected
