"""The ``ensemble`` route: a stacked blend of the best linear translation routes.

After every route is cross-validated, the ``ENSEMBLE_SIZE`` best affine translation routes (by the selection score)
are blended: ``y = sum_i w_i route_i(x)`` with non-negative weights fitted by least squares on their held-out
predictions (stacking). Its own held-out score is cross-fitted: fold k's queries are blended with weights fitted on
the other folds' held-out predictions, so no query scores weights it helped fit. Each member keeps the parameters it
was chosen with. Every member is affine, so the blend is one affine map (``coef_``, ``intercept_``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from scipy.optimize import nnls
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from latentstitch._core.arrays import ArrayLike, as_float_tensor, wrap_like
from latentstitch._core.numerics import matmul
from latentstitch._core.params import Rule, rule
from latentstitch._core.persist import Persistable
from latentstitch.bridge._routes import get_route, register_route

#: How many routes the ensemble blends.
ENSEMBLE_SIZE = 3


def _check_list(value: Any, name: str) -> list:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name}: expected a list, got {type(value).__name__}")
    return list(value)


class StackedRoute(Persistable, BaseEstimator):
    """A fixed non-negative blend of translation routes: ``routes`` (names), their ``params`` (one dict each) and
    ``weights``. ``fit`` fits every member on the anchors and folds the blend into ``coef_`` / ``intercept_``."""

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "routes": rule(_check_list),
        "params": rule(_check_list),
        "weights": rule(_check_list),
    }

    def __init__(self, routes: Any = (), params: Any = (), weights: Any = ()):
        self.routes = routes
        self.params = params
        self.weights = weights

    def fit(self, source: ArrayLike, target: ArrayLike) -> StackedRoute:
        self._check_params()
        if not self.routes or not len(self.routes) == len(self.params) == len(self.weights):
            raise ValueError("routes, params, weights: expected one entry each per blended route (at least one)")
        coef = intercept = 0.0
        for name, params, weight in zip(self.routes, self.params, self.weights, strict=True):
            member = get_route(name).build(**params).fit(source, target)
            if not hasattr(member, "_map64"):
                raise TypeError(f"routes: {name} is not an affine translation route and cannot be blended")
            c, b = member._map64()
            coef, intercept = coef + float(weight) * c, intercept + float(weight) * b
        self.coef_, self.intercept_ = wrap_like(coef, source), wrap_like(intercept, source)
        self.n_features_in_ = coef.shape[0]
        return self

    def transform(self, source: ArrayLike) -> ArrayLike:
        check_is_fitted(self, "coef_")
        x = as_float_tensor(source, "source", ndim=2)
        coef = as_float_tensor(self.coef_, "coef_").to(device=x.device, dtype=torch.float64)
        if x.shape[1] != coef.shape[0]:
            raise ValueError(f"source: has {x.shape[1]} features but the blend was fitted on {coef.shape[0]}")
        intercept = as_float_tensor(self.intercept_, "intercept_").to(device=x.device, dtype=torch.float64)
        return wrap_like((x.detach().double() @ coef + intercept).to(x.dtype), source)

    def _check_loaded(self) -> None:
        coef = as_float_tensor(self.coef_, "coef_")
        if coef.ndim != 2 or tuple(as_float_tensor(self.intercept_, "intercept_").shape) != (coef.shape[1],):
            raise ValueError("coef_ and intercept_ do not form one affine map")


def blend_weights(predictions: list[torch.Tensor], target: torch.Tensor) -> np.ndarray:
    """Non-negative least-squares weights of ``target ~ sum_i w_i predictions[i]`` (all (n, q))."""
    return _nnls(*_normal_equations(predictions, target))


def _normal_equations(predictions: list[torch.Tensor], target: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """``D^T D`` (K x K) and ``D^T y`` of the K predictions (columns of D) and the target, in float64."""
    stacked = torch.stack([p.double().reshape(-1) for p in predictions])
    gram = matmul(stacked, stacked.T).cpu().numpy()
    rhs = matmul(stacked, target.double().reshape(-1, 1)).cpu().numpy()[:, 0]
    return gram, rhs


def _nnls(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    # the K x K normal equations, as a K-row least-squares problem (R w ~ R^-T D^T y, with D^T D = R^T R)
    gram = gram + np.eye(len(gram)) * 1e-12 * max(np.trace(gram), 1e-300)
    upper = np.linalg.cholesky(gram).T
    weights, _ = nnls(upper, np.linalg.solve(upper.T, rhs))
    return weights if weights.sum() > 0 else np.full(len(gram), 1.0 / len(gram))


def ensemble_members(results: list[Any], score: str) -> list[Any]:
    """The best ``ENSEMBLE_SIZE`` fitted affine translation routes by ``score`` (at least two, else none)."""
    usable = [
        r
        for r in results
        if r.score.fitted and r.bridged is not None and r.score.score(score) is not None and _blends(r.score.route)
    ]
    usable.sort(key=lambda r: -r.score.score(score)[0])
    return usable[:ENSEMBLE_SIZE] if len(usable) >= 2 else []


def _blends(name: str) -> bool:
    """Whether the route named ``name`` may be blended (registered with ``blend=True``)."""
    return get_route(name).blend


def ensemble_result(results: list[Any], anchors: Any) -> Any:
    """The ensemble's cross-validation from its members' held-out predictions (weights cross-fitted per fold), or
    None when fewer than two routes can be blended."""
    from latentstitch._core.folds import training_rows
    from latentstitch.bridge._crossval import fold_scores, route_result

    members = ensemble_members(results, anchors.primary)
    if not members:
        return None
    spec = get_route("ensemble")
    partners = [anchors.target64[torch.as_tensor(q, device=anchors.target64.device)].float() for q in anchors.queries]
    # each fold's normal equations once: fold k's weights solve the sum over the other folds', the final the total
    per_fold = [_normal_equations([m.bridged[j] for m in members], partners[j]) for j in range(anchors.scored)]
    total_gram, total_rhs = sum(g for g, _ in per_fold), sum(r for _, r in per_fold)
    folds = []
    for k in range(anchors.scored):
        weights = _nnls(total_gram - per_fold[k][0], total_rhs - per_fold[k][1])
        combined = sum(float(w) * m.bridged[k].double() for w, m in zip(weights, members, strict=True))
        fold = anchors.fold(k, training_rows(anchors.parts, k))
        folds.append(fold_scores(spec, anchors, fold, k, {}, combined))
    weights = _nnls(total_gram, total_rhs)
    params = {
        "routes": [m.score.route for m in members],
        "params": [dict(m.score.params) for m in members],
        "weights": [float(w) for w in weights],
    }
    return route_result(spec, folds, anchors.pool.size, params)


register_route(
    "ensemble",
    StackedRoute,
    description=f"stacking: a non-negative blend of the {ENSEMBLE_SIZE} best linear translation routes, weights fitted "
    "on their held-out predictions (cross-fitted when scored)",
    stack=ensemble_result,
)
