"""``Bridge``: try every route between two models' embeddings on parallel anchors, choose one by cross-validation
without labels, and apply it to new vectors."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows, take_rows
from latentstitch._core.folds import kfold
from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch._core.params import Rule, check_choice, check_positive_int, check_seed, rule
from latentstitch._core.persist import Persistable
from latentstitch._core.progress import progress_bar
from latentstitch.bridge._budget import anchor_budget, budget_counts, usable_counts
from latentstitch.bridge._crossval import (
    MIN_PER_FOLD,
    Anchors,
    RouteResult,
    cross_validate_route,
    matched_order,
    pass_through,
)
from latentstitch.bridge._cv_results import check_cv_results, cv_results
from latentstitch.bridge._dead import check_dead
from latentstitch.bridge._diagnose import fit_notes
from latentstitch.bridge._estimate import QualityEstimate, estimate, estimate_from_dict
from latentstitch.bridge._head import LinearHead
from latentstitch.bridge._pool import pool_rows, source_pool_rows
from latentstitch.bridge._results import BudgetRow, RouteScore, budget_rows, route_scores
from latentstitch.bridge._routes import Family, RouteSpec, family_of, get_route, resolve_routes
from latentstitch.bridge._scale import anchor_scales, head_at_scale, loaded_scales, rescale
from latentstitch.bridge._select import CONSUMER_SCORES, CONSUMERS, Criterion, pool_test, select_route
from latentstitch.bridge._validate import (
    as_anchor_array,
    check_class_labels,
    check_loaded,
    check_route_methods,
    check_savable,
    check_varies,
    head_labels,
    input_notes,
)
from latentstitch.distributed import is_dask_array, map_rows

#: Warnings a bridge's cross-validation expects from its fits: counted and said once in words, not shown per fit.
_EXPECTED = (RankDeficiencyWarning, ConvergenceWarning)


def check_routes(routes: Any, name: str = "routes") -> list[RouteSpec]:
    """``routes`` names known routes (``resolve_routes``)."""
    return resolve_routes(routes)


def _fit_quietly(spec: RouteSpec, source: Any, target: Any, params: dict[str, Any], pools: dict[str, Any]) -> Any:
    """The chosen route fitted on all the anchors with its chosen parameters (and the pools, for a semi-supervised
    route; its rank deficiency was said while cross-validating)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RankDeficiencyWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        return spec.build(**params).fit(source, target, **(pools if spec.pools else {}))


def pool_specs(specs: list[RouteSpec], routes: Any, pooled: bool) -> list[RouteSpec]:
    """The routes a fit tries: without both pools, the semi-supervised routes are left out (an error when the user
    named one: it cannot be fitted)."""
    if pooled:
        return specs
    named = {routes} if isinstance(routes, str) else set(routes)
    wanted = [spec.name for spec in specs if spec.pools and spec.name in named]
    if wanted:
        raise ValueError(
            f"routes: {', '.join(wanted)} {'needs' if len(wanted) == 1 else 'need'} unpaired vectors of both models: "
            "pass source_pool= and target_pool="
        )
    return [spec for spec in specs if not spec.pools]


def pool_notes(specs: list[RouteSpec], anchors: Anchors, source_pool: bool, target_pool: bool) -> list[str]:
    """What the pools did, in words: which routes were fitted with them and how many rows each matched."""
    if source_pool and not target_pool:
        return ["source_pool was not used: the semi-supervised routes need target_pool too (the old model's vectors)"]
    used = [spec for spec in specs if spec.pools]
    if not anchors.pools or not used:
        return []
    sizes = (anchors.pools["source_pool"].shape[0], anchors.pools["target_pool"].shape[0])
    notes = [
        f"the semi-supervised routes ({', '.join(spec.name for spec in used)}) were fitted on the training anchors "
        f"and the pools ({sizes[0]:,} source_pool and {sizes[1]:,} target_pool vectors, none equal to an anchor's)",
        "with both pools, the choice ranked each held-out anchor among the anchors only (the routes without pools "
        "were chosen as a fit without pools chooses them; a semi-supervised route had to beat that pick: "
        "_select.pool_test); estimate_ and the Recall@k column ranked it among the anchors and the target_pool",
    ]
    for spec in used:
        cap = getattr(spec.build(), "subsample", None)
        if isinstance(cap, int) and max(sizes) > cap:
            notes.append(f"{spec.name} matched at most {cap:,} rows of each pool, drawn at random (its subsample)")
    return notes


@dataclass(frozen=True)
class Choice:
    """What a fit decides from the routes' cross-validation (``Bridge._choose``): the criterion, the chosen route's
    result, the route table (the chosen row marked), whether the choice is reliable, the quality estimate and the
    per-fold results; ``fit`` sets the fitted attributes from it in one place."""

    criterion: Criterion
    chosen: RouteResult
    rows: list[RouteScore]
    reliable: bool
    estimate: QualityEstimate
    cv_results: dict[str, list]


class BridgeWarning(UserWarning):
    """Something the user of a bridge should know, said once per fit in words (no route is clearly better than
    shuffled pairs; some routes were fitted on fewer anchors than features)."""


class Bridge(Persistable, BaseEstimator):
    """A checked bridge from a new model's embeddings (the *source*) to an old model's (the *target*).

    ``fit(source, target)`` takes parallel anchors, the same N items embedded by both models (rows in the same
    order), tries every route (``latentstitch.bridge.ROUTES``) by k-fold cross-validation over the anchors, and
    keeps the best; ``transform(new_source)`` then returns what the target side's consumer reads:

    - a **translation** route (ridge least squares, Procrustes, ...) returns vectors in the target's absolute space:
      the old model's head or index reads them as they are;
    - a **relative** route (cosine to the anchors, centred, robust) returns relative vectors; train the consumer once
      on ``transform_target(target_vectors)`` (``fit_head`` does it for a classifier), then it reads
      ``transform(new_source)``.

    Choosing without labels: for every route and fold, each held-out source anchor is bridged by a map fitted on the
    other folds and compared with every target vector given (``docs/bridge.md``): MRR, top-1, Recall@10 of its own
    partner, overlap of its 10 nearest target vectors with the true ones (``knn_jaccard``), R^2 in the target's
    own units and with standard-scaled features (``r2_scaled``), beside shuffled pairs. With ``head=`` (a callable
    from target vectors to predictions), also prediction agreement (relative routes are read by a ``LinearHead``
    trained on the training folds' relative target vectors to reproduce the head's predictions). The rule is
    ``select_route`` on the score of ``consumer`` (``selection_rule()`` says it in words); a route's own parameter (the
    ridge penalty, the rank) is chosen on the same score. Each score is reported as mean and standard deviation over
    the folds in ``routes_``; ``estimate_`` says what to expect in the user's units, with a 90% interval.

    Rank deficiency (fewer anchors than features makes unregularised least squares non-unique) is expected while
    choosing: it is counted, and said once in words (a ``BridgeWarning``), never per fit. The Procrustes routes
    hold the minimum-norm map then (``Procrustes(unspanned="zero")``: directions no anchor spans map to zero).

    Parameters
    ----------
    routes : "auto", a route name, or a list of names
        "auto": the routes of ``AUTO_ROUTES`` (ridge_raw, low_rank, procrustes, procrustes_scaled,
        relative_centered, relative_robust, ensemble).
    cv : int
        Folds over the anchors (at least ``MIN_PER_FOLD`` = 5 anchors per fold).
    seed : int
        The folds and the shuffled pairs.
    budget : sequence of int, optional
        Anchor counts for the anchor-budget advice (e.g. ``(50, 100, 300)``): the same cross-validation with only
        that many training anchors (drawn at random from the training folds), scored on the same held-out folds,
        so the scores compare across counts. In ``budget_``.
    consumer : {"index", "scaled_head", "raw_head"}
        What reads the bridged vectors, so the label-free rule reads the score that ranked routes as that consumer
        did in ``benchmarks/bridge_generalisation.py`` (``CONSUMER_SCORES``): "index" (default; a nearest-neighbour
        index: held-out MRR among all target vectors), "scaled_head" (a classifier that standard-scales its input:
        R^2 of standard-scaled target features), "raw_head" (a classifier on raw vectors: neighbourhood
        agreement). A ``head=`` given to ``fit`` overrides it (prediction agreement).

    Attributes
    ----------
    route_ : str
        The chosen route. ``family_``: its family.
    estimator_ : estimator
        The chosen route fitted on all the anchors.
    routes_ : list of RouteScore
        One row per route tried: family, description, each score's (mean, std) over folds (``top1``, ``mrr``,
        ``cosine``, ``r2``, ``agreement``), the same for shuffled pairs (``shuffled_mrr``, ...), ``z`` (pooled MRR
        above chance, in standard errors), ``clearly_better``, ``seconds``, ``error`` (a route that failed to fit),
        ``chosen``. ``row.to_dict()`` is its JSON form (``row["mrr"]`` also reads a field).
    reliable_ : bool
        Whether the chosen route is clearly better than shuffled pairs.
    criterion_ : str
        How the route was chosen: "label-free" (``SELECTION_RULE``) or "agreement" (with a head).
    selection_score_ : str
        The score the route and its parameters were chosen on (``CONSUMER_SCORES[consumer]``, or "agreement").
    estimate_ : QualityEstimate
        What to expect: with a head, its agreement on bridged held-out anchors; without, Recall@10 of the old index
        (all target vectors given); ``value``, ``low``, ``high`` (90% bootstrap interval), ``to_dict()``.
    notes_ : list of str
        What was said while fitting (rank deficiency, reliability), in words.
    cv_results_ : dict of lists
        Every route's cross-validation fold by fold, as scikit-learn's searches give it (``_cv_results``): one
        entry per route in ``routes_``'s order: ``route``, ``family``, ``params``, ``error``, ``split{k}_test_score``
        (the selection score on fold k), ``mean_test_score``, ``std_test_score``, ``rank_test_score`` (1: the chosen
        route), ``split{k}_test_rows`` (fold k's held-out anchors), ``split{k}_test_hits`` (1 or 0 per held-out
        anchor: what ``estimate_`` averages) and, with a head, ``split{k}_test_classes`` (the head's class of each).
        None for a bridge saved before it was recorded.
    budget_ : list of BudgetRow or None
        One row per anchor count: ``anchors``, and ``scores``: route name -> (mean, std) of the held-out selection
        score (``selection_score_``: MRR by default, prediction agreement with a head); ``row.to_dict()`` is
        ``{"anchors": n, route: [mean, std], ...}``.
    n_anchors_, n_features_source_, n_features_target_ : int
    source_scale_, target_scale_ : float
        The power of two each side was multiplied by before fitting (``_scale.anchor_scales``): 1.0 unless its
        magnitudes would overflow or underflow (1e+200, 1e-200; 1e30 in float32); ``transform`` applies the
        source's and scales a translation route's output back by the target's, so the answer is the one at the
        input's scale, and a side scaled alone gives the same map up to its scale.
    dead_features_, dead_values_ : list of int, list of float
        Target features whose spread over the anchors is at most ``1e-6`` of the largest's (``_dead``): a
        translation route outputs their anchor mean there, so a consumer that standard-scales each feature does
        not magnify a route's rounding noise on them.

    Examples
    --------
    >>> bridge = Bridge().fit(new_model_anchor_vectors, old_model_anchor_vectors)   # doctest: +SKIP
    >>> old_head(bridge.transform(new_model_vectors))                             # a translation route
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "routes": rule(check_routes),
        "cv": rule(check_positive_int, minimum=2),
        "seed": rule(check_seed),
        "budget": rule(budget_counts),
        "consumer": rule(check_choice, choices=CONSUMERS),
    }
    _learned_types: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "routes_": route_scores,
        "budget_": budget_rows,
        "estimate_": estimate_from_dict,
    }

    def __init__(
        self,
        routes: str | Sequence[str] = "auto",
        cv: int = 5,
        seed: int = 0,
        budget: Sequence[int] | None = None,
        consumer: str = "index",
    ):
        self.routes = routes
        self.cv = cv
        self.seed = seed
        self.budget = budget
        self.consumer = consumer

    # --- fitting -------------------------------------------------------------------------------------------------
    def fit(
        self,
        source: ArrayLike,
        target: ArrayLike,
        *,
        head: Callable[[Any], Any] | None = None,
        source_ids: Sequence[Any] | None = None,
        target_ids: Sequence[Any] | None = None,
        target_pool: ArrayLike | None = None,
        source_pool: ArrayLike | None = None,
        progress: bool = False,
    ) -> Bridge:
        """Score every route by cross-validation on the parallel anchors, choose one, fit it on all of them.

        Parameters
        ----------
        source : (N, p) array or tensor
            The new model's vectors of N anchor items.
        target : (N, q) array or tensor
            The old model's vectors of the same N items, in the same order.
        head : callable, optional
            The consumer of target vectors (``head(target_vectors) -> predictions``: labels, or one row of scores
            per vector); adds prediction agreement and makes it the score the choice uses.
        source_ids, target_ids : sequences, optional
            One id per row of each side: the target rows are then matched to the source rows by id (both sides must
            hold the same ids, each once) instead of by order.
        target_pool : (M, q) array or tensor, optional
            The old model's vectors of other items, unpaired: typically the old index the bridged vectors will be
            searched in. Each held-out anchor is then ranked among the target anchors *and* these, as a search of
            the user's index ranks it, so the route choice, its parameters and ``estimate_`` (Recall@k among that
            many vectors) read a search of the user's size instead of one among the anchors only (with few anchors
            that search is easy for every route and says little about the index). Rows equal to an anchor's target
            vector are left out (they are the anchor itself); above ``MAX_POOL`` rows, that many are drawn at random
            (``seed``). Cost: the held-out anchors' similarities to every pool vector, per route and fold.
        source_pool : (M_s, p) array or tensor, optional
            The new model's vectors of other items, unpaired (any items, any count: whatever it has embedded). With
            ``target_pool`` too, the semi-supervised routes (``POOL_ROUTES``: ``procrustes_pools``, ``self_learning``,
            ``bootstrap_pools``, ``ridge_pools``) join the candidates: each is fitted on a fold's training anchors *and*
            the two pools, and cross-validated on the held-out anchors like every route (chosen by the same rule, with
            the same estimate and interval). With both pools, the choice ranks each held-out anchor among the anchors
            only, so the pick among the routes without pools is the one a fit without pools makes, and a semi-supervised
            route replaces it only when it beats it beyond the folds' noise (``_select.pool_test``): the pools never
            move the choice otherwise; ``estimate_`` still ranks among the anchors and ``target_pool``. Rows of either
            pool equal to any anchor's vector of that side are left out, so a held-out anchor never enters a fit, not
            even as a pseudo-pair (said in ``notes_``); above ``MAX_POOL`` rows, that many are drawn at random
            (``seed``), and each route matches at most its own ``subsample`` of them (said in ``notes_``). Without both
            pools those routes are absent (naming one in ``routes`` is then an error) and the fit is the one without
            pools. Memory: the pools as given (at most ``MAX_POOL`` rows each, in the anchors' precision), plus a
            route's matching, O(subsample x (width + chunk)) (64 MiB blocks of similarities;
            ``latentstitch.alignment.PoolProcrustes``).
        progress : bool
            Show a progress bar over the route fits.
        """
        self._check_params()
        specs = pool_specs(
            resolve_routes(self.routes), self.routes, source_pool is not None and target_pool is not None
        )
        check_route_methods(specs)
        if all(spec.stack is not None for spec in specs):
            names = ", ".join(spec.name for spec in specs)
            raise ValueError(
                f"routes: {names} blends other routes' cross-validated predictions and has nothing to blend alone; "
                f"give it with the routes it may blend, e.g. routes=['ridge', 'procrustes', '{specs[0].name}']"
            )
        pooled = any(spec.pools for spec in specs)  # without a semi-supervised route, source_pool is not used
        anchors = self._anchors(source, target, head, source_ids, target_ids, target_pool, source_pool, pooled)
        self._quiet_notes += pool_notes(specs, anchors, source_pool is not None, target_pool is not None)
        results, budget, unconverged = self._cross_validate(specs, anchors, progress)
        choice = self._choose(results, anchors)
        row = choice.chosen.score
        self.criterion_, self.selection_score_ = choice.criterion.name, choice.criterion.score
        self.routes_, self.route_, self.family_, self.reliable_ = choice.rows, row.route, row.family, choice.reliable
        self.estimate_, self.budget_, self.cv_results_ = choice.estimate, budget, choice.cv_results
        self.notes_ = [*getattr(self, "_input_notes", []), *getattr(self, "_quiet_notes", [])]
        self.notes_ += self._say(results, anchors, unconverged)
        spec = get_route(self.route_)
        self.estimator_ = _fit_quietly(spec, anchors.source, anchors.target, row.params, anchors.pools)
        return self

    def _anchors(
        self, source, target, head, source_ids, target_ids, target_pool=None, source_pool=None, pooled=True
    ) -> Anchors:
        """The checked anchor pairs (target rows matched to the source's by id when ids are given) and their folds."""
        if (source_ids is None) != (target_ids is None):
            raise ValueError("source_ids, target_ids: give both to match rows by id, or neither to pair them by order")
        source, target = as_anchor_array(source, "source"), as_anchor_array(target, "target")
        s = as_float_tensor(source, "source", ndim=2, min_rows=1)
        t = as_float_tensor(target, "target", ndim=2, min_rows=1)
        if source_ids is not None:
            target = take_rows(target, matched_order(source_ids, target_ids, source, target))
            t = as_float_tensor(target, "target")
        check_same_rows(s, t, "source", "target")
        check_varies(s, "source")
        check_varies(t, "target")
        if s.device != t.device:
            raise ValueError(f"source is on device {s.device} but target is on {t.device}; move them to one device")
        self.n_anchors_ = s.shape[0]
        self.n_features_source_, self.n_features_target_ = s.shape[1], t.shape[1]
        parts = kfold(self.n_anchors_, self.cv, self.seed, name="cv", min_rows=MIN_PER_FOLD)
        # powers of two, one per side: 1.0 unless a side's magnitudes would overflow or underflow (_scale)
        self.source_scale_, self.target_scale_ = anchor_scales(s, t)
        reference = None if head is None else head_labels(head, target)
        head = None if head is None else head_at_scale(head, self.target_scale_, target.dtype)
        pool, self._quiet_notes = pool_rows(target_pool, t, self.seed)  # said in notes_, not warned
        unpaired, said = source_pool_rows(source_pool, s, self.seed)
        self._quiet_notes += said
        source, target = rescale(source, self.source_scale_), rescale(target, self.target_scale_)
        extra = None if pool is None else rescale(pool, self.target_scale_)
        unpaired = None if unpaired is None else rescale(unpaired, self.source_scale_)
        score = CONSUMER_SCORES[self.consumer]
        unpaired = unpaired if pooled else None  # checked above all the same (a bad file is named)
        anchors = Anchors(source, target, parts, self.seed, head, reference, score, extra=extra, source_pool=unpaired)
        if anchors.scored < len(parts):
            scored = sum(map(len, anchors.queries))
            self._quiet_notes.append(
                f"{anchors.scored} of the {len(parts)} folds were scored: they hold the {scored:,} held-out anchors "
                f"scored at most (each map fitted on the other folds, {anchors.n_train:,}+ anchors)"
            )
        self.dead_features_ = anchors.dead.tolist()  # held at their anchor mean by a translation route (_dead)
        self.dead_values_ = (anchors.target64[:, anchors.dead].mean(dim=0) / self.target_scale_).tolist()
        self._warn_inputs(s, t, anchors)
        return anchors

    def _warn_inputs(self, s: Any, t: Any, anchors: Anchors) -> None:
        """Say (``BridgeWarning``, and later in ``notes_``) what makes the scores less trustworthy than they look:
        anchor pairs that repeat (they leak across folds) and budget counts that cannot be drawn."""
        counts = budget_counts(self.budget)
        self._input_notes = input_notes(s, t, counts, usable_counts(counts, anchors), anchors.n_train, self.seed)
        for note in self._input_notes:
            warnings.warn(note, BridgeWarning, stacklevel=4)

    def _cross_validate(
        self, specs: list[RouteSpec], anchors: Anchors, progress: bool
    ) -> tuple[list[RouteResult], list[BudgetRow] | None, int]:
        """Every route's cross-validation and the anchor-budget advice; the warnings their fits are expected to
        give (rank deficiency, heads that did not converge) are counted, not shown (their number is returned)."""
        counts = budget_counts(self.budget)
        stacked = [spec for spec in specs if spec.stack is not None]  # scored from the others' results (ensemble)
        specs = [spec for spec in specs if spec.stack is None]
        fits = len(specs) * anchors.scored * (1 + len(usable_counts(counts, anchors)))
        with progress_bar(progress) as bar, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RankDeficiencyWarning)
            warnings.simplefilter("always", ConvergenceWarning)
            task = None if bar is None else bar.add_task("bridge: cross-validating routes", total=fits)
            advance = (lambda: None) if bar is None else (lambda: bar.advance(task))
            results = [cross_validate_route(spec, anchors, advance=advance) for spec in specs]
            results += [r for r in (spec.stack(results, anchors) for spec in stacked) if r is not None]
            budget = anchor_budget(specs, anchors, counts, advance)
        pass_through([w for w in caught if not issubclass(w.category, _EXPECTED)])
        return results, budget, sum(issubclass(w.category, ConvergenceWarning) for w in caught)

    def _choose(self, results: list[RouteResult], anchors: Anchors) -> Choice:
        """The route the rule keeps (``select_route`` on the criterion's score), marked in the route table, with its
        quality estimate and every route's per-fold results."""
        criterion = anchors.criterion
        rows = [result.score for result in results]
        chosen_row, reliable = select_route(rows, criterion.score)
        chosen_row, reliable = self._keep_pools_if_better(results, chosen_row, reliable, criterion.score)
        chosen = next(result for result in results if result.score is chosen_row)
        for row in rows:
            row.chosen = row is chosen_row
        key = criterion.item
        # the other routes compared on the same items: the estimate removes the winner's curse of that choice
        rivals = [
            r.items[key]
            for r in results
            if r is not chosen and r.items is not None and key in r.items and criterion.same_items
        ]
        folds = [len(q) for q in anchors.queries]
        metric = criterion.metric(anchors.index.k)
        quality = estimate(chosen.items[key], metric, chosen_row.route, anchors.index.size, self.seed, folds, rivals)
        table = cv_results(results, criterion, anchors.queries, anchors.reference)
        return Choice(criterion, chosen, rows, reliable, quality, table)

    def _keep_pools_if_better(
        self, results: list[RouteResult], chosen_row: RouteScore, reliable: bool, score: str
    ) -> tuple[RouteScore, bool]:
        """With both pools, the choice among the routes without pools is the rule's on the anchors alone (the pick a
        fit without pools makes: ``Anchors.choose_on_anchors``); the semi-supervised route with the best ``score``
        among the whole index (the anchors and ``target_pool``, where the pools' gain shows) replaces it only when
        it beats that pick on the same held-out folds by more than their noise (``_select.pool_test``). Said in
        ``notes_`` either way. ``reliable`` (some route clearly better than shuffled pairs) is the route table's."""
        pooled = [r for r in results if get_route(r.score.route).pools and r.score.fitted and r.index_per_fold]
        paired = [r for r in results if not get_route(r.score.route).pools]
        if not pooled or not any(r.score.fitted for r in paired):
            return chosen_row, reliable
        paired_row, _ = select_route([r.score for r in paired], score)
        paired_result = next(r for r in paired if r.score is paired_row)
        clear = [r for r in pooled if r.score.clearly_better] or pooled
        best = max(clear, key=lambda r: float(np.mean(r.index_per_fold.get(score, [-np.inf]))))
        folds = [(r.index_per_fold or {}).get(score) for r in (best, paired_result)]
        test = pool_test(best.score, paired_row, *folds, score)
        self._quiet_notes.append(test.sentence())
        return (best.score if test.kept else paired_row), reliable

    def _say(self, results: list[RouteResult], anchors: Anchors, unconverged: int) -> list[str]:
        """Everything worth saying about the fit, once, in words: returned for ``notes_``, and one ``BridgeWarning``."""
        widths = (self.n_features_source_, self.n_features_target_)
        notes, warn = fit_notes(results, self.routes_, self.reliable_, anchors, widths, unconverged)
        if warn:
            warnings.warn(" ".join(warn), BridgeWarning, stacklevel=3)
        return notes

    # --- use -----------------------------------------------------------------------------------------------------
    def transform(self, source: ArrayLike) -> ArrayLike:
        """Bridge new source vectors (n, p): target-space vectors (translation) or relative vectors (relative), of
        the input's type. A dask array gives a lazy dask array, bridged block by block."""
        check_is_fitted(self, "estimator_")
        self._check_width(source, self.n_features_source_, "source")
        return self._apply(self._bridge_rows, source, "source")

    def _bridge_rows(self, source: ArrayLike) -> ArrayLike:
        scales = getattr(self, "source_scale_", 1.0), getattr(self, "target_scale_", 1.0)  # the source's, the target's
        held = getattr(self, "dead_features_", []), getattr(self, "dead_values_", [])
        return self._family().bridged(self.estimator_, source, scales, *held)

    def transform_target(self, target: ArrayLike) -> ArrayLike:
        """What the consumer of a bridged vector is trained on, from target vectors (n, q): the vectors themselves
        for a translation route, their relative vectors for a relative route (same type out; dask arrays too)."""
        check_is_fitted(self, "estimator_")
        self._check_width(target, self.n_features_target_, "target")
        scale = getattr(self, "target_scale_", 1.0)
        return self._family().consumer_input(self.estimator_, target, scale, partial(self._apply, side="target"))

    def fit_head(self, target: ArrayLike, labels: ArrayLike, **options: Any) -> LinearHead:
        """Train a ``LinearHead`` on the target's labelled vectors as the chosen route's consumer reads them
        (``transform_target``); it then classifies ``transform(new_source_vectors)``. ``options``: ``C``,
        ``max_iter``."""
        check_is_fitted(self, "estimator_")
        check_class_labels(labels, getattr(target, "shape", (len(target),))[0])
        return LinearHead(**options).fit(self.transform_target(target), labels)

    def _output_width(self) -> int:
        return self._family().output_width(self.n_anchors_, self.n_features_target_)

    def _family(self) -> Family:
        return family_of(self.family_)

    def _apply(self, function: Callable[[Any], Any], rows: ArrayLike, side: str) -> ArrayLike:
        """``function`` (row-wise, to the bridge's output width) on ``rows``; on a dask array, block by block."""
        if is_dask_array(rows):
            return map_rows(rows, function, self._output_width(), side)
        return function(rows)

    @staticmethod
    def _check_width(x: Any, width: int, side: str) -> None:
        if getattr(x, "ndim", None) == 2 and x.shape[1] != width:
            raise ValueError(
                f"{side}: has {x.shape[1]} features but the bridge was fitted on {width}-feature {side} vectors "
                f"(is this the {'new' if side == 'source' else 'old'} model's space?)"
            )

    # --- reporting -------------------------------------------------------------------------------------------------
    def selection_rule(self) -> str:
        """The rule this bridge was chosen by, in words (``latentstitch.bridge.select_route`` is its code)."""
        check_is_fitted(self, "routes_")
        return Criterion.of_bridge(self).rule()

    # --- persistence ---------------------------------------------------------------------------------------------
    def save(self, path: Any) -> None:
        """Write the bridge to one safetensors file; refused now (not at load) if its route cannot be loaded back."""
        check_is_fitted(self, "estimator_")
        check_savable(self)
        super().save(path)

    def _check_loaded(self) -> None:
        """A loaded bridge is checked as a whole (``_validate.check_loaded``): route, family, reliability, widths
        and anchor count against the route table and the fitted estimator."""
        if "estimate_" not in vars(self):  # saved by a version before the quality estimate
            self.estimate_ = None
        self.source_scale_, self.target_scale_ = loaded_scales(vars(self))
        check_loaded(self, MIN_PER_FOLD)
        self.dead_features_, self.dead_values_ = check_dead(  # none held for a bridge saved before they were
            vars(self).get("dead_features_", []), vars(self).get("dead_values_", []), self.n_features_target_
        )
        saved = vars(self).get("cv_results_")  # None for a bridge saved before they were recorded
        self.cv_results_ = None if saved is None else check_cv_results(saved, self)
