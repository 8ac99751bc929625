"""Orthogonal Procrustes matching (the paper's ``ls_orth``), optionally centred and isotropically scaled."""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
import torch

from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch._core.moments import CrossMoments
from latentstitch._core.numerics import svd
from latentstitch._core.params import Rule, check_bool, check_choice, rule
from latentstitch.stitching._base import _MomentStitcher, intercept_for

#: What a rank-deficient fit does on the directions the data leaves undetermined.
UNSPANNED = ("complete", "zero")


def _check_scale(value: object, name: str = "scale") -> bool | str:
    if (isinstance(value, str) and value == "norm") or isinstance(value, (bool, np.bool_)):
        return value if isinstance(value, str) else bool(value)
    raise ValueError(f"{name}: expected True, False or 'norm', got {value!r}")


class Procrustes(_MomentStitcher):
    """The orthogonal map closest to matching ``a`` onto ``b``: ``R = U V^T`` from the SVD ``A^T B = U S V^T``.

    Minimises ``||s A R + 1 c^T - B||_F`` over ``R`` with orthonormal rows or columns, and optionally the scale
    ``s`` and intercept ``c``. By default neither: no bias and no centring, as the paper's ``ls_orth``.

    Different widths p != q: both sides are zero-padded to ``max(p, q)`` features and an orthogonal map of that size
    is fitted; ``coef_`` is its (p, q) block that maps ``a``'s features onto ``b``'s, so ``transform`` outputs q
    features. It has orthonormal rows when p <= q (an isometric embedding) and orthonormal columns when p > q
    (an orthogonal projection onto q directions, then a rotation). Equivalently, ``R = U V^T`` from the thin SVD.

    Numerics: only ``A^T B`` (and, for ``scale``, the squared norm of ``a``) are accumulated. Each chunk's product
    is taken in the input's precision (float32 for float32 inputs, as ``scipy.linalg.orthogonal_procrustes`` does)
    and accumulated across chunks in float64; pass float64 inputs for a float64-exact fit. If ``A^T B`` is
    rank-deficient (e.g. fewer samples than features) the map is not unique on the missing directions: by default
    one orthogonal optimum is returned (its completion of the missing directions is whatever the SVD returns, so a
    new point's component outside the fitted span lands somewhere arbitrary) and a ``RankDeficiencyWarning`` names
    the numerical rank; ``unspanned="zero"`` returns the minimum-norm map instead.

    Parameters
    ----------
    center : bool
        Centre both sides with their means first and fit an intercept ``c = mean_b - mean_a @ coef_``.
    scale : bool or "norm"
        ``True``: fit an isotropic scale ``s = trace(S) / ||A||_F^2`` (of the centred ``a`` if ``center``), the
        least-squares optimum given ``R``; ``coef_ = s R``. ``"norm"``: ``s = ||B||_F / ||A||_F`` instead, so the
        mapped rows keep ``b``'s spread (the least-squares scale shrinks them towards ``b``'s mean by the fit's
        shortfall, which a cosine search around the origin reads as lost spread); for two spaces this is
        ``alignment.GeneralizedProcrustes``'s translation. ``False`` (default): ``s = 1``.
    unspanned : {"complete", "zero"}
        What the map does on the directions ``A^T B`` leaves undetermined (rank-deficient fits only; a full-rank fit
        is the same either way). ``"complete"`` (default): an orthogonal completion, so ``coef_`` stays orthogonal.
        ``"zero"``: the minimum-norm optimum ``R = U_r V_r^T`` over the ``r`` spanned directions (a partial
        isometry): identical predictions on the fitted rows when ``A^T B`` has ``a``'s rank (the usual case, fewer
        samples than features), never a larger least-squares loss, and a new point's unspanned component maps to
        zero instead of to arbitrary directions. ``Bridge``'s Procrustes routes use it (no warning is raised then:
        the result is unique).

    Attributes
    ----------
    coef_ : (p, q), intercept_ : (q,)
        ``transform(a) = a @ coef_ + intercept_`` (intercept zero unless ``center``).
    scale_ : float
        The fitted scale (1.0 without ``scale``).
    rank_ : int
        Numerical rank of the (centred) cross-product ``A^T B``.

    Invariances: rotating or reflecting ``a`` (or ``b``) by an orthogonal matrix changes ``coef_`` accordingly and
    leaves the fitted predictions unchanged; so does an isotropic rescaling of ``a`` when ``scale``, and a
    translation of either side when ``center``.
    """

    _products = ("ab",)
    _precision = "input"

    def __init__(self, center: bool = False, scale: bool = False, unspanned: str = "complete"):
        self.center = center
        self.scale = scale
        self.unspanned = unspanned

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "center": rule(check_bool),
        "scale": rule(_check_scale),
        "unspanned": rule(check_choice, choices=UNSPANNED),
    }

    def _needed_products(self) -> tuple[str, ...]:
        if self.scale == "norm":
            return ("ab", "aa_diag", "bb_diag")
        return ("ab", "aa_diag") if self.scale else ("ab",)

    def _shifted(self) -> bool:
        return bool(self.center)  # without centring only raw A^T B is read: no shifted copy of each block

    def _solve(self, moments: CrossMoments, *, input_dtype: torch.dtype) -> dict[str, Any]:
        cross = moments.centered_ab() if self.center else moments.raw_ab()
        u, s, vh = svd(cross)
        # Products were taken in the input's precision, so singular values below its rounding level are noise
        work = torch.promote_types(input_dtype, torch.float32)
        eps = torch.finfo(work).eps
        rank = int((s > max(cross.shape) * eps * s[0]).sum()) if s[0] > 0 else 0
        if rank < min(cross.shape) and self.unspanned == "complete":
            samples = moments.count - int(self.center)
            if samples < min(cross.shape):
                cause = f"there are fewer samples ({moments.count}) than features"
            elif work != torch.float64:
                cause = f"its weakest directions are below {work} resolution; pass float64 inputs"
            else:
                cause = "the features are (nearly) collinear"
            warnings.warn(
                f"a, b: the cross-product A^T B{' (centred)' if self.center else ''} has numerical rank {rank} < "
                f"{min(cross.shape)}: {cause}. The orthogonal map is not unique on the missing directions and one "
                "optimum is returned.",
                RankDeficiencyWarning,
                stacklevel=4,
            )
        coef = u @ vh if self.unspanned == "complete" else u[:, :rank] @ vh[:rank]
        scale = 1.0
        if self.scale:
            total = (moments.centered_aa_diag() if self.center else moments.raw_aa_diag()).sum()
            if total <= 0:
                raise ValueError("a: is constant (zero after centring), so no scale can be fitted")
            if self.scale == "norm":
                spread = (moments.centered_bb_diag() if self.center else moments.raw_bb_diag()).sum()
                scale = float((spread / total).sqrt())
            else:
                scale = float(s.sum() / total)
            coef = coef * scale
        intercept = intercept_for(moments, coef, self.center)
        return {"coef_": coef, "intercept_": intercept, "scale_": scale, "rank_": rank}
