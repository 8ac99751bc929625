"""The files the migration head-to-head hands its peers (benchmarks/migration_peers.py): what the driver reads is
what the benchmark wrote, and a sample naming ids outside the index is refused, not silently used."""

import json

import numpy as np
import pytest

from benchmarks.migration import best_arrangement
from benchmarks.migration_peers import decision_counts, read_job, scores, write_job


def test_job_files_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    old, new, queries = rng.standard_normal((30, 4)), rng.standard_normal((30, 6)), rng.standard_normal((7, 6))
    sample = np.array([3, 17, 29, 0])
    job = read_job(write_job(tmp_path / "job", old, new, queries, sample, seed=5))
    assert job["sample"].tolist() == [3, 17, 29, 0] and job["seed"] == 5
    np.testing.assert_array_equal(job["old_documents"], old.astype(np.float32))
    np.testing.assert_array_equal(job["new_queries"], queries.astype(np.float32))
    assert job["new_documents"].dtype == np.float32 and job["new_documents"].shape == (30, 6)


def test_job_refuses_ids_outside_the_index(tmp_path):
    folder = write_job(tmp_path / "job", np.ones((5, 2)), np.ones((5, 3)), np.ones((2, 3)), [0, 4], seed=0)
    payload = json.loads((folder / "sample.json").read_text())
    payload["sample"] = [0, 5]
    (folder / "sample.json").write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="outside the index"):
        read_job(folder)


def test_scores_recall_and_overlap():
    reference = np.tile(np.arange(10), (2, 1))
    top = np.array([[0, *range(20, 29)], list(range(10, 20))])  # 1 of 10 shared; none shared
    got = scores(top, np.array([0, 5]), reference)
    assert got == {"recall": 0.5, "overlap": 0.05}


def test_best_realised_arrangement_follows_the_decision_s_small_index_rule():
    # a migration keeping 97% of a full re-embed and beating the old model: migrate on a large index; on a small
    # one (the library's small_index) re-embedding costs less than the 0.03 it loses
    assert best_arrangement(0.5, 0.97, 1.0, n_index=50_000, small_index=10_000) == "migrate"
    assert best_arrangement(0.5, 0.97, 1.0, n_index=5_000, small_index=10_000) == "re-embed everything"
    assert best_arrangement(0.5, 0.995, 1.0, n_index=5_000, small_index=10_000) == "migrate"
    assert best_arrangement(0.995, 0.9, 1.0, n_index=5_000, small_index=10_000) == "keep the old model"


def test_decision_counts_count_matches_and_coverage():
    def record(matches, migration, nothing):
        return {
            "signal": "no query log",
            "measure": "overlap@10",
            "matches": matches,
            "covered": {"migration": migration, "doing nothing": nothing},
        }

    said = decision_counts([record(True, False, True), record(False, True, True), record(True, True, False)])
    assert "best realised arrangement in 2/3 runs" in said
    assert "2/3 (migration, the bridge it measured) and 2/3 (doing nothing)" in said
    assert "labelled" not in said  # a signal without runs is not reported
