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
from latentstitch._core.numerics import matmul, unit_rows
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
    the old model's vectors of other items, ``Bridge.fit(target_pool=...)``), and with a head, the head and its
    predictions on the true target vectors (``reference``)."""

    source: Any
    target: Any
    parts: list[np.ndarray]
    seed: int
    head: Callable[[Any], Any] | None = None
    reference: np.ndarray | None = None
    score: str = "mrr"
    extra: Any = None
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
        self.pool = Pool(self.target_work if extra is None else torch.cat([self.target_work, extra]))
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

    @property
    def primary(self) -> str:
        """The score the choice, each route's parameters and the anchor budget compare."""
        return "agreement" if self.head is not None else self.score

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


def _other_items(queries: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """For each query, another item: its partner when the pairs are shuffled."""
    other = rng.integers(0, n - 1, size=len(queries))
    return other + (other >= queries)


@dataclass
class RouteResult:
    """One route's cross-validation: its ``score`` row, the per-item held-out scores of its chosen parameters
    (``items``: name -> array over every scored query, fold after fold; None when the route failed), the bridged
    queries of a translation route per fold (for the ensemble), and how many fits warned of rank deficiency."""

    score: RouteScore
    items: dict[str, np.ndarray] | None = None
    bridged: list[torch.Tensor] | None = None
    rank_deficient: int = 0

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
    score = summary(spec, folds, anchors.pool.size, params_of[best])
    score.seconds = time.perf_counter() - started
    items = {name: np.concatenate([f["items"][name] for f in folds]) for name in folds[0]["items"]}
    bridged = [f["bridged"] for f in folds] if spec.family == "translation" else None
    return RouteResult(score, items, bridged, deficient)


def _best_setting(spec: RouteSpec, anchors: Anchors, outputs: dict[str, list[tuple[Fold, int, torch.Tensor]]]) -> str:
    """The setting with the best pooled selection score on the parameter-comparison queries (ties: the first). A
    translation route's settings are scored together, only on that score (``_trials.setting_scores``); any other
    route's, or the agreement with a head, by ``fold_scores`` setting by setting."""
    score = anchors.primary
    if spec.family == "translation" and score in TRIAL_SCORES:
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
    if spec.family == "translation":
        bridged = as_float_tensor(estimator.transform(queries), "bridged").detach()
        return [({}, bridged.to(device=anchors.source64.device, dtype=torch.float64))], warned
    sides = (estimator.transform(queries), estimator.transform_target(anchors.target))
    left, right = (unit_rows(as_float_tensor(x, "relative").detach().double(), "relative", eps=1e-30) for x in sides)
    return [({"estimator": estimator}, matmul(left, right.T))], warned


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
    if spec.family == "translation":
        bridged = output
        if len(anchors.dead):  # dead target features: their fold-training mean (_dead)
            train = torch.as_tensor(fold.train, device=anchors.target64.device)
            held = anchors.target64[:, anchors.dead.to(train.device)][train].mean(dim=0)
            bridged = hold(output, anchors.dead, held)
        sims = translation_sims(bridged, anchors.pool)
        r2, r2_scaled = r_squared(
            squared_errors(
                bridged, anchors.target64[torch.as_tensor(queries, device=bridged.device)], anchors.target_scale
            )
        )
    else:
        bridged, sims, r2, r2_scaled = None, output, None, None
    items = item_scores(sims, queries, anchors.pool)
    rows = torch.arange(len(queries), device=sims.device)
    items["cosine"] = sims[rows, torch.as_tensor(queries, device=sims.device)].double().cpu().numpy()
    others = anchors.others[k] if keep is None else anchors.others[k][keep]
    items["shuffled_rr"] = (1.0 / partner_ranks(sims, others)).cpu().numpy()
    if anchors.reference is not None and (keep is None or spec.family != "relative"):
        items["agreement"] = _agreement_items(spec, anchors, fold, params, bridged)
    bridged32 = None if bridged is None else bridged.to(torch.float32)
    return {"items": items, "r2": r2, "r2_scaled": r2_scaled, "bridged": bridged32}


def pooled(folds: list[dict[str, Any]], score: str) -> float:
    """A candidate's score pooled over every scored query (R^2: mean over folds); -inf when it has none."""
    if score in ("r2", "r2_scaled"):
        values = [f[score] for f in folds]
        return -math.inf if any(v is None for v in values) else float(np.mean(values))
    value = float(np.mean(np.concatenate([f["items"][ITEM_NAMES.get(score, score)] for f in folds])))
    return -math.inf if value != value else value


def summary(spec: RouteSpec, folds: list[dict[str, Any]], pool_size: int, params: dict[str, Any]) -> RouteScore:
    """The row of a route: each score's mean and std over the folds, and its z against shuffled pairs."""

    def spread(values: list[float]) -> tuple[float, float]:
        return float(np.mean(values)), float(np.std(values))

    values = {f: spread([float(np.mean(x["items"][n])) for x in folds]) for f, n in ITEM_NAMES.items()}
    values["shuffled_mrr"] = spread([float(np.mean(x["items"]["shuffled_rr"])) for x in folds])
    values["shuffled_top1"] = spread([float(np.mean(x["items"]["shuffled_rr"] == 1)) for x in folds])
    if "agreement" in folds[0]["items"]:
        values["agreement"] = spread([float(np.mean(x["items"]["agreement"])) for x in folds])
    if spec.family == "translation":
        values["r2"] = spread([x["r2"] for x in folds])
        values["r2_scaled"] = spread([x["r2_scaled"] for x in folds])
    shown = {key: value for key, value in params.items() if key != "estimator"}
    score = RouteScore(spec.name, spec.family, spec.description, params=shown, **values)
    rr = np.concatenate([x["items"]["rr"] for x in folds])
    mean, variance = chance_mrr(pool_size)
    score.chance_mrr = mean
    score.z = float((rr.mean() - mean) / math.sqrt(variance / rr.size)) if variance > 0 else 0.0
    score.clearly_better = bool(score.z >= CLEAR_Z and score.mrr[0] > score.shuffled_mrr[0])
    return score


def fit_fold(spec: RouteSpec, anchors: Anchors, train: np.ndarray, **params: Any) -> tuple[Any, bool]:
    """The route fitted on the training rows, and whether the fit warned of rank deficiency (counted, not shown)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RankDeficiencyWarning)
        estimator = spec.build(**params).fit(take_rows(anchors.source, train), take_rows(anchors.target, train))
    warned = any(issubclass(w.category, RankDeficiencyWarning) for w in caught)
    pass_through([w for w in caught if not issubclass(w.category, RankDeficiencyWarning)])
    return estimator, warned


def _agreement_items(
    spec: RouteSpec, anchors: Anchors, fold: Fold, params: dict[str, Any], bridged: torch.Tensor | None
) -> np.ndarray:
    """Per held-out query: 1 when the head's prediction from the bridged vector equals its prediction from the true
    target vector. A relative route's output is read by a head trained on relative target vectors: here, a
    ``LinearHead`` fitted on the training folds' relative target vectors to reproduce the user's head."""
    reference, queries = anchors.reference, fold.queries
    if spec.family != "relative":
        vectors = bridged.to(torch.float32)
        if isinstance(anchors.target, torch.Tensor):
            vectors = vectors.to(anchors.target.device)
        else:
            vectors = vectors.cpu().numpy()
        return (predictions(anchors.head, vectors) == reference[queries]).astype(np.float64)
    estimator = params.get("estimator")
    if estimator is None:
        estimator, _ = fit_fold(spec, anchors, fold.train)
    labels = reference[fold.train]
    if np.unique(labels).size < 2:
        return (labels[0] == reference[queries]).astype(np.float64)
    proxy = LinearHead().fit(estimator.transform_target(take_rows(anchors.target, fold.train)), labels)
    return (proxy.predict(estimator.transform(take_rows(anchors.source, queries))) == reference[queries]).astype(
        np.float64
    )


def _words(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def pass_through(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
