"""apply on a real Dask LocalCluster (two worker processes): the same bytes as in process, for a store written at
offsets (.npy) and one written by appending (FAISS); an interrupted cluster run resumes to the same bytes; a
partial run made in process is not resumed on a cluster (the chunks are laid out differently)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("distributed", reason="needs the dask extra: pip install 'latentstitch[dask]'")

from latentstitch.distributed import get_client
from latentstitch.migrate import apply_migration, open_store, work_folder

from .test_apply import Interrupting


@pytest.fixture(scope="module")
def client():
    active = get_client(workers=2)  # LocalCluster(n_workers=2, threads_per_worker=1, processes=True)
    yield active
    active.close()


def sources(corpus, tmp_path):
    np.save(tmp_path / "old.npy", corpus.old)
    yield tmp_path / "old.npy", "new.npy"
    if importlib.util.find_spec("faiss") is not None:
        import faiss

        index = faiss.IndexIDMap2(faiss.IndexFlatIP(corpus.old.shape[1]))
        index.add_with_ids(corpus.old, corpus.ids)
        faiss.write_index(index, str(tmp_path / "old.index"))
        yield tmp_path / "old.index", "new.index"


def test_apply_on_a_cluster_writes_the_bytes_of_the_in_process_apply(saved, corpus, tmp_path, client):
    plan, migration, path = saved
    for source, name in sources(corpus, tmp_path):
        ids = np.searchsorted(corpus.ids, plan.ids) if name == "new.npy" else plan.ids  # a .npy's ids: its rows
        sample = {"sample_ids": ids, "sample_new": corpus.new_of(plan.ids)}
        local = apply_migration(migration, path, open_store(source), tmp_path / ("in-" + name), chunk_rows=70, **sample)
        remote = apply_migration(
            migration, path, open_store(source), tmp_path / name, chunk_rows=70, client=client, **sample
        )
        assert remote.chunks == local.chunks == 9
        one, two = open_store(local.output).read(), open_store(remote.output).read()
        np.testing.assert_array_equal(one[0], two[0])
        assert one[1].dtype == two[1].dtype == np.float32
        assert one[1].tobytes() == two[1].tobytes()
        if name == "new.npy":
            assert (tmp_path / name).read_bytes() == (tmp_path / ("in-" + name)).read_bytes()


def test_an_interrupted_cluster_apply_resumes_to_the_same_bytes(saved, corpus, tmp_path, client):
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    local = apply_migration(migration, path, open_store(tmp_path / "old.npy"), tmp_path / "in.npy", chunk_rows=100)
    with pytest.raises(KeyboardInterrupt):
        apply_migration(
            migration,
            path,
            Interrupting(open_store(tmp_path / "old.npy"), 4),
            tmp_path / "new.npy",
            chunk_rows=100,
            client=client,
        )
    assert work_folder(tmp_path / "new.npy").is_dir() and not (tmp_path / "new.npy").exists()
    resumed = apply_migration(
        migration, path, open_store(tmp_path / "old.npy"), tmp_path / "new.npy", chunk_rows=100, client=client
    )
    assert 0 < resumed.resumed_chunks <= 4
    assert (tmp_path / "new.npy").read_bytes() == local.output.read_bytes()


def test_a_partial_in_process_apply_is_not_resumed_on_a_cluster(saved, corpus, tmp_path, client):
    _, migration, path = saved
    np.save(tmp_path / "old.npy", corpus.old)
    with pytest.raises(KeyboardInterrupt):
        apply_migration(
            migration, path, Interrupting(open_store(tmp_path / "old.npy"), 2), tmp_path / "new.npy", chunk_rows=100
        )
    with pytest.raises(ValueError, match=r"^output: the partial apply .* made with another cluster setting \(client\)"):
        apply_migration(
            migration, path, open_store(tmp_path / "old.npy"), tmp_path / "new.npy", chunk_rows=100, client=client
        )
