"""Cross-validation of one bridge route over folds of the anchor pairs, the anchor-budget advice, and the choice
among routes."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import take_rows
from latentstitch._core.folds import training_rows
from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch._core.params import check_positive_int
from latentstitch.bridge._head import LinearHead
from latentstitch.bridge._results import BudgetRow, RouteScore
from latentstitch.bridge._routes import RouteSpec
from latentstitch.bridge._scores import (
    SCORES,
    agreement,
    chance_mrr,
    derangement,
    mrr_z_score,
    pair_scores,
    predictions,
)
from latentstitch.embeddings import match_ids

#: Fewest held-out anchor pairs per fold: retrieval among fewer candidates says little.
MIN_PER_FOLD = 5
#: A route is "clearly better than shuffled pairs" when its pooled held-out MRR is this many standard errors above
#: the MRR of shuffled pairs (with three z, a route carrying no information passes about once in 700 fits).
CLEAR_Z = 3.0


def matched_order(source_ids: Any, target_ids: Any, source: Any, target: Any) -> np.ndarray:
    for name, ids, rows in (("source_ids", source_ids, source), ("target_ids", target_ids, target)):
        if len(ids) != len(rows):
            raise ValueError(f"{name}: expected one id per row ({len(rows)}), got {len(ids)}")
    return match_ids(source_ids, target_ids, ("source_ids", "target_ids"), ("the source", "the target"))


@dataclass(frozen=True)
class Anchors:
    """The parallel anchors every route is scored on: the two sides (rows paired), the folds, the seed of the
    shuffled pairs, and with a head, the head and its predictions on the true target vectors (``reference``)."""

    source: Any
    target: Any
    parts: list[np.ndarray]
    seed: int
    head: Callable[[Any], Any] | None = None
    reference: np.ndarray | None = None

    @property
    def primary(self) -> str:
        """The score the choice and the anchor budget compare: prediction agreement with a head, else MRR."""
        return "agreement" if self.head is not None else "mrr"

    @property
    def n_train(self) -> int:
        """The fewest training anchors of any fold."""
        return len(self.source) - max(map(len, self.parts))


@dataclass
class RouteResult:
    """One route's cross-validation: its ``score`` row, the held-out reciprocal rank of every anchor (fold after
    fold; None when the route failed), for paired comparisons between routes, and how many of its fits warned of
    rank deficiency."""

    score: RouteScore
    reciprocal_ranks: np.ndarray | None = None
    rank_deficient: int = 0


#: What a route that cannot be fitted raises: the route is then reported as failed, with the error's words.
FIT_ERRORS = (ValueError, TypeError, np.linalg.LinAlgError, torch.linalg.LinAlgError)


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
    ``advance`` is called after every fold."""
    started = time.perf_counter()
    folds: dict[str, list[float]] = {}
    sizes: list[int] = []
    reciprocal: list[np.ndarray] = []
    deficient = 0
    rng = np.random.default_rng(anchors.seed)
    for k, held_out in enumerate(anchors.parts):
        train = training_rows(anchors.parts, k) if subsets is None else subsets[k]
        try:
            estimator, warned = _fit_fold(spec, anchors, train)
            deficient += warned
            bridged, partner = _held_out_pair(spec, estimator, anchors, held_out)
        except FIT_ERRORS as error:
            advance()
            failed = RouteScore(spec.name, spec.family, spec.description, error=_words(error))
            failed.seconds = time.perf_counter() - started
            return RouteResult(failed, None, deficient)
        scores = pair_scores(bridged, partner, per_item=True)
        reciprocal.append(scores.pop("reciprocal_ranks"))
        shuffled = pair_scores(bridged, take_rows(partner, derangement(len(held_out), rng)))
        for name in SCORES:
            folds.setdefault(name, []).append(scores[name])
            folds.setdefault(f"shuffled_{name}", []).append(shuffled[name])
        if anchors.reference is not None:
            folds.setdefault("agreement", []).append(_agreement(spec, estimator, anchors, train, bridged, held_out))
        sizes.append(len(held_out))
        advance()
    score = _summary(spec, folds, sizes)
    score.seconds = time.perf_counter() - started
    return RouteResult(score, np.concatenate(reciprocal), deficient)


def _fit_fold(spec: RouteSpec, anchors: Anchors, train: np.ndarray) -> tuple[Any, bool]:
    """The route fitted on the training rows, and whether the fit warned of rank deficiency (counted, not shown)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RankDeficiencyWarning)
        estimator = spec.build().fit(take_rows(anchors.source, train), take_rows(anchors.target, train))
    warned = any(issubclass(w.category, RankDeficiencyWarning) for w in caught)
    pass_through([w for w in caught if not issubclass(w.category, RankDeficiencyWarning)])
    return estimator, warned


def _held_out_pair(spec: RouteSpec, estimator: Any, anchors: Anchors, held_out: np.ndarray) -> tuple[Any, Any]:
    """The bridged held-out source anchors and their partners (relative target vectors for a relative route)."""
    bridged = estimator.transform(take_rows(anchors.source, held_out))
    partner = take_rows(anchors.target, held_out)
    if spec.family == "relative":
        partner = estimator.transform_target(partner)
    return bridged, partner


def _summary(spec: RouteSpec, folds: dict[str, list[float]], sizes: list[int]) -> RouteScore:
    """The row of a route fitted on every fold: each score's mean and std over the folds, and its z."""
    score = RouteScore(
        spec.name,
        spec.family,
        spec.description,
        **{name: (float(np.mean(values)), float(np.std(values))) for name, values in folds.items()},
    )
    if spec.family == "relative":  # R^2 of relative vectors says nothing about the target's space: not scored
        score.r2 = score.shuffled_r2 = None
    score.z = mrr_z_score(folds["mrr"], sizes)
    score.chance_mrr = sum(chance_mrr(n)[0] * n for n in sizes) / sum(sizes)
    score.clearly_better = bool(score.z >= CLEAR_Z and score.mrr[0] > score.shuffled_mrr[0])
    return score


def _words(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def budget_counts(budget: Any, name: str = "budget") -> list[int]:
    """The anchor counts of the anchor-budget advice: sorted, each at least 2 (none for None)."""
    if budget is None:
        return []
    if isinstance(budget, (str, bytes)) or not hasattr(budget, "__iter__"):
        raise TypeError(f"{name}: expected a sequence of anchor counts, got {budget!r}")
    return sorted({check_positive_int(c, name, minimum=2) for c in budget})


def usable_counts(counts: list[int], anchors: Anchors) -> list[int]:
    """The counts below the training anchors of every fold (the others cannot be drawn)."""
    return [c for c in counts if c < anchors.n_train]


def anchor_budget(
    specs: list[RouteSpec], anchors: Anchors, counts: list[int], advance: Callable[[], None] = _nothing
) -> list[BudgetRow] | None:
    """The anchor-budget advice: every route cross-validated again with only ``count`` training anchors per fold
    (drawn at random from the fold's training rows), scored on the same held-out folds; None without counts."""
    if not counts:
        return None
    rng = np.random.default_rng(anchors.seed + 1)
    folds = range(len(anchors.parts))
    rows = []
    for count in usable_counts(counts, anchors):
        subsets = [rng.choice(training_rows(anchors.parts, k), size=count, replace=False) for k in folds]
        results = [cross_validate_route(spec, anchors, subsets=subsets, advance=advance) for spec in specs]
        # each route's primary score, comparable down a column
        rows.append(BudgetRow(count, {r.score.route: r.score.score(anchors.primary) for r in results}))
    return rows


def _agreement(
    spec: RouteSpec, estimator: Any, anchors: Anchors, train: np.ndarray, bridged: Any, held_out: np.ndarray
) -> float:
    """The head's prediction from the bridged vector vs from the true target vector, on the held-out anchors."""
    head, target, reference = anchors.head, anchors.target, anchors.reference
    if spec.family != "relative":
        return agreement(predictions(head, bridged), reference[held_out])
    # A relative route's output is read by a head trained on relative target vectors: here, a LinearHead fitted on
    # the training folds to reproduce the user's head.
    labels = reference[train]
    if np.unique(labels).size < 2:
        return agreement(np.full(len(held_out), labels[0]), reference[held_out])
    proxy = LinearHead().fit(estimator.transform_target(take_rows(target, train)), labels)
    return agreement(proxy.predict(bridged), reference[held_out])


#: A relative route is chosen over the translation routes only when its held-out MRR beats the best translation
#: route's by more than this many standard errors (paired over the held-out anchors).
FAMILY_MARGIN = 2.0


def choose_route(results: list[RouteResult], primary: str) -> tuple[RouteScore, bool]:
    """The route the documented rule (``SELECTION_RULE``) picks, and whether it is clearly better than shuffled."""
    rows = [result.score for result in results]
    fitted = [r for r in rows if r.fitted]
    if not fitted:
        raise ValueError("routes: no route could be fitted: " + "; ".join(f"{r.route}: {r.error}" for r in rows))
    clear = [r for r in fitted if r.clearly_better]
    pool = clear or fitted
    order = {id(r): i for i, r in enumerate(rows)}
    if primary == "agreement":
        return max(pool, key=lambda r: (r.agreement[0], r.mrr[0], -order[id(r)])), bool(clear)
    per_item = {result.score.route: result.reciprocal_ranks for result in results}
    family = "translation" if _translation_suffices(pool, per_item) else "relative"
    pool = [r for r in pool if r.family == family]
    score = "r2" if family == "translation" else "mrr"
    return max(pool, key=lambda r: (r.score(score)[0], r.mrr[0], -order[id(r)])), bool(clear)


def _translation_suffices(pool: list[RouteScore], per_item: dict[str, np.ndarray]) -> bool:
    """Whether a translation route finds partners about as well as the best relative route: the best relative
    route's gain in reciprocal rank over the best translation route, anchor by anchor, is not above
    ``FAMILY_MARGIN`` standard errors."""
    translation = [r for r in pool if r.family == "translation"]
    relative = [r for r in pool if r.family == "relative"]
    if not translation or not relative:
        return bool(translation)
    best_translation = max(translation, key=lambda r: r.mrr[0])
    best_relative = max(relative, key=lambda r: r.mrr[0])
    gain = per_item[best_relative.route] - per_item[best_translation.route]
    error = gain.std(ddof=1) / np.sqrt(gain.size) if gain.size > 1 else 0.0
    return not (gain.mean() > FAMILY_MARGIN * error and gain.mean() > 0)


def pass_through(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
