"""Pointwise normalized kernel alignment, PNKA (Kolling et al., TMLR 2025; camilakolling/PNKA): how similarly each
single sample is placed relative to all others in two representations."""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike, wrap_like
from latentstitch._core.numerics import matmul
from latentstitch._core.params import check_bool
from latentstitch.similarity.measures._registry import as_result, needs_grad, prepare_pair
from latentstitch.similarity.measures._sample_size import warn_if_trivial


def pnka_scores(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample PNKA of validated inputs, float64: ``cos(K_x[i], K_y[i])`` with ``K = Xc Xc^T``.

    In feature space ``<K_x[i], K_y[i]> = x_i^T (Xc^T Yc) y_i`` and ``|K_x[i]|^2 = x_i^T (Xc^T Xc) x_i`` (O(n d^2),
    O(d^2) memory); with more features than samples the n x n Gram matrices are cheaper and used instead.
    """
    xc = (x - x.mean(dim=0)).to(torch.float64)
    yc = (y - y.mean(dim=0)).to(torch.float64)
    n, p, q = x.shape[0], x.shape[1], y.shape[1]
    mm = torch.matmul if needs_grad(x, y) else matmul
    if n * (p + q) < p * p + p * q + q * q:
        kx, ky = mm(xc, xc.T), mm(yc, yc.T)
        inner = (kx * ky).sum(dim=1)
        norms = torch.linalg.vector_norm(kx, dim=1) * torch.linalg.vector_norm(ky, dim=1)
    else:
        inner = (mm(xc, mm(xc.T, yc)) * yc).sum(dim=1)
        norm_x = (mm(xc, mm(xc.T, xc)) * xc).sum(dim=1)
        norm_y = (mm(yc, mm(yc.T, yc)) * yc).sum(dim=1)
        norms = torch.sqrt(norm_x.clamp_min(0.0)) * torch.sqrt(norm_y.clamp_min(0.0))
    zero = norms <= 0
    if bool(zero.any()):
        row = int(zero.nonzero()[0, 0])
        raise ValueError(
            f"x, y: sample {row} sits at the mean of a representation (its kernel row is zero), so its PNKA is "
            "undefined; check for constant representations or duplicated mean rows"
        )
    return inner / norms


def pnka(x: ArrayLike, y: ArrayLike, *, pointwise: bool = False):
    """Pointwise normalized kernel alignment (Kolling et al. 2025): for each sample i, the cosine similarity of its
    rows of the two linear kernels, ``PNKA_i = cos(K_x[i], K_y[i])``, ``K = Xc Xc^T`` (columns centred).

    Parameters
    ----------
    x, y : (n, p), (n, q) arrays or tensors of the same samples.
    pointwise : bool
        Return the n per-sample scores (an array/tensor like x) instead of their mean (the aggregate the authors
        report, and the registered measure ``"pnka"``). Low scores single out the samples the two representations
        place differently.

    Notes
    -----
    Centering: columns centred. Similarity in [-1, 1], symmetric. Invariant to orthogonal maps, isotropic scaling and
    translation of either side. Computed in float64 in feature space (Gram matrices when features outnumber
    samples); differentiable for torch inputs. A sample whose kernel row is zero raises a ValueError.
    """
    pointwise = check_bool(pointwise, "pointwise")
    xt, yt = prepare_pair(x, y, min_rows=2, measure="PNKA", scale_free=True, varying=True)
    warn_if_trivial("pnka", xt.shape[0], xt.shape[1], yt.shape[1])
    scores = pnka_scores(xt, yt)
    if pointwise:
        return wrap_like(scores.to(xt.dtype), x)
    return as_result(scores.mean(), x, xt)
