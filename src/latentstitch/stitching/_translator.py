"""Latent space translation: map embeddings of one space into another, estimated from parallel anchors only."""

from __future__ import annotations

from typing import ClassVar

import torch
from sklearn.base import clone

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows
from latentstitch._core.params import Rule, check_bool, optional, rule
from latentstitch.relative import StandardScaling
from latentstitch.stitching._base import AffineMap
from latentstitch.stitching._procrustes import Procrustes


def check_stitcher(value: object, name: str) -> AffineMap:
    """A stitcher of ``latentstitch.stitching`` (any ``AffineMap``)."""
    if not isinstance(value, AffineMap):
        raise TypeError(f"{name}: expected a stitcher of latentstitch.stitching, got {type(value).__name__}")
    return value


class LatentTranslator(AffineMap):
    """Translate a new model's embeddings (the *source*) into an old model's space (the *target*), so that a head or
    index built on the old model's vectors reads the new model's directly.

    ``fit(source, target)``: ``source`` = the new model's vectors of some items, ``target`` = the old model's vectors
    of the *same* items in the same order (parallel anchors). Then ``transform(new_vectors)`` gives vectors in the
    old model's space.

    Fitted on parallel anchors only: each side is standard-scaled with its anchors' per-feature mean and standard
    deviation (``latentstitch.relative.StandardScaling``, floored at ``SPREAD_FLOOR`` of the largest spread), the
    ``stitcher`` is fitted from scaled source anchors to scaled target anchors, and the target scaling is undone:
    ``y = inverse_scale_target(stitcher(scale_source(x)))``. This is the direct counterpart of relative
    representations, which map both spaces into a shared anchor-relative space instead; with Procrustes as the
    stitcher it is the latent space translation of Maiorca et al. (NeurIPS 2023).
    ``LatentTranslator(LeastSquaresCV())`` chooses a ridge by cross-validation on the anchors.

    The whole translation is affine, so it is folded into one ``coef_``/``intercept_`` pair: ``transform``,
    ``score``, ``to_torch`` (one ``nn.Linear``), ``save``/``load`` work as for every stitcher.

    Parameters
    ----------
    stitcher : estimator, optional
        Any stitcher of ``latentstitch.stitching`` (cloned, never modified). Default ``Procrustes()``: after
        standard scaling both sides, an orthogonal map (zero-padded when the widths differ).
    standardize : bool
        Standard-scale both sides (default). ``False`` fits the stitcher on the raw anchors.

    Attributes
    ----------
    coef_ : (p, q), intercept_ : (q,)
        The composed map ``transform(x) = x @ coef_ + intercept_``.
    stitcher_ : estimator
        The fitted clone of ``stitcher``, in scaled coordinates.
    source_scaler_, target_scaler_ : StandardScaling or None
        The anchors' scalers (None without ``standardize``).

    Invariances: with ``standardize``, the translated output is unchanged by per-feature rescaling and
    translation of the source (the scaling absorbs them); the stitcher's invariances apply on top (Procrustes:
    rotations). Inputs are 2-D embeddings (N, p) and (N, q).
    """

    def __init__(self, stitcher: AffineMap | None = None, standardize: bool = True):
        self.stitcher = stitcher
        self.standardize = standardize

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "standardize": rule(check_bool),
        "stitcher": optional(check_stitcher),  # None: Procrustes()
    }

    def fit(self, source: ArrayLike, target: ArrayLike) -> LatentTranslator:
        """Fit from parallel anchors. Returns ``self``.

        Parameters
        ----------
        source : (N, p) array or tensor
            The new model's vectors of N anchor items (the space you translate *from*).
        target : (N, q) array or tensor
            The old model's vectors of the same N items, in the same order (the space your head or index reads).
        """
        self._check_params()
        at = as_float_tensor(source, "source", ndim=2, min_rows=1)
        bt = as_float_tensor(target, "target", ndim=2, min_rows=1)
        check_same_rows(at, bt, "source", "target")
        a, b = source, target
        self.source_scaler_ = StandardScaling().fit(a) if self.standardize else None
        self.target_scaler_ = StandardScaling().fit(b) if self.standardize else None
        scaled_a = a if self.source_scaler_ is None else self.source_scaler_.transform(a)
        scaled_b = b if self.target_scaler_ is None else self.target_scaler_.transform(b)
        self.stitcher_ = clone(Procrustes() if self.stitcher is None else self.stitcher).fit(scaled_a, scaled_b)
        coef, intercept = (t.clone() for t in self.stitcher_._map64())
        if self.standardize:
            # x -> ((x - mu_x) / s_x) W + c -> (...) * s_y + mu_y, folded into one affine map
            mean_x, scale_x = (_float64(getattr(self.source_scaler_, n), coef) for n in ("mean_", "scale_"))
            mean_y, scale_y = (_float64(getattr(self.target_scaler_, n), coef) for n in ("mean_", "scale_"))
            intercept = (intercept - (mean_x / scale_x) @ coef) * scale_y + mean_y
            coef = coef / scale_x[:, None] * scale_y[None, :]
        self._set_map(coef, intercept, a, 2)
        return self


def _float64(value: ArrayLike, like: torch.Tensor) -> torch.Tensor:
    return as_float_tensor(value, "scaler").to(device=like.device, dtype=torch.float64)
