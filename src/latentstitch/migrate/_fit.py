"""Fit the bridge of a migration in both modes and choose one by cross-validation with a retrieval objective over
the whole index.

- **query-side**: new-model queries are bridged into the old space and read the old index, untouched;
- **corpus-side**: the old index's vectors are bridged into the new space (re-embedded items keep their true new
  vectors) and new-model queries read that migrated index.

Each mode's bridge is ``latentstitch.bridge.Bridge`` (its routes: the translation routes, chosen by its own
cross-validation), fitted on the re-embedded documents and, when given, a sample of real queries embedded by both
models (queries are another kind of text than documents). The objective: for each held-out fold, every held-out
document (its new vector as the query) and every held-out labelled query must find its own document among all
indexed ones (MRR@10), with the other folds' documents re-embedded as ``apply`` would leave them. With labelled
queries the mode is chosen on the queries' MRR@10 alone: a document finding itself says little about queries written
in other words (issue 40: that choice picked the weaker mode), and so is each mode's route: every route is
cross-validated on the labelled queries. Without them, each mode's route is the one whose held-out bridged vectors
are closest to the true ones (cosine; ``choose="fidelity"``): a document finding itself prefers Procrustes-family
maps, which a plain RidgeCV beats on real queries (issue 40).

``refit_migration``: once certified, the chosen bridges refitted on every re-embedded item (the held-out ones too)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from latentstitch._core.folds import kfold, training_rows
from latentstitch._core.params import check_positive_int, check_seed
from latentstitch.bridge import MIN_PER_FOLD, Bridge, resolve_routes
from latentstitch.migrate._inputs import (
    MigrationWarning,
    check_ids,
    check_index_and_sample,
    check_vectors,
    held_in_sample,
    held_within,
    warn_or_refuse,
)
from latentstitch.migrate._migration import MODES, CurveMeasure, Migration
from latentstitch.migrate._retrieval import (
    K,
    check_metric,
    overlap,
    per_query,
    positions,
    prepare,
    ranks,
    search,
    without_self,
)

#: The index rows the cross-validation searches at most (the sample's documents and random others).
MAX_INDEX = 20_000
#: Shares of each fold's training pairs the learning curve fits on (``Migration.learning``): what re-embedding a
#: quarter, a half and all of the sample gives, to judge whether re-embedding more still pays.
CURVE_SHARES = (0.25, 0.5, 1.0)


@dataclass
class QuerySample:
    """Real queries embedded by both models: ``new`` (m, p), ``old`` (m, q), and optionally ``relevant``: the id of
    each query's relevant document in the index (then the query is scored; without it, only fitted on)."""

    new: np.ndarray
    old: np.ndarray
    relevant: np.ndarray | None = None

    def check(self, new_width: int, old_width: int, metric: str | None = None) -> QuerySample:
        new = check_vectors(
            self.new, "queries_new", metric=metric, width=new_width, width_of="like the sample", rows="queries"
        )
        old = check_vectors(
            self.old, "queries_old", metric=metric, width=old_width, width_of="like the index", rows="queries"
        )
        if len(new) != len(old):
            raise ValueError(f"queries_old: expected {len(new)} rows like queries_new, got {len(old)}")
        relevant = None
        if self.relevant is not None:  # several queries may share their relevant document
            relevant = check_ids(
                self.relevant, "queries_relevant", count=len(new), count_name="queries_new", unique=False
            )
        return QuerySample(new, old, relevant)

    def relevant_rows(self, index_ids: np.ndarray) -> np.ndarray:
        """Each labelled query's row in the index, -1 where its relevant id is not there (not indexed, deleted);
        none there is an error, some a ``MigrationWarning`` (those queries are not scored)."""
        known = held_within(self.relevant, index_ids)
        warn_or_refuse(
            int((~known).sum()),
            len(known),
            f"queries_relevant: none of the {len(known)} relevant ids is in the index, so no query can be scored; "
            "give the ids the index holds",
            f"queries_relevant: {int((~known).sum())} of {len(known)} relevant ids are not in the index (never "
            "indexed, or deleted since); those queries are not scored",
        )
        rows = np.full(len(known), -1)
        rows[known] = positions(index_ids, self.relevant[known], "queries_relevant")
        return rows


#: Routes a migration tries beside the bridge's automatic ones: ``ridge_loo`` is scikit-learn's ``RidgeCV`` on the
#: raw vectors, the map a user would fit first (issue 40: it beat the automatic routes on real queries at 5%).
MIGRATION_ROUTES = ("ridge_loo",)


def translation_routes() -> list[str]:
    """The bridge routes a vector index can read: every automatic route of the translation family, and
    ``MIGRATION_ROUTES``."""
    auto = [spec.name for spec in resolve_routes("auto") if spec.family == "translation" and not spec.pools]
    return auto + [name for name in MIGRATION_ROUTES if name not in auto]


def check_routes(routes: Sequence[str] | None) -> list[str]:
    """The bridge routes to try (default ``translation_routes()``): route names of the translation family, the
    only routes whose output is a vector of the other model's space that an index can search."""
    if routes is None:
        return translation_routes()
    specs = resolve_routes(routes)
    others = [spec.name for spec in specs if spec.family != "translation"]
    if others:
        raise ValueError(
            f"routes: {', '.join(others)} {'is' if len(others) == 1 else 'are'} not a translation route; a migration "
            f"maps vectors into the other model's space, e.g. {', '.join(translation_routes())}"
        )
    pooled = [spec.name for spec in specs if spec.pools]
    if pooled:
        raise ValueError(
            f"routes: {', '.join(pooled)} need unpaired vectors of both models (Bridge.fit's source_pool=, "
            f"target_pool=), which a migration does not take; use e.g. {', '.join(translation_routes())}"
        )
    return [spec.name for spec in specs]


def coverage_warning(old: np.ndarray, sample_rows: np.ndarray, metric: str, seed: int) -> str | None:
    """Warn when the re-embedded sample misses whole regions of the old index: k-means (10 clusters) over the
    index; the share of the corpus in clusters without a sampled item."""
    from sklearn.cluster import MiniBatchKMeans

    rng = np.random.default_rng(seed)
    rows = rng.choice(len(old), size=min(len(old), 20_000), replace=False)
    x = prepare(old[rows], metric).numpy()
    clusters = min(10, len(rows) // 20)
    if clusters < 2:
        return None
    model = MiniBatchKMeans(clusters, random_state=seed, n_init=1, batch_size=2048).fit(x)
    sampled = set(model.predict(prepare(old[sample_rows], metric).numpy()).tolist())
    missed = [c for c in range(clusters) if c not in sampled]
    share = float(np.isin(model.labels_, missed).mean())
    if share > 0.2:
        return (
            f"sample: the re-embedded items cover only {clusters - len(missed)} of {clusters} regions of the old "
            f"index (k-means); {share:.0%} of the corpus lies in regions without one, where the bridge is "
            "extrapolating: re-embed a sample chosen by `migrate plan` (random or k-means)"
        )
    return None


def _pairs(mode: str, old: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (new, old) if mode == "query" else (old, new)


def _inner_folds(asked: int, pairs: int) -> tuple[int, str | None]:
    """The folds of the bridge's own route choice on ``pairs`` fit pairs: ``asked``, or as many as hold
    ``MIN_PER_FOLD`` pairs each (at least 2; a note says so): a plan of 20 documents holds 10 out and leaves 10-14 to
    fit on. Fewer than two folds' worth of pairs is an error naming the sample."""
    usable = pairs // MIN_PER_FOLD
    if usable < 2:
        raise ValueError(
            f"sample_ids: expected at least {2 * MIN_PER_FOLD} re-embedded items to fit on (outside holdout_ids, the "
            f"queries' pairs counted), got {pairs}; re-embed more (a larger plan budget) or hold fewer out"
        )
    if usable >= asked:
        return asked, None
    return usable, (
        f"inner_folds: {usable} of the {asked} asked: the route's cross-validation needs at least {MIN_PER_FOLD} "
        f"pairs per fold and the fit has {pairs}"
    )


def _bridge(mode, old, new, routes, seed, inner_folds, index=None) -> Bridge:
    """The mode's bridge on the pairs; query-side, its held-out pairs are also ranked among ``index`` (the old
    index's vectors: ``Bridge.fit(target_pool=...)``), the search the bridged queries will run."""
    source, target = _pairs(mode, old, new)
    pool = index if mode == "query" else None
    # the bridge's own warnings (pairs that repeat, no route better than chance) reach the user
    return Bridge(routes=list(routes), cv=inner_folds, seed=seed).fit(source, target, target_pool=pool)


def _fold_score(mode, bridge, index_old, train_rows, train_new, query_new, relevant_rows, metric) -> dict:
    """Per held-out query, its measures (``per_query``: its own document among all indexed ones)."""
    if mode == "query":
        found = search(np.asarray(bridge.transform(query_new), dtype=np.float32), index_old, 10, metric)
    else:
        migrated = np.asarray(bridge.transform(index_old), dtype=np.float32)
        migrated[train_rows] = train_new
        found = search(query_new, migrated, 10, metric)
    return per_query(ranks(found, relevant_rows))


def fit_migration(
    index_ids: Sequence,
    index_vectors: np.ndarray,
    sample_ids: Sequence,
    sample_new: np.ndarray,
    *,
    metric: str = "cosine",
    queries: QuerySample | None = None,
    holdout_ids: Sequence = (),
    modes: Sequence[str] = MODES,
    routes: Sequence[str] | None = None,
    folds: int = 5,
    inner_folds: int = 3,
    seed: int = 0,
    choose: str = "fidelity",
) -> Migration:
    """Fit both modes' bridges on the re-embedded sample (minus ``holdout_ids``, kept for ``certify``) and choose
    the mode by ``folds``-fold cross-validation of MRR@10 over the whole index (see the module docstring).

    ``choose``: how the route and the mode are chosen without labelled queries (with them, always on the queries):
    ``"fidelity"`` (default), each mode's route by the held-out bridged vectors' cosine to the true ones
    (``_route_by_fidelity``), the mode by MRR@10 over the whole index; ``"self"``, the route by the bridge's own
    cross-validation (each re-embedded item finding itself), the mode likewise; ``"neighbours"``, every route in both
    modes by the held-out items' overlap@10 with the new model's own top 10 among the re-embedded items
    (``neighbour_overlap``). On pairs not in ``benchmarks/migration_peers.py`` (``benchmarks/migration_choice.py``,
    ``DEV``), ``fidelity`` kept more of a full re-embed's Recall@10 of real queries than ``self`` at 5% and 10%
    re-embedded and ``neighbours`` less (``results/migration/choice``)."""
    check_metric(metric)
    if choose not in CHOICES:
        raise ValueError(f"choose: expected one of {', '.join(CHOICES)}, got {choose!r}")
    check_seed(seed)
    modes = [modes] if isinstance(modes, str) else list(modes)  # one mode by name, like routes
    if not modes:
        raise ValueError(f"modes: expected at least one of {', '.join(MODES)}, got none")
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"modes: expected some of {', '.join(MODES)}, got {mode!r}")
    routes = check_routes(routes)
    inner_folds = check_positive_int(inner_folds, "inner_folds", minimum=2)
    if queries is not None and not isinstance(queries, QuerySample):
        raise TypeError(f"queries: expected a QuerySample(new, old, relevant) or None, got {type(queries).__name__}")
    index_ids, old, ids, new = check_index_and_sample(
        index_ids, index_vectors, sample_ids, sample_new, metric=metric, min_sample_rows=2
    )
    holdout_ids = check_ids(holdout_ids, "holdout_ids")
    keep = ~held_in_sample(holdout_ids, ids, "nothing is held out for the certificate")
    held_ids, ids, new = ids[~keep], ids[keep], new[keep]
    if len(ids) < 2:
        raise ValueError(
            f"holdout_ids: they leave {len(ids)} of the {len(keep)} re-embedded items to fit on; expected at least 2"
        )
    rows = positions(index_ids, ids, "sample_ids")
    if queries is not None:
        queries = queries.check(new.shape[1], old.shape[1], metric)
    warning = coverage_warning(old, rows, metric, seed)
    if warning:
        warnings.warn(warning, MigrationWarning, stacklevel=2)
    old_n, new_n = prepare(old, metric).numpy(), prepare(new, metric).numpy()
    source_old, source_new = old_n[rows], new_n
    if queries is not None:
        source_old = np.concatenate([source_old, prepare(queries.old, metric).numpy()])
        source_new = np.concatenate([source_new, prepare(queries.new, metric).numpy()])
    inner_folds, fewer_folds = _inner_folds(inner_folds, len(source_old))
    choice_note, neighbours = None, None  # neighbours: each mode's overlap, when it chooses the mode
    fidelity_notes: list[str] = []
    if queries is not None and queries.relevant is not None and len(routes) > 1:
        # labelled queries: each route is cross-validated on them (what users send), not on the bridge's own score
        bridges, scores, learning = _routes_on_queries(
            modes,
            routes,
            (source_old, source_new),
            (old_n, rows, new_n),
            queries,
            index_ids,
            metric,
            folds,
            seed,
            inner_folds,
        )
    elif choose == "fidelity":
        bridges = {}
        for mode in modes:
            bridges[mode], said = _route_by_fidelity(mode, source_old, source_new, routes, seed, inner_folds, old_n)
            fidelity_notes.append(said)
        scores, learning = _cross_validate(old_n, rows, new_n, queries, index_ids, bridges, metric, folds, seed)
    elif choose == "neighbours":
        bridges, neighbours, choice_note = _routes_on_neighbours(
            modes, routes, (source_old, source_new), (old_n, rows, new_n), metric, folds, seed, inner_folds
        )
        scores, learning = _cross_validate(old_n, rows, new_n, queries, index_ids, bridges, metric, folds, seed)
    else:
        bridges = {}
        for mode in modes:  # each mode's route is chosen once, by the bridge's own cross-validation on every pair
            bridges[mode] = _bridge(mode, source_old, source_new, routes, seed, inner_folds, old_n)
        scores, learning = _cross_validate(old_n, rows, new_n, queries, index_ids, bridges, metric, folds, seed)
    if neighbours is None:
        chosen = max(modes, key=lambda m: float(np.mean(scores[m])))
    else:  # the mode whose route keeps the new model's neighbours best
        chosen = max(modes, key=lambda m: neighbours[m])
    return Migration(
        mode=chosen,
        metric=metric,
        bridges=bridges,
        cv_mrr={m: [float(v) for v in scores[m]] for m in modes},
        learning=learning,
        n_sample=len(ids),
        n_queries=0 if queries is None else len(queries.new),
        old_dimension=old.shape[1],
        new_dimension=new.shape[1],
        notes=[note for note in (warning, fewer_folds, choice_note, *fidelity_notes) if note],
        holdout_ids=[str(i) for i in held_ids.tolist()],
    )


#: How ``fit_migration`` chooses the route and the mode without labelled queries.
CHOICES = ("self", "fidelity", "neighbours")


def _route_by_fidelity(mode, old, new, routes, seed, inner_folds, index) -> tuple[Bridge, str]:
    """The mode's bridge on the route whose held-out bridged vectors are closest to the true ones (the bridge's own
    cross-validated mean cosine, ``Bridge.routes_``): the best estimate of each item's other-model vector, so an
    index searched with it ranks items by their expected similarity to the query. A blend (``ensemble``) is not a
    candidate (refitted alone it has nothing to blend). Returns the bridge and a note naming each route's figure."""
    bridge = _bridge(mode, old, new, routes, seed, inner_folds, index)
    rows = [
        row
        for row in bridge.routes_
        if row.fitted and row.cosine is not None and resolve_routes(row.route)[0].stack is None
    ]
    if not rows:
        return bridge, f"{mode}-side: no route scored a held-out cosine; the bridge's own choice kept"
    best = max(rows, key=lambda row: row.cosine[0])
    if best.route != bridge.route_:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bridge = _bridge(mode, old, new, [best.route], seed, inner_folds, index)
    figures = ", ".join(f"{row.route} {row.cosine[0]:.3f}" for row in rows)
    return bridge, f"{mode}-side route chosen by the held-out bridged vectors' cosine to the true ones ({figures})"


def neighbour_overlap(mode, estimator_of, old, new, folds, seed, metric) -> np.ndarray:
    """Per re-embedded item, the overlap of its top 10 (the item itself left out) with the new model's own top 10
    among the re-embedded items (Drift-Adapter's protocol, as the certificate's decision reads it without labels):
    each item's bridged vector comes from the route fitted on the other folds (``estimator_of(source, target)``),
    so the sample is searched as the bridged index will be. Corpus-side: the item's new vector searches the items'
    bridged old vectors; query-side: its bridged new vector searches the items' old vectors. ``old``, ``new``: the
    items' vectors as the metric reads them (``prepare``)."""
    parts = kfold(len(old), folds, seed, name="folds", min_rows=2)
    source, target = _pairs(mode, old, new)
    bridged = np.empty((len(old), target.shape[1]), dtype=np.float32)
    for fold, held in enumerate(parts):
        train = training_rows(parts, fold)
        bridged[held] = np.asarray(estimator_of(source[train], target[train]).transform(source[held]))
    k = min(K, len(old) - 1)
    own = np.arange(len(old))
    reference = without_self(search(new, new, k + 1, metric), own)
    found = search(new, bridged, k + 1, metric) if mode == "corpus" else search(bridged, old, k + 1, metric)
    return overlap(without_self(found, own), reference)


def _routes_on_neighbours(modes, routes, pairs, index, metric, folds, seed, inner_folds):
    """Per mode, the route whose bridged sample keeps the new model's neighbours best (``neighbour_overlap`` on the
    fit part's documents, the same folds for every route), each route's bridge fitted on every pair (its parameters
    chosen by its own cross-validation); a route that cannot be fitted alone (``ensemble``) is left out. Returns the
    bridges, each mode's best mean overlap and a note naming every route's figure."""
    old_n, rows, new_n = index
    best: dict[str, tuple[float, Bridge]] = {}
    figures: dict[str, list[str]] = {mode: [] for mode in modes}
    failures = []
    for route in routes:
        for mode in modes:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    bridge = _bridge(mode, *pairs, [route], seed, inner_folds, old_n)
                    values = neighbour_overlap(
                        mode,
                        lambda s, t, b=bridge: clone(b.estimator_).fit(s, t),
                        old_n[rows],
                        new_n,
                        folds,
                        seed,
                        metric,
                    )
            except ValueError as error:
                failures.append(f"{route}: {error}")
                break
            score = float(values.mean())
            figures[mode].append(f"{route} {score:.3f}")
            if mode not in best or score > best[mode][0]:
                best[mode] = (score, bridge)
    if set(best) != set(modes):
        raise ValueError(f"routes: no route could be fitted on the pairs ({'; '.join(failures)})")
    note = "route and mode chosen by the held-out re-embedded items' overlap@10 with the new model's own top 10 " + (
        "among them (" + "; ".join(f"{mode}-side: {', '.join(figures[mode])}" for mode in modes) + ")"
    )
    return {m: best[m][1] for m in modes}, {m: best[m][0] for m in modes}, note


def _routes_on_queries(modes, routes, pairs, index, queries, index_ids, metric, folds, seed, inner_folds):
    """Per mode, the route whose held-out labelled queries score best (MRR@10, ``_cross_validate``), each route's
    bridge fitted on every pair; a route that cannot be fitted is left out. Returns bridges, scores, learning."""
    old_n, rows, new_n = index
    best: dict[str, tuple[float, Bridge, list[float], dict]] = {}
    failures = []
    for route in routes:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                bridges = {mode: _bridge(mode, *pairs, [route], seed, inner_folds, old_n) for mode in modes}
                scores, learning = _cross_validate(old_n, rows, new_n, queries, index_ids, bridges, metric, folds, seed)
        except ValueError as error:
            failures.append(f"{route}: {error}")
            continue
        for mode in modes:
            score = float(np.mean(scores[mode]))
            if mode not in best or score > best[mode][0]:
                best[mode] = (score, bridges[mode], scores[mode], learning[mode])
    if set(best) != set(modes):
        raise ValueError(f"routes: no route could be fitted on the pairs ({'; '.join(failures)})")
    return (
        {m: best[m][1] for m in modes},
        {m: best[m][2] for m in modes},
        {m: best[m][3] for m in modes},
    )


def _cross_validate(old, rows, new, queries, index_ids, bridges, metric, folds, seed):
    """Per mode, the held-out MRR@10 of each fold: the mode's chosen route refitted on the other folds."""
    rng = np.random.default_rng(seed)
    if len(old) > MAX_INDEX:  # the sample's documents and random others
        others = np.setdiff1d(np.arange(len(old)), rows)
        subset = np.concatenate([rows, rng.choice(others, size=MAX_INDEX - len(rows), replace=False)])
        old, rows, index_ids = old[subset], np.arange(len(rows)), index_ids[subset]
    doc_parts = kfold(len(rows), folds, seed, name="folds", min_rows=2)
    labelled = queries is not None and queries.relevant is not None
    q_new = None if queries is None else prepare(queries.new, metric).numpy()
    q_old = None if queries is None else prepare(queries.old, metric).numpy()
    q_parts = np.array_split(rng.permutation(len(q_new)), folds) if queries is not None else None
    q_rows = queries.relevant_rows(index_ids) if labelled else None
    scores: dict[str, list[float]] = {m: [] for m in bridges}
    curve = {m: {share: [] for share in CURVE_SHARES} for m in bridges}
    for fold in range(folds):
        train, held = training_rows(doc_parts, fold), doc_parts[fold]
        q_train = None if queries is None else training_rows(q_parts, fold)
        query_new, relevant = new[held], rows[held]
        if labelled:
            q_held = q_parts[fold][q_rows[q_parts[fold]] >= 0]
            query_new = np.concatenate([query_new, q_new[q_held]])
            relevant = np.concatenate([relevant, q_rows[q_held]])
        for share in CURVE_SHARES:  # random shares of the training folds: what a smaller budget gives
            docs = train if share == 1.0 else np.sort(rng.permutation(train)[: max(1, round(share * len(train)))])
            fit_old, fit_new = old[rows[docs]], new[docs]
            if queries is not None:
                taken = q_train if share == 1.0 else rng.permutation(q_train)[: round(share * len(q_train))]
                fit_old = np.concatenate([fit_old, q_old[taken]])
                fit_new = np.concatenate([fit_new, q_new[taken]])
            for mode, bridge in bridges.items():
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        estimator = clone(bridge.estimator_).fit(*_pairs(mode, fit_old, fit_new))
                except ValueError:  # too few pairs for the route at a small share: that point is left out
                    if share == 1.0:
                        raise
                    continue
                values = _fold_score(mode, estimator, old, rows[docs], new[docs], query_new, relevant, metric)
                if share == 1.0:  # the choice reads the labelled queries when there are: they are what users send
                    read = values["mrr@10"][len(held) :] if labelled and len(q_held) else values["mrr@10"]
                    scores[mode].append(float(read.mean()))
                curve[mode][share].append((len(fit_old), _by_part(values, len(held))))
    return scores, _curve_summary(curve, len(rows), 0 if queries is None else len(q_new), folds)


def _by_part(values: dict[str, np.ndarray], documents: int) -> dict[str, float]:
    """Mean measures of the held-out documents (the first ``documents`` queries) and of the labelled queries after
    them, as ``"documents:recall@10"`` ... (a part with no query is left out)."""
    parts = {"documents": slice(0, documents), "queries": slice(documents, None)}
    return {
        CurveMeasure(part, name).key: float(v[rows].mean())
        for part, rows in parts.items()
        for name, v in values.items()
        if len(v[rows])
    }


def _curve_summary(curve, documents: int, queries: int, folds: int) -> dict[str, dict[str, list]]:
    """Per mode, the learning curve: for each share of the training folds that every fold could fit, the pairs it
    fitted on (mean over folds), the held-out measures of the re-embedded documents as queries (``documents:...``)
    and of the labelled queries (``queries:...``; mean over folds), and the pairs the whole sample holds."""
    out = {}
    for mode, shares in curve.items():
        points = [(s, v) for s, v in shares.items() if len(v) == folds]
        out[mode] = {
            "share": [s for s, _ in points],
            "pairs": [float(np.mean([n for n, _ in v])) for _, v in points],
            "sample_pairs": documents + queries,
        }
        measures = points[0][1][0][1].keys() if points else ()  # each fold's first (pairs, measures)
        for key in measures:
            out[mode][key] = [float(np.mean([m[key] for _, m in v])) for _, v in points]
    return out


def _refit_routes(bridge: Bridge) -> list[str]:
    """The routes a refit tries: the bridge's chosen route; for a route that blends others (``ensemble``), the routes
    it blended and itself (it is scored from their cross-validated predictions: alone it has nothing to blend)."""
    spec = resolve_routes(bridge.route_)[0]
    if spec.stack is None:
        return [bridge.route_]
    return [*bridge.estimator_.routes, bridge.route_]


def refit_migration(
    migration: Migration,
    index_ids: Sequence,
    index_vectors: np.ndarray,
    sample_ids: Sequence,
    sample_new: np.ndarray,
    *,
    queries: QuerySample | None = None,
    inner_folds: int = 3,
    seed: int = 0,
) -> Migration:
    """The migration to deploy once certified: each mode's bridge, on the route it chose, refitted on every
    re-embedded item (those held out for the certificate too) and ``queries`` when given. The mode, the route and
    the cross-validated scores stay those of ``migration`` (a blend of routes, ``ensemble``, is refitted with the
    routes it blended, and the bridge's own cross-validation on every item may then keep one of them instead: the
    note says so); ``refitted`` records the refit (the items and queries refitted on, and the items the certified
    bridge was fitted on), a note says so, and ``holdout_ids`` is empty: nothing is left to certify it on
    (``certify_migration`` refuses it); its certificate is the one of ``migration``, measured before the refit.
    ``index`` (the fitted index's record) is carried over."""
    if not isinstance(migration, Migration):
        raise TypeError(f"migration: expected a Migration (fit_migration's result), got {type(migration).__name__}")
    check_seed(seed)
    inner_folds = check_positive_int(inner_folds, "inner_folds", minimum=2)
    metric = migration.metric
    index_ids, old, ids, new = check_index_and_sample(
        index_ids,
        index_vectors,
        sample_ids,
        sample_new,
        metric=metric,
        old_width=migration.old_dimension,
        new_width=migration.new_dimension,
        min_sample_rows=2,
    )
    rows = positions(index_ids, ids, "sample_ids")
    old_n = prepare(old, metric).numpy()
    source_old, source_new = old_n[rows], prepare(new, metric).numpy()
    if queries is not None:
        if not isinstance(queries, QuerySample):
            raise TypeError(
                f"queries: expected a QuerySample(new, old, relevant) or None, got {type(queries).__name__}"
            )
        queries = queries.check(new.shape[1], old.shape[1], metric)
        source_old = np.concatenate([source_old, prepare(queries.old, metric).numpy()])
        source_new = np.concatenate([source_new, prepare(queries.new, metric).numpy()])
    inner_folds, _ = _inner_folds(inner_folds, len(source_old))  # the fit's note already says when fewer
    bridges = {
        mode: _bridge(mode, source_old, source_new, _refit_routes(bridge), seed, inner_folds, old_n)
        for mode, bridge in migration.bridges.items()
    }
    certified = migration.n_sample if migration.refitted is None else migration.refitted["certified_n_sample"]
    note = (
        f"refitted on all {len(ids)} re-embedded items"
        + ("" if queries is None else f" and {len(queries.new)} queries")
        + " after certification (the held-out ones included); the certificate measured the bridge fitted on "
        f"{certified}"
    )
    for mode, bridge in bridges.items():
        if bridge.route_ != migration.bridges[mode].route_:
            note += (
                f"; the {mode}-side {migration.bridges[mode].route_} refitted with the routes it blends: the bridge's "
                f"cross-validation on every item kept {bridge.route_}"
            )
    return Migration(
        mode=migration.mode,
        metric=metric,
        bridges=bridges,
        cv_mrr=migration.cv_mrr,
        learning=migration.learning,
        n_sample=len(ids),
        n_queries=0 if queries is None else len(queries.new),
        old_dimension=migration.old_dimension,
        new_dimension=migration.new_dimension,
        notes=[*migration.notes, note],
        holdout_ids=[],
        index=None if migration.index is None else dict(migration.index),
        refitted={
            "n_sample": len(ids),
            "n_queries": 0 if queries is None else len(queries.new),
            "certified_n_sample": certified,
        },
    )
