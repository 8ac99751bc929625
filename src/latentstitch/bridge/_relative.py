"""The relative family of routes as one estimator: each side described by its similarities to its own anchor vectors.

Both sides land in one shared space (one coordinate per anchor item), so a head trained once on the target's
relative vectors reads the source's relative vectors zero-shot (Moschella et al., ICLR 2023).
"""

from __future__ import annotations

from typing import ClassVar

import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows, wrap_like
from latentstitch._core.params import Rule, check_bool, rule
from latentstitch._core.persist import Persistable
from latentstitch.relative import (
    SPREAD_FLOOR,
    RobustRelativeProjection,
    check_spread_floor,
    get_similarity,
    relative_projection,
)

SIDES = ("source", "target")


def check_similarity(value: object, name: str = "similarity") -> str:
    """A registered similarity's name (``latentstitch.relative.SIMILARITIES``)."""
    get_similarity(value)
    return value


class RelativeRoute(Persistable, BaseEstimator):
    """Relative representations of two embedding spaces on parallel anchors.

    ``fit(source, target)`` keeps the anchors: ``source`` = the new model's vectors of N anchor items, ``target`` =
    the old model's vectors of the same items in the same order. ``transform(x)`` describes new source vectors by
    their similarities to the source anchors, ``transform_target(y)`` describes target vectors by their
    similarities to the target anchors: both (n, N), coordinate j = anchor item j, so they can be compared and a
    head trained on ``transform_target`` output reads ``transform`` output.

    Parameters
    ----------
    similarity : str
        A registered similarity (``latentstitch.relative.SIMILARITIES``; default cosine, the paper's choice).
    center : bool
        Subtract each side's anchor mean first (adds invariance to translations of either space).
    robust : bool
        The robust transform (García-Castellanos et al.): standardise every feature with the side's anchor
        statistics (``RobustRelativeProjection.fit``, floored at ``spread_floor``), then cosine. ``similarity``
        and ``center`` are then unused.
    spread_floor : float
        The robust transform's floor on per-feature spreads (fraction of the largest).

    Invariances: cosine is invariant to rotations and rescalings of either space, with ``center`` also to
    translations; the robust transform to per-feature rescaling, permutation and translation.
    Learned: ``source_anchors_``, ``target_anchors_`` (of the fit inputs' types).
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "similarity": rule(check_similarity),
        "center": rule(check_bool),
        "robust": rule(check_bool),
        "spread_floor": rule(check_spread_floor),
    }

    def __init__(
        self, similarity: str = "cosine", center: bool = False, robust: bool = False, spread_floor: float = SPREAD_FLOOR
    ):
        self.similarity = similarity
        self.center = center
        self.robust = robust
        self.spread_floor = spread_floor

    def fit(self, source: ArrayLike, target: ArrayLike) -> RelativeRoute:
        self._check_params()
        s = as_float_tensor(source, "source", ndim=2, min_rows=2 if self.robust else 1)
        t = as_float_tensor(target, "target", ndim=2, min_rows=2 if self.robust else 1)
        check_same_rows(s, t, "source", "target")
        self.source_anchors_ = wrap_like(s.detach().clone(), source)
        self.target_anchors_ = wrap_like(t.detach().clone(), target)
        self.n_anchors_ = s.shape[0]
        return self

    def transform(self, source: ArrayLike) -> ArrayLike:
        """Relative vectors (n, N) of new source vectors, of the input's type."""
        return self._project(source, "source")

    def transform_target(self, target: ArrayLike) -> ArrayLike:
        """Relative vectors (n, N) of target vectors: what a head for this route is trained on."""
        return self._project(target, "target")

    def _project(self, x: ArrayLike, side: str) -> ArrayLike:
        check_is_fitted(self, "source_anchors_")
        anchors = as_float_tensor(getattr(self, f"{side}_anchors_"), f"{side}_anchors_")
        xt = as_float_tensor(x, "x", ndim=2)
        if xt.shape[1] != anchors.shape[1]:
            raise ValueError(
                f"x: has {xt.shape[1]} features but the {side} anchors have {anchors.shape[1]} (is this the {side} "
                "model's space?)"
            )
        anchors = anchors.to(device=xt.device, dtype=xt.dtype)
        if self.robust:
            module = RobustRelativeProjection(anchors.shape[1], spread_floor=self.spread_floor, eps=0.0)
            return wrap_like(module.fit(anchors).transform(xt), x)
        with torch.no_grad():
            return wrap_like(relative_projection(xt, anchors, self.similarity, center=self.center), x)

    def _check_loaded(self) -> None:
        s = as_float_tensor(self.source_anchors_, "source_anchors_", ndim=2)
        t = as_float_tensor(self.target_anchors_, "target_anchors_", ndim=2)
        if s.shape[0] != t.shape[0] or s.shape[0] != self.n_anchors_:
            raise ValueError(f"source_anchors_ and target_anchors_ hold {s.shape[0]} and {t.shape[0]} anchors")
