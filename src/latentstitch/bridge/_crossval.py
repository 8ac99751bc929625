"""Cross-validation of one bridge route over folds of the anchor pairs.

Every fold is built once (``Anchors.fold``) and shared by every route, so the decompositions of ``_folds`` are
computed once per fold whatever the number of routes and parameters. A route scores its held-out anchors (at most
``MAX_QUERIES`` of them) against every target vector given (``_pool``); a route with parameters (the ridge path, the
ranks) keeps the setting with the best pooled selection score (``Anchors.primary``), so the penalty is chosen on
the same score as the route, with no inner cross-validation.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import as_float_tensor, take_rows
from latentstitch._core.folds import training_rows
from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch.bridge._dead import dead_features, hold
from latentstitch.bridge._folds import Candidate, Fold, PartMoments
from latentstitch.bridge._head import LinearHead
from latentstitch.bridge._pool import (
    Pool,
    item_scores,
    partner_ranks,
    query_rows,
    r_squared,
    scored_folds,
    squared_errors,
    translation_sims,
)
from latentstitch.bridge._relative_folds import RelativeCache
from latentstitch.bridge._results import RouteScore
from latentstitch.bridge._routes import RouteSpec
from latentstitch.bridge._scores import chance_mrr, predictions
from latentstitch.bridge._select import Criterion
from latentstitch.bridge._trials import TRIAL_SCORES, setting_scores
from latentstitch.embeddings import match_ids
from latentstitch.relative import SPREAD_FLOOR, floored_spread

#: Fewest held-out anchor pairs per fold: retrieval among fewer candidates says little.
MIN_PER_FOLD = 5
#: A route is "clearly better than shuffled pairs" when its pooled held-out MRR is this many standard errors above
#: the MRR of shuffled pairs (with three z, a route carrying no information passes about once in 700 fits).
CLEAR_Z = 3.0
#: Held-out anchors (at most, in all) on which a route's own parameter settings (ridge penalties, ranks) are compared;
#: the chosen setting is then scored on every scored anchor.
PARAM_QUERIES = 200
#: RouteScore field -> per-item score name.
ITEM_NAMES = {"mrr": "rr", "top1": "top1", "recall_at_k": "hit_k", "knn_jaccard": "jaccard", "cosine": "cosine"}
#: What a route that cannot be fitted raises: the route is then reported as failed, with the error's words.
FIT_ERRORS = (ValueError, TypeError, np.linalg.LinAlgError, torch.linalg.LinAlgError)


def matched_order(source_ids: Any, target_ids: Any, source: Any, target: Any) -> np.ndarray:
    for name, ids, rows in (("source_ids", source_ids, source), ("target_ids", target_ids, target)):
        if len(ids) != len(rows):
            raise ValueError(f"{name}: expected one id per row ({len(rows)}), got {len(ids)}")
    return match_ids(source_ids, target_ids, ("source_ids", "target_ids"), ("the source", "the target"))


@dataclass
class Anchors:
    """The parallel anchors every route is scored on: the two sides (as given, and in float64), the folds, the seed,
    the scored held-out rows per fold (``queries``), the pool of every target vector (the anchors', then ``extra``:
    the old model's vectors of other items, ``Bridge.fit(target_pool=...)``), the new model's vectors of other items
    (``source_pool``: with ``extra``, the pools a semi-supervised route is fitted with), and with a head, the head and
    its predictions on the true target vectors (``reference``)."""

    source: Any
    target: Any
    parts: list[np.ndarray]
    seed: int
    head: Callable[[Any], Any] | None = None
    reference: np.ndarray | None = None
    score: str = "mrr"
    extra: Any = None
    source_pool: Any = None
    _folds: dict[tuple[int, int], Fold] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        s = as_float_tensor(self.source, "source").detach()
        t = as_float_tensor(self.target, "target").detach().to(s.device)
        self.source64, self.target64 = s.to(torch.float64), t.to(torch.float64)
        # the folds' products and decompositions run in the data's own precision (float32 for float32 or half
        # embeddings: float32 anchors carry no more digits than float32 products keep; float64 data stay float64)
        work = torch.promote_types(s.dtype, torch.float32)
        self.source_work, self.target_work = s.to(work), t.to(work)
        extra = None if self.extra is None else as_float_tensor(self.extra, "target_pool").detach()
        extra = None if extra is None else extra.to(device=s.device, dtype=work)
        # ``index``: what ``estimate_`` ranks a held-out anchor among (the anchors, then ``extra``); ``pool``: what the
        # choice ranks it among: the same, unless both pools are given (``choose_on_anchors``)
        self.index = Pool(self.target_work if extra is None else torch.cat([self.target_work, extra]))
        self.pool = Pool(self.target_work) if self.choose_on_anchors else self.index
        # the per-feature spreads a standard-scaling consumer divides by (LinearHead's StandardScaling)
        self.target_scale = floored_spread(self.target64.std(dim=0, correction=0), SPREAD_FLOOR)
        self.dead = dead_features(self.target64)  # held at their training mean by translation routes (_dead)
        self.relative = RelativeCache(self.source_work, self.target_work, self.parts, extra)
        self.moments: PartMoments | None = None
        self.scored = scored_folds(self.parts)
        self.queries = query_rows(self.parts[: self.scored], self.seed)
        total = sum(map(len, self.queries))
        share = min(1.0, PARAM_QUERIES / total)
        self.param_rows = [np.arange(len(q)) < max(2, round(len(q) * share)) for q in self.queries]
        rng = np.random.default_rng([self.seed, 11])
        self.others = [_other_items(q, len(s), rng) for q in self.queries]  # another anchor's partner
        self.criterion = Criterion.of(self.score, self.head)

    @property
    def primary(self) -> str:
        """The score the choice, each route's parameters and the anchor budget compare (``criterion.score``)."""
        return self.criterion.score

    @property
    def choose_on_anchors(self) -> bool:
        """Whether the choice (routes, their parameters, the ensemble's members) ranks a held-out anchor among the
        anchors only while ``estimate_`` ranks it among the anchors and ``extra``: when both pools are given, so the
        pools move the choice only through a semi-supervised route and its test (``_select.pool_test``), never among
        the routes without pools (the pick among those is the one a fit without pools makes)."""
        return self.extra is not None and self.source_pool is not None

    @property
    def pools(self) -> dict[str, Any]:
        """The keyword arguments that give a semi-supervised route's ``fit`` the two pools (no anchor's vector among
        them: ``_pool.pool_rows``); empty unless both were given."""
        if self.source_pool is None or self.extra is None:
            return {}
        return {"source_pool": self.source_pool, "target_pool": self.extra}

    @property
    def n_train(self) -> int:
        """The fewest training anchors of any fold."""
        return len(self.source64) - max(map(len, self.parts))

    def fold(self, k: int, train: np.ndarray, key: int = 0) -> Fold:
        if (k, key) not in self._folds:
            full = key == 0
            if full and self.moments is None and len(self.source64) - len(self.parts[k]) >= self.source64.shape[1]:
                self.moments = PartMoments(self.source_work, self.target_work, self.parts)
            moments = self.moments if full else None
            fold = Fold(
                self.source_work, self.target_work, train, self.queries[k], self.relative, moments, k if full else None
            )
            self._folds[(k, key)] = fold
        return self._folds[(k, key)]

    # --- how a held-out anchor is scored (a route's family, ``_routes.Family``, says which of these it reads) ------
    def held(self, bridged: torch.Tensor, train: np.ndarray) -> torch.Tensor:
        """Bridged target vectors with the dead target features at their fold-training mean (``_dead``)."""
        if not len(self.dead):
            return bridged
        rows = torch.as_tensor(train, device=self.target64.device)
        return hold(bridged, self.dead, self.target64[:, self.dead.to(rows.device)][rows].mean(dim=0))

    def similarities(self, bridged: torch.Tensor) -> torch.Tensor:
        """Cosine of each bridged target vector to every target vector of the index (the anchors, then ``extra``)."""
        return translation_sims(bridged, self.index)

    def r_squared(self, bridged: torch.Tensor, queries: np.ndarray) -> tuple[float, float]:
        """R^2 of bridged target vectors against their partners: in the target's units and standard-scaled."""
        partners = self.target64[torch.as_tensor(queries, device=bridged.device)]
        return r_squared(squared_errors(bridged, partners, self.target_scale))

    def head_agreement(self, bridged: torch.Tensor, queries: np.ndarray) -> np.ndarray:
        """Per query: 1 when the head reads the bridged target vector as it reads the true one."""
        vectors = bridged.to(torch.float32)
        if isinstance(self.target, torch.Tensor):
            vectors = vectors.to(self.target.device)
        else:
            vectors = vectors.cpu().numpy()
        return (predictions(self.head, vectors) == self.reference[queries]).astype(np.float64)

    def proxy_agreement(self, spec: RouteSpec, fold: Fold, estimator: Any = None) -> np.ndarray:
        """Per query, for a relative route (``estimator`` fitted on the fold, or fitted now): 1 when a ``LinearHead``
        trained on the training folds' relative target vectors to reproduce the head reads the bridged query as the
        head reads the true target vector."""
        reference, queries = self.reference, fold.queries
        if estimator is None:
            estimator, _ = fit_fold(spec, self, fold.train)
        labels = reference[fold.train]
        if np.unique(labels).size < 2:
            return (labels[0] == reference[queries]).astype(np.float64)
        proxy = LinearHead().fit(estimator.transform_target(take_rows(self.target, fold.train)), labels)
        return (proxy.predict(estimator.transform(take_rows(self.source, queries))) == reference[queries]).astype(
            np.float64
        )


def _other_items(queries: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """For each query, another item: its partner when the pairs are shuffled."""
    other = rng.integers(0, n - 1, size=len(queries))
    return other + (other >= queries)


@dataclass
class RouteResult:
    """One route's cross-validation: its ``score`` row, the per-item held-out scores of its chosen parameters
    (``items``: name -> array over every scored query, fold after fold; None when the route failed), the bridged
    queries of a translation route per fold (for the ensemble), how many fits warned of rank deficiency, and each
    score's value on each fold (``per_fold``: name -> one value per scored fold, what ``score`` spreads) and, when
    the choice ranks among the anchors only (``Anchors.choose_on_anchors``), the same with each held-out anchor ranked
    among the whole index (``index_per_fold``: what the pool test compares)."""

    score: RouteScore
    items: dict[str, np.ndarray] | None = None
    bridged: list[torch.Tensor] | None = None
    rank_deficient: int = 0
    per_fold: dict[str, list[float]] | None = None
    index_per_fold: dict[str, list[float]] | None = None

    @property
    def reciprocal_ranks(self) -> np.ndarray | None:
        return None if self.items is None else self.items["rr"]


def _nothing() -> None:
    pass


def cross_validate_route(
    spec: RouteSpec,
    anchors: Anchors,
    *,
    subsets: list[np.ndarray] | None = None,
    advance: Callable[[], None] = _nothing,
) -> RouteResult:
    """One route's scores on every fold (``subsets``: the training rows to use per fold, for the anchor budget);
    ``advance`` is called after every fold. A route with a fast path (``spec.path``) reads the fold's shared
    decompositions; any other is fitted on the fold's training rows."""
    started = time.perf_counter()
    outputs: dict[str, list[tuple[Fold, int, torch.Tensor]]] = {}
    params_of: dict[str, dict[str, Any]] = {}
    deficient = 0
    for k in range(anchors.scored):
        train = training_rows(anchors.parts, k) if subsets is None else subsets[k]
        fold = anchors.fold(k, train, 0 if subsets is None else len(train))
        try:
            candidates, warned = _candidates(spec, anchors, fold)
        except FIT_ERRORS as error:
            advance()
            failed = RouteScore(spec.name, spec.family, spec.description, error=_words(error))
            failed.seconds = time.perf_counter() - started
            return RouteResult(failed, rank_deficient=deficient)
        deficient += warned
        for params, output in candidates:
            key = repr(sorted((n, v) for n, v in params.items() if n != "estimator"))
            params_of.setdefault(key, params)
            outputs.setdefault(key, []).append((fold, k, output))
        advance()
    folds_seen = anchors.scored
    outputs = {key: entries for key, entries in outputs.items() if len(entries) == folds_seen} or outputs
    best = next(iter(outputs))
    if len(outputs) > 1:  # compare the settings on a share of the queries, then score the best on all of them
        best = _best_setting(spec, anchors, outputs)
    folds = [fold_scores(spec, anchors, fold, k, params_of[best], output) for fold, k, output in outputs[best]]
    result = route_result(spec, folds, anchors.pool.size, params_of[best], deficient)
    result.score.seconds = time.perf_counter() - started
    return result


def _best_setting(spec: RouteSpec, anchors: Anchors, outputs: dict[str, list[tuple[Fold, int, torch.Tensor]]]) -> str:
    """The setting with the best pooled selection score on the parameter-comparison queries (ties: the first). A
    translation route's settings are scored together, only on that score (``_trials.setting_scores``); any other
    route's, or the agreement with a head, by ``fold_scores`` setting by setting."""
    score = anchors.primary
    if spec.kind.fast_trials and score in TRIAL_SCORES:
        trial = setting_scores(anchors, outputs, score)
    else:
        trial = {key: [_subset_scores(spec, anchors, *entry) for entry in entries] for key, entries in outputs.items()}
    return max(trial, key=lambda key: pooled(trial[key], score))


def _subset_scores(spec: RouteSpec, anchors: Anchors, fold: Fold, k: int, output: torch.Tensor) -> dict[str, Any]:
    """``fold_scores`` on the fold's parameter-comparison queries only."""
    keep = anchors.param_rows[k]
    sub = Fold(fold.source, fold.target, fold.train, fold.queries[keep], fold.relative)
    return fold_scores(spec, anchors, sub, k, {}, output[torch.as_tensor(keep, device=output.device)], keep)


def _candidates(spec: RouteSpec, anchors: Anchors, fold: Fold) -> tuple[list[Candidate], bool]:
    fast = spec.path(fold) if spec.path is not None else None
    if fast is not None:  # a path may decline a fold (None): the estimator is fitted instead
        return fast, False
    estimator, warned = fit_fold(spec, anchors, fold.train)
    queries = take_rows(anchors.source, fold.queries)
    return spec.kind.held_out(estimator, queries, anchors.target, anchors.source64.device), warned


def fold_scores(
    spec: RouteSpec,
    anchors: Anchors,
    fold: Fold,
    k: int,
    params: dict[str, Any],
    output: torch.Tensor,
    keep: np.ndarray | None = None,
) -> dict[str, Any]:
    """One candidate's per-item scores on one fold (``output``: bridged queries in the target's units for a
    translation route, similarity rows against every target item for a relative route), and its fold's R^2."""
    queries = fold.queries
    bridged, sims, r2, r2_scaled = spec.kind.fold_output(anchors, fold, output)  # against every item of the index
    index_items = None
    if anchors.pool is not anchors.index:  # the choice reads the anchors' columns; the estimate, the pool test all
        index_items = item_scores(sims, queries, anchors.index)
        sims = sims[:, : anchors.pool.size]
    items = item_scores(sims, queries, anchors.pool)
    if index_items is not None:
        items["hit_k"] = index_items["hit_k"]
    rows = torch.arange(len(queries), device=sims.device)
    items["cosine"] = sims[rows, torch.as_tensor(queries, device=sims.device)].double().cpu().numpy()
    others = anchors.others[k] if keep is None else anchors.others[k][keep]
    items["shuffled_rr"] = (1.0 / partner_ranks(sims, others)).cpu().numpy()
    if anchors.criterion.with_head:
        items["agreement"] = spec.kind.agreement(spec, anchors, fold, params, bridged)
    bridged32 = None if bridged is None else bridged.to(torch.float32)
    return {"items": items, "r2": r2, "r2_scaled": r2_scaled, "bridged": bridged32, "index_items": index_items}


def pooled(folds: list[dict[str, Any]], score: str) -> float:
    """A candidate's score pooled over every scored query (R^2: mean over folds); -inf when it has none."""
    if score in ("r2", "r2_scaled"):
        values = [f[score] for f in folds]
        return -math.inf if any(v is None for v in values) else float(np.mean(values))
    value = float(np.mean(np.concatenate([f["items"][ITEM_NAMES.get(score, score)] for f in folds])))
    return -math.inf if value != value else value


def route_result(
    spec: RouteSpec, folds: list[dict[str, Any]], pool_size: int, params: dict[str, Any], deficient: int = 0
) -> RouteResult:
    """A route's result from its chosen setting's ``fold_scores``: the row (``summary``), the per-item scores fold
    after fold, the bridged queries per fold (translation routes) and each score's value per fold."""
    per_fold = fold_values(folds)
    score = summary(spec, folds, pool_size, params, per_fold)
    items = {name: np.concatenate([f["items"][name] for f in folds]) for name in folds[0]["items"]}
    bridged = [f["bridged"] for f in folds] if folds[0]["bridged"] is not None else None
    index = None
    if folds[0].get("index_items") is not None:  # the same scores, each held-out anchor ranked among the index
        index = fold_values([f | {"items": f["items"] | f["index_items"]} for f in folds])
    return RouteResult(score, items, bridged, deficient, per_fold, index)


def fold_values(folds: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each score's value on each fold (``RouteScore`` field -> one value per fold): the mean of its per-item
    scores, or the fold's R^2 (a route with R^2, i.e. bridged target vectors)."""
    values = {f: [float(np.mean(x["items"][n])) for x in folds] for f, n in ITEM_NAMES.items()}
    values["shuffled_mrr"] = [float(np.mean(x["items"]["shuffled_rr"])) for x in folds]
    values["shuffled_top1"] = [float(np.mean(x["items"]["shuffled_rr"] == 1)) for x in folds]
    if "agreement" in folds[0]["items"]:
        values["agreement"] = [float(np.mean(x["items"]["agreement"])) for x in folds]
    if folds[0]["r2"] is not None:
        values["r2"] = [x["r2"] for x in folds]
        values["r2_scaled"] = [x["r2_scaled"] for x in folds]
    return values


def summary(
    spec: RouteSpec,
    folds: list[dict[str, Any]],
    pool_size: int,
    params: dict[str, Any],
    per_fold: dict[str, list[float]] | None = None,
) -> RouteScore:
    """The row of a route: each score's mean and std over the folds (``per_fold``, from ``fold_values`` when not
    given), and its z against shuffled pairs."""
    per_fold = fold_values(folds) if per_fold is None else per_fold
    values = {name: (float(np.mean(v)), float(np.std(v))) for name, v in per_fold.items()}
    shown = {key: value for key, value in params.items() if key != "estimator"}
    score = RouteScore(spec.name, spec.family, spec.description, params=shown, **values)
    rr = np.concatenate([x["items"]["rr"] for x in folds])
    mean, variance = chance_mrr(pool_size)
    score.chance_mrr = mean
    score.z = float((rr.mean() - mean) / math.sqrt(variance / rr.size)) if variance > 0 else 0.0
    score.clearly_better = bool(score.z >= CLEAR_Z and score.mrr[0] > score.shuffled_mrr[0])
    return score


def fit_fold(spec: RouteSpec, anchors: Anchors, train: np.ndarray, **params: Any) -> tuple[Any, bool]:
    """The route fitted on the training rows (a semi-supervised route with the pools too: the held-out anchors are in
    neither), and whether the fit warned of rank deficiency (counted, not shown)."""
    pools = anchors.pools if spec.pools else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RankDeficiencyWarning)
        estimator = spec.build(**params).fit(
            take_rows(anchors.source, train), take_rows(anchors.target, train), **pools
        )
    warned = any(issubclass(w.category, RankDeficiencyWarning) for w in caught)
    pass_through([w for w in caught if not issubclass(w.category, RankDeficiencyWarning)])
    return estimator, warned


def _words(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def pass_through(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
