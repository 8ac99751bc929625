"""The files the migration head-to-head hands its peers (benchmarks/migration_peers.py): what the driver reads is
what the benchmark wrote, and a sample naming ids outside the index is refused, not silently used."""

import json

import numpy as np
import pytest

from benchmarks.migration_peers import read_job, scores, write_job


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
