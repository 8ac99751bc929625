"""The checks at the door of the migration API (issue 42, kinds 2-7): ids, vectors, shares, thresholds, held-out
ids and migration files, each refused with an error naming the argument (or warned about where the result is only
partly affected), never accepted silently."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings

import numpy as np
import pytest

from latentstitch.bridge import Bridge, BridgeWarning
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
from latentstitch.migrate._migration import DECIDING, CurveMeasure, _header_sha256, file_sha256

# --- kind 2: ids ------------------------------------------------------------------------------------------------


def test_ids_and_vectors_of_different_lengths_are_refused(corpus):
    with pytest.raises(ValueError, match=r"ids: expected one id per row of vectors \(600\), got 599"):
        plan_sample(corpus.ids[:-1], corpus.old, 0.1)
    with pytest.raises(ValueError, match=r"index_ids: expected one id per row of index_vectors \(600\), got 599"):
        fit_migration(corpus.ids[:-1], corpus.old, corpus.ids[:30], corpus.new[:30])


@pytest.mark.parametrize(
    ("ids", "error", "message"),
    [
        ("repeat", ValueError, r"ids: 1 ids appear more than once \(3\)"),
        ("none", ValueError, "ids: row 5 is None; every item needs an id"),
        ("int and str", TypeError, "ids: mixes integer and string ids"),
        ("float", TypeError, "ids: expected integer or string ids, got 0.5"),
        ("empty string", ValueError, "ids: row 2 is an empty string"),
    ],
)
def test_bad_ids_are_refused_at_plan(corpus, ids, error, message):
    values = corpus.ids.astype(object)
    if ids == "repeat":
        values[1] = values[0]
    elif ids == "none":
        values[5] = None
    elif ids == "int and str":
        values[3] = str(values[4])  # 31 and "31": one id once written to plan.csv
    elif ids == "float":
        values[7] = 0.5
    else:
        values = values.astype(str).astype(object)
        values[2] = ""
    with pytest.raises(error, match=message):
        plan_sample(list(values), corpus.old, 0.1)


def test_an_id_repeated_as_int_and_text_is_refused_at_fit(corpus):
    sample = list(corpus.ids[:30].astype(object))
    sample[1] = str(sample[0])
    with pytest.raises(TypeError, match="sample_ids: mixes integer and string ids"):
        fit_migration(corpus.ids, corpus.old, sample, corpus.new[:30])


def test_ids_with_commas_and_quotes_survive_the_plan_csv(corpus, tmp_path):
    ids = np.array([f'doc,{i} "q"' if i % 3 == 0 else f"doc-{i}" for i in range(len(corpus.ids))])
    plan = plan_sample(ids, corpus.old, 60, strategy="random", holdout=0.5, seed=0)
    fit, held = load_plan(save_plan(plan, tmp_path / "plan.csv"))
    assert fit.tolist() == plan.fit_ids.tolist()
    assert held.tolist() == plan.holdout_ids.tolist()
    assert any("," in i for i in fit.tolist() + held.tolist())


def test_a_plan_csv_with_a_repeated_id_is_refused(tmp_path):
    (tmp_path / "plan.csv").write_text("id,role\na,fit\nb,fit\na,certify\n")
    with pytest.raises(ValueError, match="plan .*'s ids\\): 1 ids appear more than once"):
        load_plan(tmp_path / "plan.csv", name="plan")


# --- kind 3: thresholds and level -------------------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [float("nan"), 5.0, -3.0, "0.5"])
def test_thresholds_outside_the_cosine_range_are_refused(corpus, fitted, threshold):
    plan, migration = fitted
    error = TypeError if isinstance(threshold, str) else ValueError
    with pytest.raises(error, match=r"^thresholds\[1\]: expected a (finite )?number.* \(cosine scores\)$"):
        certify_migration(
            migration, corpus.ids, corpus.old, plan.ids, corpus.new_of(plan.ids), plan.holdout_ids,
            thresholds=[0.5, threshold],
        )  # fmt: skip


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1, float("nan")])
def test_levels_outside_zero_one_are_refused(corpus, fitted, level):
    plan, migration = fitted
    with pytest.raises(ValueError, match=r"level: expected a finite number in \(0, 1\)"):
        certify_migration(
            migration, corpus.ids, corpus.old, plan.ids, corpus.new_of(plan.ids), plan.holdout_ids, level=level
        )


# --- kind 4: held-out integrity ---------------------------------------------------------------------------------


def test_held_out_ids_outside_the_sample_are_refused_or_warned(corpus, fitted):
    plan, _ = fitted
    sample = plan.fit_ids
    elsewhere = np.setdiff1d(corpus.ids, plan.ids)[:20]
    with pytest.raises(ValueError, match="holdout_ids: none of the 20 held-out ids is in sample_ids"):
        fit_migration(corpus.ids, corpus.old, sample, corpus.new_of(sample), holdout_ids=elsewhere, folds=3)
    half = np.concatenate([elsewhere[:5], sample[:10]])
    with pytest.warns(MigrationWarning, match="holdout_ids: 5 of 15 held-out ids are not in sample_ids"):
        migration = fit_migration(corpus.ids, corpus.old, sample, corpus.new_of(sample), holdout_ids=half, folds=3)
    assert migration.n_sample == len(sample) - 10
    assert sorted(migration.holdout_ids) == sorted(map(str, sample[:10]))


def test_certifying_on_documents_the_migration_was_fitted_on_is_refused(corpus, fitted, tmp_path):
    plan, fitted_migration = fitted
    new = corpus.new_of(plan.ids)
    on_everything = fit_migration(corpus.ids, corpus.old, plan.ids, new, folds=3)
    loaded = Migration.load(on_everything.save(tmp_path / "m.json"))
    for migration in (on_everything, loaded):
        with pytest.raises(ValueError, match="holdout_ids: the migration was fitted on all 60 of them"):
            certify_migration(migration, corpus.ids, corpus.old, plan.ids, new, plan.holdout_ids)
    # some of the held-out ids were fitted on: they are left out, with a warning
    extra = plan.fit_ids[:5]
    with pytest.warns(MigrationWarning, match="the migration was fitted on 5 of the 65"):
        certificate = certify_migration(
            fitted_migration, corpus.ids, corpus.old, plan.ids, new, np.concatenate([plan.holdout_ids, extra])
        )
    assert certificate.n_holdout == len(plan.holdout_ids)


def test_relevant_ids_outside_the_index_are_refused_or_warned(corpus, fitted):
    plan, migration = fitted
    rows = np.searchsorted(corpus.ids, plan.holdout_ids)
    new, old = corpus.queries_new[rows], corpus.queries_old[rows]
    outside = np.arange(len(rows)) + 10**9
    args = (migration, corpus.ids, corpus.old, plan.ids, corpus.new_of(plan.ids), plan.holdout_ids)
    with pytest.raises(ValueError, match="queries_relevant: none of the 60 relevant ids is in the index"):
        certify_migration(*args, queries=QuerySample(new, old, outside))
    relevant = plan.holdout_ids.copy()
    relevant[:4] = outside[:4]
    with pytest.warns(MigrationWarning, match="queries_relevant: 4 of 60 relevant ids are not in the index"):
        certificate = certify_migration(*args, queries=QuerySample(new, old, relevant))
    assert certificate.measures["queries"]["n"] == 56


# --- kind 5: degenerate data ------------------------------------------------------------------------------------


def test_identical_re_embedded_vectors_are_refused(corpus):
    same = np.repeat(corpus.new[:1], 40, axis=0)
    with pytest.raises(ValueError, match="sample_new: all 40 vectors are the same vector"):
        fit_migration(corpus.ids, corpus.old, corpus.ids[:40], same)


def test_pairs_shuffled_against_their_ids_are_warned(corpus, fitted):
    plan, _ = fitted
    new = corpus.new_of(plan.ids)[np.random.default_rng(0).permutation(len(plan.ids))]
    with pytest.warns(BridgeWarning, match="No route is clearly better than shuffled pairs"):
        fit_migration(corpus.ids, corpus.old, plan.ids, new, holdout_ids=plan.holdout_ids, folds=3)


def test_zero_vectors_under_cosine_are_refused(corpus):
    old = corpus.old.copy()
    old[7] = 0
    with pytest.raises(ValueError, match="vectors: row 7 is a zero vector .* cosine"):
        plan_sample(corpus.ids, old, 0.1)
    plan_sample(corpus.ids, old, 0.1, metric="ip")  # a zero vector has a place under the inner product
    new = corpus.new[:40].copy()
    new[3] = 0
    with pytest.raises(ValueError, match="sample_new: row 3 is a zero vector"):
        fit_migration(corpus.ids, corpus.old, corpus.ids[:40], new)


def test_nan_in_a_re_embedded_vector_is_refused_at_certify_and_apply(corpus, fitted, tmp_path):
    from latentstitch.migrate import apply_migration, open_store

    plan, migration = fitted
    new = corpus.new_of(plan.ids).copy()
    new[4, 2] = np.nan
    with pytest.raises(ValueError, match=r"sample_new: contains NaN or inf \(first at row 4\)"):
        certify_migration(migration, corpus.ids, corpus.old, plan.ids, new, plan.holdout_ids)
    np.save(tmp_path / "index.npy", corpus.old)
    corpus_side = Migration(**{**vars(migration), "mode": "corpus"})
    path = tmp_path / "m.json"
    store = open_store(tmp_path / "index.npy", metric="cosine")
    with pytest.raises(ValueError, match=r"sample_new: contains NaN or inf \(first at row 4\)"):
        apply_migration(corpus_side, path, store, tmp_path / "out.npy", sample_ids=np.arange(len(new)), sample_new=new)
    assert not (tmp_path / "out.npy").exists()


# --- kind 6: unhelpful errors -----------------------------------------------------------------------------------


def test_plain_lists_are_read_like_arrays(corpus):
    from_lists = plan_sample(corpus.ids.tolist(), corpus.old.tolist(), 0.1, seed=3)
    from_arrays = plan_sample(corpus.ids, corpus.old, 0.1, seed=3)
    assert from_lists.fit_ids.tolist() == from_arrays.fit_ids.tolist()
    assert from_lists.holdout_ids.tolist() == from_arrays.holdout_ids.tolist()


def test_a_holdout_that_leaves_nothing_to_fit_is_named(corpus):
    with pytest.raises(ValueError, match="holdout: a share of 0.9 of the 3 items to re-embed leaves 0 to fit"):
        plan_sample(corpus.ids, corpus.old, 3, holdout=0.9)
    with pytest.raises(ValueError, match=r"holdout: expected a finite number in \[0, 1\)"):
        plan_sample(corpus.ids, corpus.old, 0.1, holdout=float("nan"))


def test_three_d_and_empty_inputs_are_named(corpus):
    with pytest.raises(ValueError, match="vectors: expected a 2-D array, got shape"):
        plan_sample(corpus.ids, corpus.old[:, :, None], 0.1)
    with pytest.raises(ValueError, match="sample_new: expected at least 2 rows"):
        fit_migration(corpus.ids, corpus.old, [], np.empty((0, 12), np.float32))
    with pytest.raises(ValueError, match="index_vectors: expected a 2-D array"):
        fit_migration(corpus.ids, corpus.old[:, :, None], corpus.ids[:30], corpus.new[:30])


def test_a_relative_route_is_refused_by_name(corpus):
    with pytest.raises(ValueError, match="routes: relative is not a translation route"):
        fit_migration(corpus.ids, corpus.old, corpus.ids[:60], corpus.new[:60], routes=["ridge_raw", "relative"])


# --- kind 7: tampered migration files ---------------------------------------------------------------------------


def _rewrite(path, edit, rehash=True):
    payload = json.loads(path.read_text())
    edit(payload)
    for entry in payload["bridges"].values():
        entry["sha256"] = file_sha256(path.with_name(entry["file"])) if rehash else entry["sha256"]
    if rehash:
        payload["header_sha256"] = _header_sha256(payload, payload.get("header_fields", DECIDING))
    path.write_text(json.dumps(payload))


@pytest.fixture
def saved(fitted, tmp_path):
    (tmp_path / "folder").mkdir()
    return fitted[1].save(tmp_path / "folder" / "migration.json")


@pytest.mark.parametrize(
    ("field", "value"), [("metric", "ip"), ("mode", "other"), ("old_dimension", 12), ("new_dimension", 11)]
)
def test_an_edited_header_is_refused(saved, field, value):
    _rewrite(saved, lambda p: p.update({field: value}), rehash=False)
    with pytest.raises(ValueError, match="were edited since it was written"):
        Migration.load(saved)


INDEX = {"count": 60, "sha256": "ab" * 32, "kind": "npy"}


def test_the_record_of_the_index_is_sealed_with_the_header(fitted, tmp_path):
    migration = dataclasses.replace(fitted[1], index=dict(INDEX))
    (tmp_path / "folder").mkdir()
    saved = migration.save(tmp_path / "folder" / "migration.json")
    assert Migration.load(saved).index == INDEX
    original = saved.read_text()
    for edit in (
        lambda p: p["index"].update(count=61),  # apply would then accept another index
        lambda p: p["index"].update(sha256="cd" * 32),
        lambda p: p.pop("index"),  # the record dropped: apply would check the width only
        lambda p: p["header_fields"].remove("index"),
    ):
        saved.write_text(original)
        _rewrite(saved, edit, rehash=False)
        with pytest.raises(ValueError, match="the record of its index were edited since it was written"):
            Migration.load(saved)
    # a file of the previous version (its sha256 over the deciding fields only, no list of them) still loads
    saved.write_text(original)
    _rewrite(saved, lambda p: p.pop("header_fields"))
    assert Migration.load(saved).index == INDEX


def test_edits_with_every_hash_updated_are_refused(saved, fitted):
    original = saved.read_text()
    other = "query" if fitted[1].mode == "corpus" else "corpus"
    _rewrite(saved, lambda p: p.update({"mode": other}))
    with pytest.raises(ValueError, match=f"its mode '{other}' is not the one its cross-validation chose"):
        Migration.load(saved)
    saved.write_text(original)
    _rewrite(saved, lambda p: p.update({"old_dimension": 17}))
    with pytest.raises(ValueError, match="bridge maps .* features; the header's dimensions"):
        Migration.load(saved)


def test_swapped_or_foreign_bridge_files_are_refused(saved):
    def swap(payload):
        first, second = payload["bridges"]["query"], payload["bridges"]["corpus"]
        first["file"], second["file"] = second["file"], first["file"]

    original = saved.read_text()
    _rewrite(saved, swap)
    with pytest.raises(ValueError, match="bridge files swapped, or from another migration"):
        Migration.load(saved)
    saved.write_text(original)
    rng = np.random.default_rng(0)
    source = rng.normal(size=(60, 16)).astype(np.float32)
    foreign = Bridge(routes=["ridge_raw"], cv=3).fit(source, source[:, :12] + 0.1 * rng.normal(size=(60, 12)))
    foreign.save(saved.with_name("foreign.safetensors"))
    _rewrite(saved, lambda p: p["bridges"]["query"].update({"file": "foreign.safetensors"}))
    with pytest.raises(ValueError, match="query-side bridge maps 16 to 12 features"):
        Migration.load(saved)


@pytest.mark.parametrize("where", ["../outside.safetensors", "/etc/passwd", "link"])
def test_bridge_files_outside_the_migration_folder_are_refused(saved, where):
    if where == "link":
        target = saved.parent.parent / "outside.safetensors"
        target.write_bytes(saved.with_name("migration.corpus.safetensors").read_bytes())
        os.symlink(target, saved.with_name("link"))
    else:
        (saved.parent.parent / "outside.safetensors").write_bytes(b"")
    _rewrite(saved, lambda p: p["bridges"]["corpus"].update({"file": where}), rehash=False)
    with pytest.raises(ValueError, match=f"the entry '{where}' leads outside the folder"):
        Migration.load(saved)


# --- while there: the learning curve's keys ---------------------------------------------------------------------


def test_learning_curve_keys_are_typed_records(saved, fitted):
    migration = fitted[1]
    for key in migration.learning[migration.mode]:
        if key not in ("share", "pairs", "sample_pairs"):
            assert CurveMeasure.parse(key).key == key
    assert CurveMeasure.parse("queries:recall@10") == CurveMeasure("queries", "recall@10")
    payload = json.loads(saved.read_text())
    payload["learning"][migration.mode]["documents-recall@10"] = payload["learning"][migration.mode]["pairs"]
    saved.write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="the learning curve's key 'documents-recall@10' is not PART:MEASURE"):
        Migration.load(saved)


def test_a_saved_migration_loads_back_whole(saved, fitted):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = Migration.load(saved)
    assert loaded.holdout_ids == fitted[1].holdout_ids
    assert loaded.mode == fitted[1].mode and loaded.learning == fitted[1].learning
