"""Cascade search against real engines (small stores the tests build): the new model's exact answer whenever the
old store's candidates hold it, a write-back that writes each document once (twice the same search writes nothing;
threads searching at once lose and repeat no row), the old store untouched, and another index refused."""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from latentstitch.migrate import StoreError, open_store
from latentstitch.migrate._collection import open_collection
from latentstitch.migrate._retrieval import search as exact_search
from latentstitch.migrate.stores import fingerprint
from tests.migrate.test_stores import build_faiss, build_lancedb, build_qdrant, needs


def build_npy(path, ids, vectors):
    np.save(path, vectors)
    return path


#: (kind, old store's name, builder, new collection's name); a .npy store's ids are its row numbers.
STORES = [
    pytest.param(("npy", "old.npy", build_npy, "new.npy"), id="npy"),
    pytest.param(("faiss", "old.index", build_faiss, "new.index"), marks=needs("faiss"), id="faiss"),
    pytest.param(("lancedb", "old_lance", build_lancedb, "new_lance"), marks=needs("lancedb"), id="lancedb"),
    pytest.param(("qdrant", "old_qdrant", build_qdrant, "new_qdrant"), marks=needs("qdrant_client"), id="qdrant"),
]


class Setup:
    """An old store of the corpus, the migration recorded on it, and the new model's vectors by the store's ids."""

    def __init__(self, corpus, fitted, kind, name, build, tmp_path):
        self.corpus, self.kind = corpus, kind
        self.ids = np.arange(len(corpus.ids)) if kind == "npy" else corpus.ids
        self.path = build(tmp_path / name, self.ids, corpus.old)
        self.store = open_store(self.path)
        self.migration = copy.copy(fitted[1]).record_index(self.store)
        self.calls: list[np.ndarray] = []

    def new_vectors(self, ids):
        self.calls.append(np.asarray(ids))
        where = {int(v): row for row, v in enumerate(self.ids)}
        return self.corpus.new[[where[int(i)] for i in np.asarray(ids)]]

    def exact(self, queries, k):
        """The new model's own top-k over every document (a full re-embed), as ids."""
        return self.ids[exact_search(queries, self.corpus.new, k, "cosine")]

    def recalled(self, queries, depth):
        return self.store.search(self.migration.transform_queries(queries), depth).astype(np.int64)


def _setup(param, corpus, fitted, tmp_path):
    kind, name, build, new_name = param
    made = Setup(corpus, fitted, kind, name, build, tmp_path)
    made.new_path = tmp_path / new_name
    return made


@pytest.fixture(params=STORES)
def setup(request, corpus, fitted, tmp_path):
    made = _setup(request.param, corpus, fitted, tmp_path)
    yield made
    made.store.close()


@pytest.fixture(params=STORES[:3])  # Qdrant's local mode takes seconds a search: the write-back tests cover it
def quick_setup(request, corpus, fitted, tmp_path):
    made = _setup(request.param, corpus, fitted, tmp_path)
    yield made
    made.store.close()


@pytest.mark.integration
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    start=st.integers(0, 560),
    depth=st.sampled_from([30, 100, 600]),
    k=st.sampled_from([1, 5, 10]),
)
def test_cascade_returns_the_new_models_exact_top_k_whenever_the_candidates_hold_it(quick_setup, start, depth, k):
    setup = quick_setup
    queries = setup.corpus.queries_new[start : start + 40]
    result = setup.migration.search(
        queries, k, store=setup.store, new_store=setup.new_path, depth=depth, new_vectors=setup.new_vectors
    )
    exact = setup.exact(queries, k)
    recalled = setup.recalled(queries, depth)
    covered = np.array([set(e) <= set(r) for e, r in zip(exact, recalled, strict=True)])
    if depth >= setup.store.count:
        assert covered.all()  # the whole index recalled: the answer must be the full re-embed's for every query
    np.testing.assert_array_equal(result.ids.astype(np.int64)[covered], exact[covered])
    # the scores are the new model's cosine similarities of the returned documents, best first
    where = {int(v): row for row, v in enumerate(setup.ids)}
    rows = np.vectorize(where.__getitem__)(result.ids.astype(np.int64))
    np.testing.assert_allclose(
        result.scores, np.einsum("np,nkp->nk", queries, setup.corpus.new[rows]), rtol=1e-4, atol=1e-5
    )
    assert (np.diff(result.scores, axis=1) <= 1e-6).all()


@pytest.mark.integration
def test_write_back_is_idempotent_and_the_old_store_is_never_written(setup):
    before = fingerprint(setup.path)
    queries = setup.corpus.queries_new[:30]
    first = setup.migration.search(
        queries, 10, store=setup.store, new_store=setup.new_path, depth=50, new_vectors=setup.new_vectors
    )
    assert first.embedded == first.written == first.candidates > 0 and first.reused == 0
    collection = open_collection(setup.new_path, setup.store, setup.migration.new_dimension, "cosine")
    assert collection.count_present() == first.candidates
    calls = len(setup.calls)
    again = setup.migration.search(
        queries, 10, store=setup.store, new_store=setup.new_path, depth=50, new_vectors=setup.new_vectors
    )
    assert again.written == again.embedded == 0 and again.reused == again.candidates
    assert len(setup.calls) == calls  # nothing computed twice
    assert collection.count_present() == first.candidates
    # what the collection holds is the new model's vector of each id
    ids = np.unique(setup.recalled(queries, 50))
    found, vectors = collection.lookup(ids)
    assert found.all()
    np.testing.assert_allclose(vectors, setup.new_vectors(ids), atol=1e-6)
    # the second search also searched the collection itself (every document the first one recalled for any query):
    # its answer is the new model's exact top 10 over those, never worse than the first's
    where = np.searchsorted(setup.ids, ids) if setup.kind != "npy" else ids
    within = ids[exact_search(queries, setup.corpus.new[where], 10, "cosine")]
    np.testing.assert_array_equal(again.ids.astype(np.int64), within)
    assert (again.scores >= first.scores - 1e-6).all()
    assert collection.usage() == {
        "searches": 2,
        "queries": 60,
        "candidates": 2 * len(ids),
        "reused": len(ids),
        "embedded": len(ids),
        "from_collection": 0,  # the collection held only what the old store recalled for these queries
    }
    setup.store.close()
    assert fingerprint(setup.path) == before  # opened, searched twice, closed: not a byte of the old store changed


@pytest.mark.integration
def test_concurrent_searches_adding_the_same_documents_lose_and_repeat_none(setup):
    queries = setup.corpus.queries_new[:40]
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def run(part):
        try:
            barrier.wait()
            setup.migration.search(
                queries[part::2],
                5,
                store=setup.store,
                new_store=setup.new_path,
                depth=40,
                new_vectors=setup.new_vectors,
            )
        except BaseException as error:  # reported below, in the test thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(n % 2,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    wanted = np.unique(setup.recalled(queries, 40))
    collection = open_collection(setup.new_path, setup.store, setup.migration.new_dimension, "cosine")
    assert collection.count_present() == len(wanted)  # every candidate once: none lost, none twice
    found, vectors = collection.lookup(wanted)
    assert found.all()
    np.testing.assert_allclose(vectors, setup.new_vectors(wanted), atol=1e-6)


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["npy", pytest.param("faiss", marks=needs("faiss"))])
def test_apply_and_search_refuse_an_index_other_than_the_one_fitted(kind, corpus, fitted, tmp_path):
    from latentstitch.migrate import apply_migration

    build = {"npy": build_npy, "faiss": build_faiss}[kind]
    suffix = ".npy" if kind == "npy" else ".index"
    fitted_on = open_store(build(tmp_path / f"fitted{suffix}", corpus.ids, corpus.old))
    migration = copy.copy(fitted[1]).record_index(fitted_on)
    changed = corpus.old.copy()
    changed[[3, 4]] = changed[[4, 3]]  # the same vectors, two rows swapped: same size, another index
    other = open_store(build(tmp_path / f"other{suffix}", corpus.ids, changed))
    with pytest.raises(StoreError, match=r"other.* is not the index this migration was fitted on"):
        migration.search(corpus.queries_new[:3], store=other, new_store=tmp_path / f"new{suffix}", depth=20)
    saved = copy.copy(migration)
    saved.mode = "corpus"
    path = saved.save(tmp_path / "migration.json")
    with pytest.raises(StoreError, match=r"other.* is not the index this migration was fitted on"):
        apply_migration(saved, path, other, tmp_path / f"out{suffix}")
    # the index it was fitted on is accepted, also after the migration's file is read back
    from latentstitch.migrate import Migration

    loaded = Migration.load(path)
    assert loaded.index == migration.index
    loaded.mode = "query"
    result = loaded.search(
        corpus.queries_new[:3],
        3,
        store=fitted_on,
        new_store=tmp_path / f"new{suffix}",
        depth=20,
        new_vectors=lambda ids: corpus.new[np.asarray(ids) if kind == "npy" else (np.asarray(ids) - 3) // 7],
    )
    assert result.ids.shape == (3, 3)


def test_missing_new_vectors_is_refused_by_name(corpus, fitted, tmp_path):
    store = open_store(build_npy(tmp_path / "old.npy", None, corpus.old))
    with pytest.raises(ValueError, match=r"^new_vectors: \d+ candidates have no new vector"):
        fitted[1].search(corpus.queries_new[:2], store=store, new_store=tmp_path / "new.npy", depth=10)
    with pytest.raises(ValueError, match=r"^new_vectors: expected \(\d+, 12\) vectors"):
        fitted[1].search(
            corpus.queries_new[:2],
            store=store,
            new_store=tmp_path / "new.npy",
            depth=10,
            new_vectors=lambda ids: np.zeros((len(ids), 5), np.float32),
        )
    with pytest.raises(ValueError, match=r"^depth: expected at least k \(10\)"):
        fitted[1].search(corpus.queries_new[:2], 10, store=store, new_store=tmp_path / "new.npy", depth=5)


def _store_of(param, ids_kind, old, tmp_path, fitted):
    """An old store of the kind ``param`` holding ``old`` vectors, and the migration recorded on it."""
    kind, name, build, new_name = param
    ids = ids_kind(kind)
    store = open_store(build(tmp_path / name, ids, old))
    return store, copy.copy(fitted[1]).record_index(store), tmp_path / new_name, ids


@pytest.mark.integration
@pytest.mark.parametrize("param", STORES)
def test_a_document_the_bridge_cannot_recall_is_found_in_the_new_collection(param, corpus, fitted, tmp_path):
    queries = corpus.queries_new[:6]
    truth = exact_search(queries, corpus.new, 5, "cosine")  # the new model's own top 5 (rows)
    target = truth[0, 0]
    old = corpus.old.copy()
    # the old index puts the document where no bridged query of these looks: opposite to their mean direction
    bridged = np.asarray(fitted[1].transform_queries(queries))
    old[target] = -bridged.mean(axis=0) / np.linalg.norm(bridged.mean(axis=0))
    store, migration, new_path, ids = _store_of(
        param, lambda kind: np.arange(len(corpus.ids)) if kind == "npy" else corpus.ids, old, tmp_path, fitted
    )
    recalled = store.search(migration.transform_queries(queries), 40).astype(np.int64)
    assert ids[target] not in recalled  # the old store's candidates cannot hold it
    collection = open_collection(new_path, store, migration.new_dimension, "cosine")
    collection.add_missing(ids[[target]], corpus.new[[target]])  # re-embedded up front (the plan's sample)

    def search(**options):
        new_vectors = lambda wanted: corpus.new[np.searchsorted(ids, np.asarray(wanted).astype(np.int64))]  # noqa: E731
        return migration.search(
            queries, 5, store=store, new_store=collection, depth=40, new_vectors=new_vectors, **options
        )

    result = search()
    assert result.ids[0, 0] == ids[target]  # the new model's best answer, which the bridge alone loses
    assert result.from_collection == 1
    alone = search(collection_search=False)  # the old store's answers alone: the cheaper search loses it again
    assert ids[target] not in alone.ids and alone.from_collection == 0
    with pytest.raises(ValueError, match="collection_search: expected True, False or one of 'auto', 'exact'"):
        migration.search(queries, 5, store=store, new_store=collection, collection_search="no")
    store.close()


@pytest.mark.integration
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from([0, 1]),
    noise=st.integers(0, 2**16),
    depth=st.sampled_from([10, 50]),
    k=st.sampled_from([1, 10]),
)
def test_a_complete_collection_answers_the_new_models_exact_top_k_whatever_the_bridge(
    corpus, fitted, tmp_path_factory, kind, noise, depth, k
):
    """The cut-over: once the collection holds every id its own search is the new model's exact search, so the
    answer does not depend on the old index or the bridge (here an old index of noise: the bridge recalls nothing
    of use)."""
    param = STORES[kind].values[0]
    if kind:
        pytest.importorskip("faiss")
    old = np.random.default_rng(noise).normal(size=corpus.old.shape).astype(np.float32)
    store, migration, new_path, ids = _store_of(
        param,
        lambda kind: np.arange(len(corpus.ids)) if kind == "npy" else corpus.ids,
        old,
        tmp_path_factory.mktemp("complete"),
        fitted,
    )
    collection = open_collection(new_path, store, migration.new_dimension, "cosine")
    collection.add_missing(ids, corpus.new)
    queries = corpus.queries_new[noise % 500 : noise % 500 + 30]
    result = migration.search(queries, k, store=store, new_store=collection, depth=depth)  # nothing to compute
    np.testing.assert_array_equal(result.ids.astype(np.int64), ids[exact_search(queries, corpus.new, k, "cosine")])
    assert result.embedded == 0
    store.close()


@pytest.mark.parametrize("metric", ["ip", "cosine", "l2"])
def test_the_collections_search_over_stored_rows_ranks_as_the_exact_search(metric):
    """The cascade searches the collection's rows as stored with their norms kept (no normalised copy): the same
    top-k and scores as the exact search over the prepared rows."""
    import torch

    from latentstitch.migrate._retrieval import prepare, scored_top_k, top_k

    rng = np.random.default_rng(3)
    rows = (rng.normal(size=(300, 7)) * rng.uniform(0.1, 5.0, size=(300, 1))).astype(np.float32)
    queries = rng.normal(size=(9, 7)).astype(np.float32)
    stored = torch.as_tensor(rows)
    values, positions = scored_top_k(
        prepare(queries, metric), stored, torch.linalg.vector_norm(stored, dim=1), 12, metric
    )
    expected_values, expected = top_k(queries, rows, 12, metric)
    np.testing.assert_array_equal(positions, expected)
    np.testing.assert_allclose(values, expected_values, rtol=1e-5, atol=1e-5)
