"""plan, fit and certify on a synthetic corpus whose new model is a nonlinear image of the old one's latent."""

import warnings

import numpy as np
import pytest

from latentstitch.migrate import (
    Migration,
    MigrationWarning,
    QuerySample,
    certify_migration,
    fit_migration,
    load_plan,
    plan_sample,
    save_plan,
)
from latentstitch.migrate._fit import coverage_warning
from latentstitch.migrate._migration import CurveMeasure, curve_measures
from latentstitch.migrate._report import Certificate


@pytest.mark.parametrize("strategy", ["random", "kmeans", "farthest"])
def test_plan_draws_distinct_index_ids_with_a_random_holdout(corpus, strategy):
    plan = plan_sample(corpus.ids, corpus.old, 0.1, strategy=strategy, holdout=0.3, seed=3)
    assert len(plan.ids) == 60 and len(np.unique(plan.ids)) == 60
    assert np.isin(plan.ids, corpus.ids).all()
    assert len(plan.holdout_ids) == 18 and not np.isin(plan.holdout_ids, plan.fit_ids).any()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_plan_file_round_trip(corpus, tmp_path, suffix):
    plan = plan_sample(corpus.ids, corpus.old, 30, strategy="random", holdout=0.5)
    fit_ids, holdout_ids = load_plan(save_plan(plan, tmp_path / f"plan{suffix}"))
    assert sorted(map(int, fit_ids)) == sorted(plan.fit_ids.tolist())
    assert sorted(map(int, holdout_ids)) == sorted(plan.holdout_ids.tolist())


def test_plan_rejects_a_budget_outside_the_index(corpus):
    with pytest.raises(ValueError, match="budget: expected between 2 and 600"):
        plan_sample(corpus.ids, corpus.old, 601)


def test_fit_chooses_the_mode_with_the_better_cross_validated_mrr(fitted):
    _, migration = fitted
    means = {mode: np.mean(scores) for mode, scores in migration.cv_mrr.items()}
    assert migration.mode == max(means, key=means.get)
    assert min(means.values()) > 0.3  # far above chance (about 0.005 among 600 documents)


def test_migration_round_trips_and_refuses_a_changed_bridge(fitted, corpus, tmp_path):
    _, migration = fitted
    path = migration.save(tmp_path / "migration.json")
    loaded = Migration.load(path)
    np.testing.assert_allclose(loaded.transform_corpus(corpus.old[:20]), migration.transform_corpus(corpus.old[:20]))
    assert loaded.transform_corpus(corpus.old[:3]).dtype == np.float32
    bridge = tmp_path / "migration.query.safetensors"
    bridge.write_bytes(bridge.read_bytes()[:-1] + b"x")
    with pytest.raises(ValueError, match="changed since the migration was written"):
        Migration.load(path)


def test_certificate_intervals_and_reference(fitted, corpus):
    plan, migration = fitted
    queries = QuerySample(corpus.queries_new, corpus.queries_old, corpus.ids)
    certificate = certify_migration(
        migration,
        corpus.ids,
        corpus.old,
        plan.ids,
        corpus.new_of(plan.ids),
        plan.holdout_ids,
        queries=queries,
        thresholds=[0.5],
        seed=0,
    )
    for query_set in ("documents", "queries"):
        whole = certificate.measures[query_set]["whole_index"]
        for values in whole.values():
            for measure in values.values():
                assert measure["low"] <= measure["mean"] <= measure["high"]
        sample = certificate.measures[query_set]["sample"]
        assert sample["new model (reference)"]["recall@10"]["mean"] > 0.5
    # the queries fitted on are never certified: only queries of documents outside the fit part
    assert certificate.measures["queries"]["n"] == len(corpus.ids) - len(plan.fit_ids)
    threshold = certificate.thresholds[0]
    assert threshold["interval"][0] <= threshold["bridged_threshold"] <= threshold["interval"][1]
    assert 0 <= threshold["decisions_changed"] < 0.5
    curve = certificate.curve
    # nothing re-embedded: both orders read the bridged index; everything re-embedded: both read the new model's
    assert curve["share"][0] == 0 and curve["share"][-1] == 1
    assert curve["by_confidence"][0] == curve["at_random"][0] and curve["by_confidence"][-1] == curve["at_random"][-1]
    assert certificate.to_dict()["kind"] == "migration"
    # the fit's learning curve travels with the certificate: its table and its sentence
    assert certificate.learning == migration.learning[migration.mode]
    assert any(t["title"].startswith("learning curve of the fit") for t in certificate.tables())
    assert any(n.startswith("learning curve") for n in certificate.notes)


@pytest.mark.slow
def test_certificate_recall_interval_covers_the_untouched_rest_over_seeds(corpus):
    """The certificate's claim: its whole-index Recall@10 interval for held-out queries covers what queries of
    the documents nobody re-embedded get. Statistically, over seeds (95% intervals; at least 4 of 5)."""
    from latentstitch.migrate import search
    from latentstitch.migrate._retrieval import per_query, prepare, ranks

    covered = 0
    for seed in range(5):
        plan = plan_sample(corpus.ids, corpus.old, 0.3, strategy="random", holdout=0.5, seed=seed)
        sample_new = corpus.new_of(plan.ids)
        migration = fit_migration(
            corpus.ids,
            corpus.old,
            plan.ids,
            sample_new,
            holdout_ids=plan.holdout_ids,
            modes=("query",),
            folds=2,
            seed=seed,
            routes=("procrustes",),
        )
        queries = QuerySample(corpus.queries_new, corpus.queries_old, corpus.ids)
        certificate = certify_migration(
            migration, corpus.ids, corpus.old, plan.ids, sample_new, plan.holdout_ids, queries=queries, seed=seed
        )
        interval = certificate.recall10("queries")
        rest = ~np.isin(corpus.ids, plan.ids)
        found = search(
            migration.transform_queries(corpus.queries_new[rest]), prepare(corpus.old, "cosine"), 10, "cosine"
        )
        realised = per_query(ranks(found, np.flatnonzero(rest)))["recall@10"].mean()
        covered += interval["low"] <= realised <= interval["high"]
    assert covered >= 4


def test_a_sample_from_one_corner_warns(corpus):
    corner = np.argsort(corpus.old[:, 0])[-40:]  # the 40 documents farthest along one direction
    assert coverage_warning(corpus.old, corner, "cosine", 0) is not None
    spread = np.random.default_rng(0).choice(len(corpus.ids), 40, replace=False)
    assert coverage_warning(corpus.old, spread, "cosine", 0) is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_migration(
            corpus.ids,
            corpus.old,
            corpus.ids[corner],
            corpus.new[corner],
            modes=("query",),
            folds=2,
            routes=("procrustes",),
        )
    assert any(issubclass(w.category, MigrationWarning) and "regions" in str(w.message) for w in caught)


def test_bad_samples_are_named(corpus):
    with pytest.raises(ValueError, match="sample_ids: 1 ids appear more than once"):
        fit_migration(corpus.ids, corpus.old, corpus.ids[[1, 1, 2]], corpus.new[[1, 1, 2]])
    with pytest.raises(ValueError, match="sample_ids: 1 of 30 ids are not in the index"):
        ids = np.append(corpus.ids[:29], 10**9)
        fit_migration(corpus.ids, corpus.old, ids, corpus.new[:30])
    with pytest.raises(ValueError, match=r"queries_old: expected \(queries, 16\)"):
        fit_migration(
            corpus.ids,
            corpus.old,
            corpus.ids[:30],
            corpus.new[:30],
            queries=QuerySample(corpus.queries_new[:5], corpus.queries_new[:5]),
        )


def test_learning_curve_grows_with_the_pairs_and_round_trips(fitted, tmp_path):
    plan, migration = fitted
    fit_pairs = len(plan.fit_ids)
    for curve in migration.learning.values():
        assert curve["share"] == [0.25, 0.5, 1.0]
        assert curve["pairs"] == sorted(curve["pairs"]) and curve["sample_pairs"] == fit_pairs
        assert curve["pairs"][-1] == pytest.approx(fit_pairs * 2 / 3, abs=1)  # 3 folds: two thirds train
        assert all(0.0 <= r <= 1.0 for r in curve["documents:recall@10"] + curve["documents:recall@1"])
        assert "queries:recall@10" not in curve  # no labelled queries
    chosen = migration.learning[migration.mode]["documents:recall@1"]
    assert chosen[-1] > chosen[0]  # 16 old features: a quarter of the pairs leaves the map under-determined
    assert migration.learning_gain()[0] == CurveMeasure("documents", "recall@1")
    assert "learning curve" in migration.learning_words()
    loaded = Migration.load(migration.save(tmp_path / "migration.json"))
    assert loaded.learning == migration.learning


def test_a_migration_file_with_a_broken_learning_curve_is_named(fitted, tmp_path):
    import json

    _, migration = fitted
    path = migration.save(tmp_path / "migration.json")
    payload = json.loads(path.read_text())
    payload["learning"][migration.mode]["documents:recall@10"] = ["x"] * 3
    path.write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="learning curve holds a value that is not a number"):
        Migration.load(path, "MIGRATION")
    payload["learning"][migration.mode]["documents:recall@10"] = [float("nan")] * 3
    path.write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="not finite"):
        Migration.load(path, "MIGRATION")
    payload["learning"] = {migration.mode: {"pairs": [10.0, 20.0]}}  # no measure: no gain to say, no crash
    path.write_text(json.dumps(payload))
    assert Migration.load(path, "MIGRATION").learning_words() is None
    payload["learning"] = {"sideways": {}}
    path.write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="unknown mode 'sideways'"):
        Migration.load(path, "MIGRATION")


def test_a_learning_curves_measures_are_typed_records_and_the_certificate_table_names_each(fitted):
    _, migration = fitted
    curve = migration.learning[migration.mode]
    measures = curve_measures(curve)
    assert {m.key for m in measures} == set(curve) - {"share", "pairs", "sample_pairs"}
    assert CurveMeasure("documents", "recall@10") in measures and all(m.part == "documents" for m in measures)
    certificate = Certificate(migration.mode, "cosine", "cosine", 0.95, 600, 90, 60, {}, learning=curve)
    (learning,) = [t for t in certificate.tables() if t["title"].startswith("learning curve of the fit")]
    assert learning["columns"] == ["fit pairs", *[f"{m.part}: {m.name}" for m in measures]]
    with pytest.raises(ValueError, match=r"^learning: the learning curve's key 'recall@10' is not PART:MEASURE"):
        curve_measures({**curve, "recall@10": curve["pairs"]})


def test_labelled_queries_give_the_curve_in_their_units(corpus):
    from latentstitch.migrate import QuerySample

    plan = plan_sample(corpus.ids, corpus.old, 0.25, strategy="random", holdout=0.4, metric="cosine", seed=2)
    rows = np.searchsorted(corpus.ids, plan.fit_ids)
    queries = QuerySample(corpus.queries_new[rows], corpus.queries_old[rows], plan.fit_ids)
    migration = fit_migration(
        corpus.ids,
        corpus.old,
        plan.ids,
        corpus.new_of(plan.ids),
        holdout_ids=plan.holdout_ids,
        queries=queries,
        folds=3,
    )
    curve = migration.learning[migration.mode]
    assert curve["sample_pairs"] == 2 * len(plan.fit_ids)  # documents and their queries
    assert migration.learning_gain()[0] == CurveMeasure("queries", "recall@10")
    assert "labelled queries" in migration.learning_words() and "--queries-relevant" not in migration.learning_words()
