"""Deconfounded CKA (Cui, Kumar, Marttinen, Kaski, NeurIPS 2022): linear CKA after regressing the input
similarity structure out of each representation's similarity structure.

Two networks fed the same inputs look alike partly because the inputs themselves are alike; dCKA removes the part of
each representation's Gram matrix that a linear function of the inputs' Gram matrix explains. With ``K_x = Xc Xc^T``,
``K_y``, ``K_z`` the centred linear Gram matrices of x, y and the confounder z (the inputs), each ``K`` is regressed
on ``[1, K_z]`` over all n^2 entries (the reference code, ``simtorch.DeltaCKA``); because centred Gram matrices sum to
zero the intercept vanishes and the residual is ``R_x = K_x - b_x K_z`` with ``b_x = <K_x, K_z> / <K_z, K_z>``. Then
``dCKA = <R_x, R_y> / sqrt(<R_x, R_x> <R_y, R_y>)``.

Every inner product is a ``<K_a, K_b> = ||A_c^T B_c||_F^2``, computed in feature space from one set of moments of
the stacked columns ``[x | y | z]`` (O((p + q + r)^2) memory), or from the n x n Grams when they are smaller.
"""

from __future__ import annotations

import torch

from latentstitch._core.arrays import ArrayLike, check_same_rows, match_reference
from latentstitch._core.moments import CrossMoments, rescaled_for_moments
from latentstitch.similarity.measures._registry import ZeroVarianceError, as_result, as_rows, needs_grad, prepare_pair


def gram_inner_products(parts: list[torch.Tensor]) -> torch.Tensor:
    """``G[a, b] = <K_a, K_b> = ||A_c^T B_c||_F^2`` (float64) for centred linear Gram matrices of ``parts``."""
    n, widths = parts[0].shape[0], [t.shape[1] for t in parts]
    total = sum(widths)
    count = len(parts)
    if n * total < total * total:
        grams = [(c @ c.T) for c in ((t - t.mean(dim=0)).to(torch.float64) for t in parts)]
        return torch.stack([torch.stack([(ka * kb).sum() for kb in grams]) for ka in grams])
    stacked = torch.cat(parts, dim=1)
    scatter = CrossMoments(products=("aa",), track_grad=needs_grad(*parts)).update(stacked).centered_aa()
    bounds = [0, *torch.cumsum(torch.tensor(widths), 0).tolist()]
    blocks = [slice(bounds[i], bounds[i + 1]) for i in range(count)]
    return torch.stack([torch.stack([(scatter[a, b] ** 2).sum() for b in blocks]) for a in blocks])


def deconfounded_terms(g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(<R_x, R_y>, <R_x, R_x>, <R_y, R_y>)`` from the inner products ``g`` of (x, y, z)."""
    if not g[2, 2] > 0:
        raise ZeroVarianceError("confounder", "deconfounded CKA")
    bx, by = g[0, 2] / g[2, 2], g[1, 2] / g[2, 2]
    xy = g[0, 1] - by * g[0, 2] - bx * g[1, 2] + bx * by * g[2, 2]
    xx = g[0, 0] - g[0, 2] ** 2 / g[2, 2]
    yy = g[1, 1] - g[1, 2] ** 2 / g[2, 2]
    return xy, xx, yy


def deconfounded_ratio(xy: torch.Tensor, xx: torch.Tensor, yy: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    for value, name in ((xx, "x"), (yy, "y")):
        # relative to its own Gram norm: a representation that the confounder explains entirely leaves rounding only
        if not value > 1e-12 * scale:
            raise ValueError(
                f"{name}: its similarity structure is entirely explained by the confounder's (a linear function "
                "of the inputs' Gram matrix), so deconfounded CKA is undefined"
            )
    return xy / torch.sqrt(xx * yy)


def deconfounded_cka(x: ArrayLike, y: ArrayLike, confounder: ArrayLike | None = None) -> float | torch.Tensor:
    """Deconfounded linear CKA (Cui et al. 2022): CKA between the parts of x's and y's similarity structures that
    the confounder's (typically the inputs both networks saw) does not explain linearly.

    Parameters
    ----------
    x, y : (n, p), (n, q) (or (n, ...), flattened) arrays or tensors of the same samples.
    confounder : (n, r) (or (n, ...)) array or tensor, required
        The confounding representation of the same samples, e.g. the flattened input images; its rows follow x's
        (a permutation test permutes y only; a bootstrap resamples it with x and y).

    Notes
    -----
    Centering: columns centred (linear kernels). Similarity in [-1, 1] (the residual Gram matrices are no longer
    positive semi-definite), symmetric. Invariant to orthogonal maps, isotropic scaling and translation of x and of
    y (the confounder held fixed). Equals simtorch's ``DeltaCKA.linear_CKA`` (the authors' code) with
    ``remove_negative_eig=False``. Differentiable for torch inputs.
    """
    if confounder is None:
        raise ValueError(
            "confounder: deconfounded CKA needs the confounding representation of the same samples (e.g. the "
            "flattened inputs): deconfounded_cka(x, y, confounder=inputs)"
        )
    xt, yt = prepare_pair(x, y, min_rows=3, measure="deconfounded CKA", scale_free=True, varying=True)
    # invariant to isotropic scaling of the confounder too: brought into range like x and y
    zt = match_reference(as_rows(confounder, "confounder"), xt, "confounder", "x")
    zt = rescaled_for_moments(zt) if zt.numel() else zt
    check_same_rows(xt, zt, "x", "confounder")
    g = gram_inner_products([xt, yt, zt])
    xy, xx, yy = deconfounded_terms(g)
    return as_result(deconfounded_ratio(xy, xx, yy, torch.sqrt(g[0, 0] * g[1, 1])), x, xt)
