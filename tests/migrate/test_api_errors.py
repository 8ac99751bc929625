"""The Python API's bad inputs are the library's own errors naming the argument and what was expected (never a
numpy, scikit-learn or statistics error from deep inside, never accepted and wrong): plain lists work, 3-D input, an
empty sample, a hold-out that leaves nothing to fit, a confidence level outside (0, 1), a chunk size that is not a
positive integer."""

from __future__ import annotations

import numpy as np
import pytest

from latentstitch.migrate import apply_migration, certify_migration, fit_migration, open_store, plan_sample


def test_plain_lists_are_read_like_arrays(corpus):
    ids, old = corpus.ids[:200], corpus.old[:200]
    from_lists = plan_sample(ids.tolist(), old.tolist(), 20, strategy="random", seed=3)
    from_arrays = plan_sample(ids, old, 20, strategy="random", seed=3)
    np.testing.assert_array_equal(from_lists.ids, from_arrays.ids)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda c: {"vectors": c.old[:, :, None]}, ValueError, r"vectors: expected a 2-D array, got shape"),
        (lambda c: {"ids": c.ids[:0], "vectors": c.old[:0]}, ValueError, r"vectors: expected at least 2 rows"),
        (lambda c: {"ids": c.ids[:150]}, ValueError, r"ids: expected one id per row of vectors \(600\), got 150"),
        (
            lambda c: {"budget": 3, "holdout": 0.9},
            ValueError,
            r"holdout: a share of 0.9 of the 3 items .* leaves 0 to fit",
        ),
        (lambda c: {"holdout": "0.3"}, TypeError, r"holdout: expected a number"),
    ],
)
def test_plan_sample_names_the_bad_argument(corpus, change, error, message):
    arguments = {"ids": corpus.ids, "vectors": corpus.old, "budget": 20, **change(corpus)}
    with pytest.raises(error, match=message):
        plan_sample(arguments.pop("ids"), arguments.pop("vectors"), arguments.pop("budget"), **arguments)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c, p: {"index_vectors": c.old[:, :, None]}, r"index_vectors: expected a 2-D array"),
        (
            lambda c, p: {"sample_ids": p.ids[:0], "sample_new": c.new_of(p.ids)[:0]},
            r"sample_new: expected at least 2 rows",
        ),
        (lambda c, p: {"index_ids": c.ids[:10]}, r"index_ids: expected one id per row of index_vectors"),
        (
            lambda c, p: {"holdout_ids": p.ids},
            r"holdout_ids: they leave 0 of the \d+ re-embedded items to fit on; expected at least 2",
        ),
    ],
)
def test_fit_migration_names_the_bad_argument(corpus, fitted, change, message):
    plan, _ = fitted
    arguments = {
        "index_ids": corpus.ids,
        "index_vectors": corpus.old,
        "sample_ids": plan.ids,
        "sample_new": corpus.new_of(plan.ids),
        **change(corpus, plan),
    }
    with pytest.raises(ValueError, match=message):
        fit_migration(**arguments, folds=3)


@pytest.mark.parametrize("level", [1.5, 0, 1, float("nan")])
def test_certify_names_a_level_outside_zero_one(corpus, fitted, level):
    plan, migration = fitted
    with pytest.raises(ValueError, match=r"level: expected a finite number in \(0, 1\)"):
        certify_migration(
            migration, corpus.ids, corpus.old, plan.ids, corpus.new_of(plan.ids), plan.holdout_ids, level=level
        )


@pytest.mark.parametrize(
    ("chunk_rows", "error", "message"),
    [
        (2.5, TypeError, r"chunk_rows: expected an integer, got 2.5"),
        (True, TypeError, r"chunk_rows: expected an integer, got True"),
        (-5, ValueError, r"chunk_rows: expected an integer >= 1, got -5"),
        (0, ValueError, r"chunk_rows: expected an integer >= 1, got 0"),
    ],
)
def test_apply_names_a_chunk_size_that_is_not_a_positive_integer(corpus, saved, tmp_path, chunk_rows, error, message):
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    with pytest.raises(error, match=message):
        apply_migration(migration, path, open_store(tmp_path / "old.npy"), tmp_path / "new.npy", chunk_rows=chunk_rows)
    assert not (tmp_path / "new.npy").exists()


def test_apply_warns_when_re_embedded_ids_are_not_in_the_store(corpus, saved, tmp_path):
    """Re-embedded items whose ids the store does not hold go nowhere: apply says which, and writes the rest."""
    from latentstitch.migrate import MigrationWarning

    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, migration, path = saved
    old = np.ascontiguousarray(corpus.old, dtype=np.float32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(old.reshape(-1)), old.shape[1])
    pq.write_table(pa.table({"id": np.arange(len(old)), "embeddings": column}), tmp_path / "old.parquet")
    given = [5, 10**9, 10**9 + 1]  # a store with ids of its own: two of these it does not hold
    with pytest.warns(MigrationWarning, match=r"sample_ids: 2 of the 3 re-embedded ids are not in the store"):
        apply_migration(
            migration,
            path,
            open_store(tmp_path / "old.parquet"),
            tmp_path / "new.parquet",
            sample_ids=given,
            sample_new=corpus.new[:3],
        )
    written = open_store(tmp_path / "new.parquet")
    ids, vectors = written.read()
    row = int(np.flatnonzero(np.asarray(ids).astype(np.int64) == 5)[0])
    np.testing.assert_allclose(vectors[row], corpus.new[0], atol=1e-6)  # the one it holds: its true new vector


def test_apply_refuses_sample_ids_that_are_no_row_of_a_store_without_ids(corpus, saved, tmp_path):
    """A .npy store's ids are its row numbers: an id that is none of them is a mistake, refused before any write."""
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    with pytest.raises(ValueError, match=r"sample_ids: the store .* has no ids of its own"):
        apply_migration(
            migration,
            path,
            open_store(tmp_path / "old.npy"),
            tmp_path / "new.npy",
            sample_ids=[5, 10**9, 10**9 + 1],
            sample_new=corpus.new[:3],
        )
    assert not (tmp_path / "new.npy").exists()


def test_a_chroma_output_name_chroma_refuses_is_refused_before_anything_is_written(corpus, saved, tmp_path):
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    with pytest.raises(ValueError, match=r"output: 'my docs' is not a Chroma collection name"):
        apply_migration(migration, path, open_store(tmp_path / "old.npy"), tmp_path / "my docs", kind="chroma")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "migration.corpus.safetensors",
        "migration.json",
        "migration.query.safetensors",
        "old.npy",
    ]
