"""The certificate of a migration, measured on the held-out re-embedded items (never fitted on).

Two query sets: **documents** (each held-out document's new vector is its own query; it must find itself) and,
when given, **queries** (real queries embedded by both models, each with the id of its relevant document; those
whose document was fitted on are left out). Two universes:

- **the whole index**: the bridged setup (each mode) against the old model end to end (old queries, old index):
  Recall@1/@10, MRR@10, nDCG@10 and the top-10 overlap, each with an interval over queries (Wilson's score
  interval for the recalls, the percentile bootstrap for the others). The bridged
  Recall@10 here estimates what the untouched rest of the corpus will see;
- **the re-embedded sample** (the only documents whose new vectors exist): the bridged setup against the
  re-embedded reference, the new model end to end, with the ratio of their scores.

Also: threshold remapping (a cut-off in the old or new space mapped by quantiles to the bridged scores, with the
share of decisions that change and an interval) and, for the corpus-side mode, a per-document confidence
(``neighbourhood_agreement``) and the curve of Recall@10 against the share of lowest-confidence documents sent to
re-embedding first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from latentstitch._core.params import check_choice, check_positive_int, check_probability, check_seed
from latentstitch.migrate._confidence import confidence_curve, neighbourhood_agreement
from latentstitch.migrate._decision import KEEP, SMALL_INDEX, decide
from latentstitch.migrate._fit import QuerySample
from latentstitch.migrate._inputs import (
    check_ids,
    check_index_and_sample,
    check_thresholds,
    held_in_sample,
    held_within,
    warn_or_refuse,
)
from latentstitch.migrate._migration import Migration, metric_words
from latentstitch.migrate._report import Certificate
from latentstitch.migrate._retrieval import (
    overlap,
    pair_scores,
    positions,
    prepare,
    ranks,
    search,
    summarise,
    without_self,
)


def _query_sets(migration, old, new_by_row, held_rows, fit_rows, queries, index_ids):
    """name -> (new query vectors, old query vectors, relevant rows)."""
    sets = {"documents": (new_by_row[held_rows], old[held_rows], held_rows)}
    if queries is not None and queries.relevant is not None:
        rows = queries.relevant_rows(index_ids)
        keep = (rows >= 0) & ~np.isin(rows, fit_rows)
        if keep.any():
            sets["queries"] = (queries.new[keep], queries.old[keep], rows[keep])
    return sets


def _held_out(migration: Migration, sample_ids: np.ndarray, holdout_ids: np.ndarray) -> np.ndarray:
    """Per sample id, whether the certificate measures it: held out here and, where the migration kept the ids it
    held out of its fit, held out there too (one it was fitted on would measure training data). Some ids amiss are
    a ``MigrationWarning``; none left, or fewer than 10, an error."""
    held = held_in_sample(holdout_ids, sample_ids, "nothing can be measured")
    if migration.holdout_ids is not None:
        fitted = held & ~held_within(sample_ids, np.asarray(migration.holdout_ids, dtype=str))
        warn_or_refuse(
            int(fitted.sum()),
            int(held.sum()),
            f"holdout_ids: the migration was fitted on all {int(held.sum())} of them (they were not in "
            "fit_migration's holdout_ids), so a certificate would measure its training data; certify on the ids "
            "held out of the fit",
            f"holdout_ids: the migration was fitted on {int(fitted.sum())} of the {int(held.sum())} (they were not in "
            "fit_migration's holdout_ids); the certificate leaves them out and measures the others",
        )
        held &= ~fitted
    if held.sum() < 10:
        raise ValueError(
            f"holdout_ids: expected at least 10 held-out re-embedded items in the sample, got {int(held.sum())}"
        )
    return held


def _bridged_index(migration, old, fit_rows, fit_new):
    migrated = migration.transform_corpus(old)
    migrated[fit_rows] = prepare(fit_new, migration.metric).numpy()
    return migrated


def _found(migration, mode, q_new, old, migrated, k=10):
    if mode == "query":
        return search(migration.transform_queries(q_new), old, k, migration.metric)
    return search(q_new, migrated, k, migration.metric)


def certify_migration(
    migration: Migration,
    index_ids: Sequence,
    index_vectors: np.ndarray,
    sample_ids: Sequence,
    sample_new: np.ndarray,
    holdout_ids: Sequence,
    *,
    queries: QuerySample | None = None,
    thresholds: Sequence[float] = (),
    threshold_space: str = "old",
    store: Any = None,
    level: float = 0.95,
    keep: float = KEEP,
    small_index: int = SMALL_INDEX,
    seed: int = 0,
) -> Certificate:
    """Measure ``migration`` on the held-out re-embedded items (``holdout_ids``, a subset of ``sample_ids``); see
    the module docstring. ``store``: an opened ``VectorStore`` whose own ANN search is also measured (query-side).
    The certificate's ``decision`` (``migrate._decision.decide``: keep the old model, migrate, re-embed everything,
    or cannot tell) reads the labelled queries when given, else the held-out items' overlap@10 with a full
    re-embed; ``keep``: the share of a full re-embed's figure a migration must keep, ``small_index``: an index this
    small is re-embedded rather than migrated when the migration loses anything measurable."""
    if not isinstance(migration, Migration):
        raise TypeError(
            f"migration: expected a Migration (fit_migration's result, or Migration.load(path)), got "
            f"{type(migration).__name__}"
        )
    if migration.refitted is not None:
        raise ValueError(
            f"migration: it was refitted after certification on all {migration.refitted['n_sample']} re-embedded "
            "items (refit_migration), the held-out ones included, so nothing is left to certify it on; its "
            f"certificate is the one of the migration it was refitted from (fitted on "
            f"{migration.refitted['certified_n_sample']})"
        )
    check_seed(seed)
    check_choice(threshold_space, "threshold_space", ("old", "new"))
    level = check_probability(level, "level", low_open=True, high_open=True)
    keep = check_probability(keep, "keep", low_open=True)
    small_index = check_positive_int(small_index, "small_index", minimum=0)
    metric = migration.metric
    thresholds = check_thresholds(thresholds, metric)
    rng = np.random.default_rng(seed)
    index_ids, old, sample_ids, new = check_index_and_sample(
        index_ids,
        index_vectors,
        sample_ids,
        sample_new,
        metric=metric,
        old_width=migration.old_dimension,
        new_width=migration.new_dimension,
    )
    held = _held_out(migration, sample_ids, check_ids(holdout_ids, "holdout_ids"))
    sample_rows = positions(index_ids, sample_ids, "sample_ids")
    held_rows, fit_rows = sample_rows[held], sample_rows[~held]
    new_by_row = np.zeros((len(old), new.shape[1]), np.float32)
    new_by_row[sample_rows] = new
    if queries is not None:
        queries = queries.check(migration.new_dimension, migration.old_dimension, metric)
    migrated = _bridged_index(migration, old, fit_rows, new[~held]) if "corpus" in migration.bridges else None
    sets = _query_sets(migration, old, new_by_row, held_rows, fit_rows, queries, index_ids)
    measures: dict[str, Any] = {}
    for name, (q_new, q_old, relevant) in sets.items():
        measures[name] = _measure_set(
            migration,
            old,
            migrated,
            new_by_row,
            sample_rows,
            fit_rows,
            q_new,
            q_old,
            relevant,
            rng,
            level,
            store,
            index_ids,
        )
    headline = "queries" if "queries" in sets else "documents"
    figures = _headline_figures(
        migration, old, migrated, new_by_row, sample_rows, *sets[headline], documents=headline == "documents"
    )
    decision = decide(
        *figures,
        mode=migration.mode,
        labelled=headline == "queries",
        n_index=len(old),
        rng=rng,
        level=level,
        keep=keep,
        small_index=small_index,
    )
    remapped = _thresholds(migration, old, migrated, new_by_row, sample_rows, sets, thresholds, threshold_space, rng)
    curve, confidence_summary = None, None
    if migrated is not None:
        confidence = neighbourhood_agreement(old, migrated, metric, seed=seed)
        curve = confidence_curve(confidence, migrated, new_by_row, held_rows, sets, metric, rng)
        confidence_summary = {
            "measure": "neighbourhood agreement: the share of a document's 10 nearest reference documents that are "
            "the same in the old space and in the bridged (corpus-side) space",
            "quantiles": {str(q): float(np.quantile(confidence, q)) for q in (0.05, 0.25, 0.5, 0.75, 0.95)},
        }
    return Certificate(
        mode=migration.mode,
        metric=metric,
        metric_assumed=metric_words(metric),
        level=level,
        n_index=len(old),
        n_fit=len(fit_rows),
        n_holdout=len(held_rows),
        measures=measures,
        thresholds=remapped,
        confidence=confidence_summary,
        curve=curve,
        notes=list(migration.notes) + [w for w in [migration.learning_words()] if w],
        learning=migration.learning.get(migration.mode),
        decision=decision.to_dict(),
    )


def _headline_figures(migration, old, migrated, new_by_row, sample_rows, q_new, q_old, relevant, documents):
    """Per query of the headline set, over the re-embedded sample: the figure of the migration (chosen mode), of
    the old model end to end and of a full re-embed. Labelled queries: Recall@10. The held-out items as queries:
    the overlap of the top 10 (the item itself left out) with the full re-embed's top 10 (``decide``)."""
    metric = migration.metric
    in_sample = np.isin(relevant, sample_rows)
    q_new, q_old, relevant = q_new[in_sample], q_old[in_sample], relevant[in_sample]
    local = {int(r): i for i, r in enumerate(sample_rows)}
    rel_local = np.array([local[int(r)] for r in relevant], dtype=np.int64)
    sub_migrated = None if migrated is None else migrated[sample_rows]
    found = {
        "migrated": lambda k: _found(migration, migration.mode, q_new, old[sample_rows], sub_migrated, k),
        "old": lambda k: search(q_old, old[sample_rows], k, metric),
        "reembedded": lambda k: search(q_new, new_by_row[sample_rows], k, metric),
    }
    if not documents:
        return [(ranks(found[name](10), rel_local) <= 10).astype(float) for name in ("migrated", "old", "reembedded")]
    lists = {name: without_self(search_k(11), rel_local) for name, search_k in found.items()}
    return [overlap(lists[name], lists["reembedded"]) for name in ("migrated", "old", "reembedded")]


def _measure_set(
    migration, old, migrated, new_by_row, sample_rows, fit_rows, q_new, q_old, relevant, rng, level, store, index_ids
):
    metric = migration.metric
    whole_old = search(q_old, old, 10, metric)
    out: dict[str, Any] = {"n": len(relevant), "whole_index": {}, "sample": {}}
    out["whole_index"]["old model"] = _summary(ranks(whole_old, relevant), rng, level)
    # the re-embedded sample: reference (new end to end), old end to end, bridged
    in_sample = np.isin(relevant, sample_rows)
    local = {int(r): i for i, r in enumerate(sample_rows)}
    rel_local = np.array([local[int(r)] for r in relevant[in_sample]])
    qn, qo = q_new[in_sample], q_old[in_sample]
    reference = search(qn, new_by_row[sample_rows], 10, metric)
    out["sample"]["new model (reference)"] = _summary(ranks(reference, rel_local), rng, level)
    out["sample"]["old model"] = _summary(ranks(search(qo, old[sample_rows], 10, metric), rel_local), rng, level)
    for mode in migration.bridges:
        label = f"bridged, {mode}-side" + (" (chosen)" if mode == migration.mode else "")
        found = _found(migration, mode, q_new, old, migrated)
        row = _summary(ranks(found, relevant), rng, level)
        row["overlap with old model"] = _interval(overlap(found, whole_old), rng, level)
        out["whole_index"][label] = row
        sub_migrated = None if migrated is None else migrated[sample_rows]
        local_found = _found(migration, mode, qn, old[sample_rows], sub_migrated)
        local_row = _summary(ranks(local_found, rel_local), rng, level)
        local_row["overlap with reference"] = _interval(overlap(local_found, reference), rng, level)
        ref = out["sample"]["new model (reference)"]["recall@10"]["mean"]
        local_row["recall@10 / reference"] = local_row["recall@10"]["mean"] / ref if ref else float("nan")
        out["sample"][label] = local_row
        if store is not None and store.has_search and mode == "query":
            answer = store.search(migration.transform_queries(q_new), 10)
            rows = _ids_to_rows(answer, index_ids)
            out["whole_index"][f"bridged, query-side, {store.kind}'s own ANN"] = _summary(
                ranks(rows, relevant), rng, level
            )
    return out


def _ids_to_rows(answer: np.ndarray, index_ids: np.ndarray) -> np.ndarray:
    lookup = {str(v): i for i, v in enumerate(index_ids.tolist())}
    return np.array([[lookup.get(str(v), -1) for v in row] for row in answer.tolist()], dtype=np.int64)


def _interval(values, rng, level):
    from latentstitch.migrate._retrieval import bootstrap_mean

    return bootstrap_mean(values, rng, level).to_dict()


def _summary(rank, rng, level) -> dict[str, Any]:
    return {name: interval.to_dict() for name, interval in summarise(rank, rng, level).items()}


def _thresholds(migration, old, migrated, new_by_row, sample_rows, sets, thresholds, space, rng):
    """Each cut-off mapped from ``space`` to the chosen mode's bridged scores by quantiles, over the (query, top-10
    reference document) pairs of the re-embedded sample."""
    if not thresholds:
        return []
    metric = migration.metric
    pairs_new, pairs_old, pairs_bridged = [], [], []
    for q_new, q_old, relevant in sets.values():
        keep = np.isin(relevant, sample_rows)
        qn, qo = q_new[keep], q_old[keep]
        top = sample_rows[search(qn, new_by_row[sample_rows], 10, metric)]
        k = top.shape[1]
        docs = top.reshape(-1)
        qn_rep, qo_rep = np.repeat(qn, k, axis=0), np.repeat(qo, k, axis=0)
        pairs_new.append(pair_scores(qn_rep, new_by_row[docs], metric))
        pairs_old.append(pair_scores(qo_rep, old[docs], metric))
        if migration.mode == "query":
            pairs_bridged.append(pair_scores(migration.transform_queries(qn_rep), old[docs], metric))
        else:
            pairs_bridged.append(pair_scores(qn_rep, migrated[docs], metric))
    source = np.concatenate(pairs_new if space == "new" else pairs_old)
    bridged = np.concatenate(pairs_bridged)
    closer_is_larger = metric != "l2"
    out = []
    for t in thresholds:
        share = float(np.mean(source < t))
        mapped = float(np.quantile(bridged, share))
        draws = rng.integers(0, len(source), size=(500, len(source)))
        boot = [float(np.quantile(bridged[d], np.mean(source[d] < t))) for d in draws]
        tail = 0.025
        keep_source = source >= t if closer_is_larger else source <= t
        keep_bridged = bridged >= mapped if closer_is_larger else bridged <= mapped
        out.append(
            {
                "threshold": float(t),
                "space": space,
                "bridged_threshold": mapped,
                "interval": [float(np.quantile(boot, tail)), float(np.quantile(boot, 1 - tail))],
                "share_kept": float(keep_source.mean()),
                "decisions_changed": float(np.mean(keep_source != keep_bridged)),
                "pairs": len(source),
            }
        )
    return out
