"""The registry of bridge routes: every way of making a new model's vectors usable where an old model's were.

A route is a factory of a scikit-learn-shaped estimator with ``fit(source, target)`` on parallel rows (``source``
= the new model's vectors, ``target`` = the old model's vectors of the same items in the same order) and
``transform(source)``. Two families:

- ``"translation"``: ``transform`` returns vectors in the target's absolute space, so the old model's head or index
  is reused as it is (any estimator of that shape: the stitchers of ``latentstitch.stitching`` behind a
  ``LatentTranslator``, or an alignment estimator).
- ``"relative"``: the estimator also has ``transform_target(target)``; both sides become relative vectors in one
  shared space, and a head is trained once on the target's relative vectors (``Bridge.fit_head``).

Everything in which the two families differ (what ``Bridge.transform`` and ``transform_target`` return, what is
scored of a held-out anchor) is one class each, ``Translation`` and ``Relative`` (``RouteSpec.kind``).

Estimators must be persistable (``latentstitch._core.persist.Persistable``) for a fitted ``Bridge`` to be saved.
Adding a
route is one line::

    register_route("functional_map", FunctionalMap, description="...")            # a translation route
    register_route("my_relative", lambda: RelativeRoute("angular"), family="relative", description="...")

``"relative_<similarity>"`` and ``"relative_<similarity>_centered"`` name a relative route for every registered
similarity (``latentstitch.relative.SIMILARITIES``) without registration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.numerics import matmul, unit_rows
from latentstitch.alignment import (
    BootstrappedProcrustes,
    FunctionalMap,
    GeneralizedProcrustes,
    InverseRelativeProjection,
    PoolProcrustes,
    PoolRidge,
    SelfLearning,
    UnpairedAlignment,
)
from latentstitch.bridge._dead import hold
from latentstitch.bridge._folds import (
    LOW_RANK_RIDGE,
    Candidate,
    low_rank_candidates,
    procrustes_candidates,
    ridge_candidates,
)
from latentstitch.bridge._relative import RelativeRoute
from latentstitch.bridge._relative_folds import relative_candidates
from latentstitch.bridge._scale import rescale
from latentstitch.relative import SIMILARITIES
from latentstitch.stitching import (
    LatentTranslator,
    LeastSquares,
    LeastSquaresCV,
    LeastSquaresLOO,
    Procrustes,
    ReducedRank,
    ResidualAdapter,
    SparseLasso,
)


class Family:
    """Everything in which the routes of one family differ, in one place: what a bridge's ``transform`` and
    ``transform_target`` return, and what is scored of a held-out anchor while cross-validating (``anchors``: the
    bridge's ``_crossval.Anchors``, which knows how to score). One instance per family (``family_of``)."""

    name: ClassVar[str]
    #: Whether the route's parameter settings are compared by ``_trials.setting_scores`` (bridged target vectors).
    fast_trials: ClassVar[bool] = False

    def output_width(self, n_anchors: int, n_features_target: int) -> int:
        """The width of ``Bridge.transform``'s output."""
        raise NotImplementedError

    def bridged(self, estimator: Any, source: Any, scales: tuple[float, float], dead: Any, values: Any) -> Any:
        """``Bridge.transform`` of source rows: ``estimator`` fitted on the anchors multiplied by ``scales`` (source,
        target), the target features ``dead`` held at ``values``."""
        raise NotImplementedError

    def consumer_input(self, estimator: Any, target: Any, scale: float, apply: Callable[[Any, Any], Any]) -> Any:
        """``Bridge.transform_target``: what the consumer of a bridged vector is trained on, from target rows
        (``scale``: the target anchors' before fitting; ``apply(function, rows)`` maps a row-wise function over eager
        or dask rows)."""
        raise NotImplementedError

    def held_out(self, estimator: Any, queries: Any, target: Any, device: torch.device) -> list[Candidate]:
        """The cross-validation output of ``estimator`` fitted on a fold's training anchors (``queries``: the
        held-out source rows, ``target``: every target anchor), as a fast path returns it."""
        raise NotImplementedError

    def fold_output(self, anchors: Any, fold: Any, output: torch.Tensor) -> tuple[Any, torch.Tensor, Any, Any]:
        """``(bridged, sims, r2, r2_scaled)`` of a fold's ``output``: the bridged queries in the target's units
        (None when the route has none), their similarity rows against every target vector, and R^2 (None too)."""
        raise NotImplementedError

    def agreement(self, spec: RouteSpec, anchors: Any, fold: Any, params: dict[str, Any], bridged: Any) -> Any:
        """Per held-out query of ``fold``: 1 when the head's prediction from the bridged anchor equals its
        prediction from the true target vector."""
        raise NotImplementedError

    def consumer_advice(self, cli: bool) -> str:
        """What the user does with the bridged vectors, in words (``cli``: in command-line terms)."""
        raise NotImplementedError


class Translation(Family):
    """``transform`` returns vectors in the target's absolute space: the old model's head or index reads them."""

    name = "translation"
    fast_trials = True

    def output_width(self, n_anchors: int, n_features_target: int) -> int:
        return n_features_target

    def bridged(self, estimator: Any, source: Any, scales: tuple[float, float], dead: Any, values: Any) -> Any:
        return hold(rescale(estimator.transform(rescale(source, scales[0])), 1.0 / scales[1]), dead, values)

    def consumer_input(self, estimator: Any, target: Any, scale: float, apply: Callable[[Any, Any], Any]) -> Any:
        return target

    def held_out(self, estimator: Any, queries: Any, target: Any, device: torch.device) -> list[Candidate]:
        bridged = as_float_tensor(estimator.transform(queries), "bridged").detach()
        return [({}, bridged.to(device=device, dtype=torch.float64))]

    def fold_output(self, anchors: Any, fold: Any, output: torch.Tensor) -> tuple[Any, torch.Tensor, Any, Any]:
        bridged = anchors.held(output, fold.train)
        return (bridged, anchors.similarities(bridged), *anchors.r_squared(bridged, fold.queries))

    def agreement(self, spec: RouteSpec, anchors: Any, fold: Any, params: dict[str, Any], bridged: Any) -> Any:
        return anchors.head_agreement(bridged, fold.queries)

    def consumer_advice(self, cli: bool) -> str:
        return "the old model's head or index reads the bridged vectors as they are"


class Relative(Family):
    """Both sides become relative vectors in one shared space (``transform_target`` too): the consumer is trained
    once on the target's relative vectors."""

    name = "relative"

    def output_width(self, n_anchors: int, n_features_target: int) -> int:
        return n_anchors

    def bridged(self, estimator: Any, source: Any, scales: tuple[float, float], dead: Any, values: Any) -> Any:
        return estimator.transform(rescale(source, scales[0]))

    def consumer_input(self, estimator: Any, target: Any, scale: float, apply: Callable[[Any, Any], Any]) -> Any:
        return apply(estimator.transform_target, rescale(target, scale))

    def held_out(self, estimator: Any, queries: Any, target: Any, device: torch.device) -> list[Candidate]:
        sides = (estimator.transform(queries), estimator.transform_target(target))
        left, right = (
            unit_rows(as_float_tensor(x, "relative").detach().double(), "relative", eps=1e-30) for x in sides
        )
        return [({"estimator": estimator}, matmul(left, right.T))]

    def fold_output(self, anchors: Any, fold: Any, output: torch.Tensor) -> tuple[Any, torch.Tensor, Any, Any]:
        return None, output, None, None

    def agreement(self, spec: RouteSpec, anchors: Any, fold: Any, params: dict[str, Any], bridged: Any) -> Any:
        return anchors.proxy_agreement(spec, fold, params.get("estimator"))

    def consumer_advice(self, cli: bool) -> str:
        if cli:
            return (
                "retrain the old consumer once on the old model's vectors as this route reads them (`latentstitch "
                "bridge apply BRIDGE OLD_VECTORS --target -o OUT`), then it reads `latentstitch bridge apply BRIDGE "
                "NEW -o OUT`"
            )
        return (
            "train the consumer once on the target's relative vectors (Bridge.fit_head, or transform_target), then "
            "it reads the bridged vectors"
        )


_FAMILIES = {family.name: family for family in (Translation(), Relative())}
FAMILIES = tuple(_FAMILIES)


def family_of(name: str) -> Family:
    """The family named ``name`` (one of ``FAMILIES``)."""
    if not isinstance(name, str) or name not in _FAMILIES:
        raise ValueError(f"family: expected one of {', '.join(map(repr, FAMILIES))}; got {name!r}")
    return _FAMILIES[name]


@dataclass(frozen=True)
class RouteSpec:
    """A registered route: its name, family, a factory of unfitted estimators, a one-line description, and whether
    ``Bridge(routes="auto")`` tries it; its fast cross-validation ``path``; whether the ``ensemble`` may blend it
    (``blend``: an affine translation route); ``stack``: a route scored from the other routes' cross-validation
    instead of its own (the ensemble's ``_ensemble.ensemble_result``). ``pools``: a semi-supervised route, fitted as
    ``fit(source, target, source_pool=..., target_pool=...)`` and tried only when a fit is given both pools.
    ``kind``: its ``Family``, where the families differ."""

    name: str
    factory: Callable[..., Any]
    family: str
    description: str
    auto: bool
    path: Callable[[Any], list] | None = None
    blend: bool = False
    stack: Callable[[list, Any], Any] | None = None
    pools: bool = False

    @property
    def kind(self) -> Family:
        return family_of(self.family)

    def build(self, **params: Any) -> Any:
        """An unfitted estimator, with the route's own parameters (e.g. ``ridge=0.01``) when given."""
        params = {key: value for key, value in params.items() if key != "estimator"}
        return self.factory(**params) if params else self.factory()


ROUTES: dict[str, RouteSpec] = {}


def register_route(
    name: str,
    factory: Callable[..., Any],
    *,
    family: str = "translation",
    description: str = "",
    auto: bool = False,
    path: Callable[[Any], list] | None = None,
    blend: bool = False,
    stack: Callable[[list, Any], Any] | None = None,
    pools: bool = False,
) -> RouteSpec:
    """Add a route under ``name``: ``factory()`` builds an unfitted estimator (a class with default arguments works).
    ``auto=True`` adds it to the routes ``Bridge(routes="auto")`` tries (``AUTO_ROUTES`` lists the built-in ones).
    ``path(fold)``, optional: a fast path for cross-validation reading the fold's shared decompositions
    (``latentstitch.bridge._folds``), returning ``[(params, output), ...]``: one entry per parameter setting, with
    ``factory(**params)`` the estimator it stands for, or ``None`` to decline a fold; without one (or declined), the
    route is fitted on every fold. ``blend=True``: an affine translation route the ``ensemble`` may blend (its fitted
    estimator has ``_map64``). ``stack(results, anchors)``, optional: the route is scored from the other routes'
    cross-validation (``_crossval.RouteResult`` list) instead of its own, returning its result or None.
    ``pools=True``: the estimator's ``fit`` also takes ``source_pool=`` and ``target_pool=`` (unpaired vectors of each
    model, ``Bridge.fit``'s pools with every anchor's vector left out); the route is tried only when both are given
    (with ``auto=True``, then among "auto")."""
    family_of(family)
    if not isinstance(name, str) or not name or name == "auto":
        raise ValueError(f"name: expected a non-empty route name other than 'auto', got {name!r}")
    if name in ROUTES:
        raise ValueError(f"a route named {name!r} is already registered")
    if not callable(factory):
        raise TypeError(f"factory: expected a callable that builds an estimator, got {type(factory).__name__}")
    spec = RouteSpec(name, factory, family, description, auto, path, blend, stack, pools)
    ROUTES[name] = spec
    return spec


def get_route(name: str) -> RouteSpec:
    """The route registered under ``name``, or a relative route named after a registered similarity."""
    if name in ROUTES:
        return ROUTES[name]
    if isinstance(name, str) and name.startswith("relative_"):
        similarity, centered = name[len("relative_") :], False
        if similarity.endswith("_centered"):
            similarity, centered = similarity[: -len("_centered")], True
        if similarity in SIMILARITIES:
            return RouteSpec(
                name,
                lambda: RelativeRoute(similarity, center=centered),
                "relative",
                f"{similarity} similarities to the anchors"
                + (", each side centred on its anchor mean" if centered else ""),
                False,
            )
    known = ", ".join(sorted(ROUTES))
    raise ValueError(
        f"routes: unknown route {name!r}; registered: {known}, and relative_<similarity>[_centered] for the "
        f"similarities {', '.join(sorted(SIMILARITIES))}"
    )


def resolve_routes(routes: str | Sequence[str]) -> list[RouteSpec]:
    """``"auto"`` (the routes registered with ``auto=True``), one name, or a sequence of names (``"auto"`` may be
    one of them), in order and without repeats."""
    names = [routes] if isinstance(routes, str) else list(routes) if hasattr(routes, "__iter__") else None
    if not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f"routes: expected 'auto', a route name or a list of route names, got {routes!r}")
    specs: dict[str, RouteSpec] = {}
    for name in names:
        for spec in (
            [s for s in ROUTES.values() if s.auto or s.name in AUTO_ROUTES] if name == "auto" else [get_route(name)]
        ):
            specs.setdefault(spec.name, spec)
    return list(specs.values())


# --- the built-in routes ---------------------------------------------------------------------------------------
#: The routes ``Bridge(routes="auto")`` tries: set from ``python -m benchmarks bridge_generalisation`` (a route that
#: wins nowhere there is not tried). Evidence (results/bridge/generalisation, "The shipped library", development half:
#: 24 runs at 100 and 768 anchors, every route refitted with the parameters the library chose and measured by four
#: consumers; a "win" is being the best route or within 0.01 of it, 84 cases): ridge_raw 34, relative_robust 25,
#: procrustes 21, relative_centered 20, ensemble 19, low_rank 13, procrustes_scaled 11; ``relative`` (plain cosine)
#: 0: dropped. Routes outside this table win some cases too (ridge 29, ridge_cv 28, generalized_procrustes 18,
#: least_squares 14, mlp_adapter 13, inverse_relative 4, reduced_rank 3) but ``Bridge(routes=<every route>)`` picked
#: for the index no better than "auto" there (within 0.01 of the best route in 22 of 24 runs either way), and
#: those without a fast path (ridge_cv's inner CV, mlp_adapter, generalized_procrustes, inverse_relative) cost many
#: times the rest: name them to try them. Edit this table to change them. ``procrustes_norm`` (fourth session):
#: generalized_procrustes's map for two spaces (``procrustes_scaled`` with the target's spread kept) on the Procrustes
#: fold fast path; simulated from the every-route tables as generalized_procrustes, adding it lifted the index's
#: "within 0.01 of the best route" 0.858 -> 0.925 on the fresh pairs, 0.562 -> 0.583 on validation, 0.917 unchanged
#: on development; judged once on the banked pairs (results/bridge/generalisation/banked).
AUTO_ROUTES = (
    "ridge_raw",
    "low_rank",
    "procrustes",
    "procrustes_scaled",
    "procrustes_norm",
    "relative_centered",
    "relative_robust",
    "ensemble",
)


def _ridge(ridge: float = 0.01, standardize: bool = True) -> LatentTranslator:
    return LatentTranslator(LeastSquares(ridge=ridge, ridge_units="relative"), standardize=standardize)


register_route(
    "ridge",
    _ridge,
    description="ridge least squares between the standard-scaled sides, the penalty chosen on the selection score "
    "along the ridge path",
    path=lambda fold: ridge_candidates(fold, True),
    blend=True,
)
register_route(
    "ridge_raw",
    lambda ridge=0.01: _ridge(ridge, standardize=False),
    description="ridge least squares on the raw vectors (every target feature weighted by its own variance), the "
    "penalty chosen on the selection score along the ridge path",
    path=lambda fold: ridge_candidates(fold, False),
    blend=True,
)
register_route(
    "low_rank",
    lambda rank=32: ReducedRank(rank=rank, ridge=LOW_RANK_RIDGE, ridge_units="relative"),
    description="low-rank affine map (reduced-rank ridge on the raw vectors), the rank chosen on the selection score",
    path=low_rank_candidates,
    blend=True,
)
register_route(
    "procrustes",
    lambda: LatentTranslator(Procrustes(unspanned="zero")),
    description="orthogonal map between the standard-scaled sides (Maiorca et al., NeurIPS 2023); with no more "
    "anchors than features, the directions no anchor spans map to zero",
    path=lambda fold: procrustes_candidates(fold, scaled=False),
    blend=True,
)
register_route(
    "procrustes_scaled",
    lambda: LatentTranslator(Procrustes(center=True, scale=True, unspanned="zero"), standardize=False),
    description="orthogonal map with a shift and one isotropic scale, on the raw vectors",
    path=lambda fold: procrustes_candidates(fold, scaled=True),
    blend=True,
)
register_route(
    "procrustes_norm",
    lambda: LatentTranslator(Procrustes(center=True, scale="norm", unspanned="zero"), standardize=False),
    description="orthogonal map with a shift, scaled to keep the target's spread (not shrunk towards its mean), on "
    "the raw vectors: for two spaces, generalised Procrustes's translation",
    path=lambda fold: procrustes_candidates(fold, scaled="norm"),
)
register_route(
    "ridge_cv",
    lambda: LatentTranslator(LeastSquaresCV()),
    description="ridge least squares between the standard-scaled sides, the ridge chosen by its own 5-fold CV of "
    "R^2 on standard-scaled targets (the bridge's earlier default)",
    blend=True,
)
register_route(
    "ridge_loo",
    lambda: LatentTranslator(LeastSquaresLOO(), standardize=False),
    description="ridge least squares on the raw vectors with an intercept, the alpha of least leave-one-out error "
    "(scikit-learn's RidgeCV, the map a user fits first; migrate tries it)",
    blend=True,
)
register_route(
    "least_squares",
    lambda: LatentTranslator(LeastSquares()),
    description="unregularised least squares between the standard-scaled sides (not unique with fewer anchors "
    "than features)",
    blend=True,
)
register_route(
    "reduced_rank",
    lambda: LatentTranslator(ReducedRank(rank=32)),
    description="least squares of rank at most 32 between the standard-scaled sides",
)
register_route(
    "sparse_lasso",
    lambda: LatentTranslator(SparseLasso(alpha=0.01)),
    description="L1-penalised least squares (alpha 0.01) between the standard-scaled sides",
)
register_route(
    "relative",
    lambda: RelativeRoute("cosine"),
    family="relative",
    description="cosine similarities to the anchors (Moschella et al., ICLR 2023)",
    path=lambda fold: relative_candidates(fold, "plain"),
)
register_route(
    "relative_centered",
    lambda: RelativeRoute("cosine", center=True),
    family="relative",
    description="cosine similarities to the anchors, each side centred on its anchor mean",
    path=lambda fold: relative_candidates(fold, "centered"),
)
register_route(
    "relative_robust",
    lambda: RelativeRoute(robust=True),
    family="relative",
    description="robust transform: each feature standardised on the anchors, then cosine (arXiv 2409.10967)",
    path=lambda fold: relative_candidates(fold, "robust"),
)
register_route(
    "mlp_adapter",
    ResidualAdapter,
    description="a small residual MLP on top of a ridge map, trained on the anchors with early stopping on a "
    "held-out tenth (Drift-Adapter, EMNLP 2025)",
)

# --- latentstitch.alignment's estimators, as translation routes (tried when named) ----------------------------------
register_route(
    "inverse_relative",
    InverseRelativeProjection,
    description="cosines to the source anchors, inverted by least squares onto the normalised target anchors and "
    "rescaled to the target's norms (Maiorca et al. 2024)",
)
register_route(
    "generalized_procrustes",
    GeneralizedProcrustes,
    description="both sides rotated into one shared universe (generalised Procrustes), then out into the target",
)
register_route(
    "functional_map",
    FunctionalMap,
    description="a map between the two k-NN graphs' Laplacian eigenbases, fitted on the anchors (Fumero et al. 2024)",
)
register_route(
    "unpaired",
    UnpairedAlignment,
    description="mini-vec2vec (Dar 2025): k-means, quadratic assignment and Procrustes, ignoring which rows pair; "
    "a baseline for what the pairs add",
)

# --- semi-supervised routes: the pairs and two pools of unpaired vectors (``Bridge.fit(source_pool=, target_pool=)``)
#: Tried with "auto" whenever both pools are given (issue 39: the pools must not hurt when they do not help: the same
#: cross-validation on the real anchors decides); absent without pools.
POOL_ROUTES = ("procrustes_pools", "self_learning", "bootstrap_pools", "ridge_pools")
register_route(
    "procrustes_pools",
    PoolProcrustes,
    description="Procrustes on the pairs refined over the two pools (Rosetta-style): mutual nearest neighbours under "
    "CSLS between the mapped source pool and the target pool as pseudo-pairs, the pairs weighted to count, refitted "
    "until the matching stops changing",
    auto=True,
    pools=True,
)
register_route(
    "self_learning",
    SelfLearning,
    description="VecMap's self-learning (Artetxe et al. 2018): a dictionary seeded by the pairs, re-induced from both "
    "directions' nearest neighbours under CSLS over the pools (stochastic induction), orthogonal map refitted until "
    "the objective stops improving",
    auto=True,
    pools=True,
)
register_route(
    "bootstrap_pools",
    BootstrappedProcrustes,
    description="the pairs grown over the pools by bootstrapped anchors (relative vectors matched by optimal "
    "transport, Cannistraci et al. 2023), then Procrustes on the pairs and the confident grown pairs",
    auto=True,
    pools=True,
)
#: ridge_pools joins "auto" on development data (results/bridge/pool-ridge-dev: BBC News, MiniLM-L6 <-> paraphrase-
#: MiniLM-L3 both ways, 100 anchors, disjoint pools of 840, 20 runs): a standard-scaled head read its bridged vectors at
#: 0.994x the weaker encoder's own macro-F1 against the paired pick's 0.967x, better in 20 of 20 runs.
register_route(
    "ridge_pools",
    PoolRidge,
    description="ridge (affine) map on the pairs and the pseudo-pairs of procrustes_pools's matching of the two "
    "pools, the pairs weighted to carry half the weight, the ridge of least leave-one-out error of the pairs: can "
    "rescale features, which an orthogonal map cannot",
    auto=True,
    pools=True,
)
