"""A small synthetic corpus shared by the migration tests: an old and a new model's vectors of the same documents
(the new one a noisy linear image of a shared latent, so a bridge can be fitted), and queries of each document."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import pytest


@dataclass
class Corpus:
    ids: np.ndarray
    old: np.ndarray
    new: np.ndarray
    queries_old: np.ndarray
    queries_new: np.ndarray

    def new_of(self, ids) -> np.ndarray:
        where = {int(v): i for i, v in enumerate(self.ids)}
        return self.new[[where[int(i)] for i in ids]]


def make_corpus(n: int = 600, seed: int = 0, old_width: int = 16, new_width: int = 12) -> Corpus:
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 8))
    query_latent = latent + 0.3 * rng.normal(size=latent.shape)
    to_old, to_new = rng.normal(size=(8, old_width)), rng.normal(size=(8, new_width))

    def unit(x):
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    old = unit(latent @ to_old + 0.05 * rng.normal(size=(n, old_width)))
    new = unit(np.tanh(0.7 * latent @ to_new) + 0.05 * rng.normal(size=(n, new_width)))
    return Corpus(
        ids=np.arange(n, dtype=np.int64) * 7 + 3,
        old=old,
        new=new,
        queries_old=unit(query_latent @ to_old),
        queries_new=unit(np.tanh(0.7 * query_latent @ to_new)),
    )


@pytest.fixture(scope="session")
def corpus() -> Corpus:
    return make_corpus()


@pytest.fixture(scope="session")
def fitted(corpus):
    """A plan (10%... of the corpus re-embedded, 30% of it held out) and the migration fitted on it."""
    import torch

    from latentstitch.migrate import fit_migration, plan_sample

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    plan = plan_sample(corpus.ids, corpus.old, 0.25, strategy="random", holdout=0.4, metric="cosine", seed=1)
    migration = fit_migration(
        corpus.ids,
        corpus.old,
        plan.ids,
        corpus.new_of(plan.ids),
        metric="cosine",
        holdout_ids=plan.holdout_ids,
        folds=3,
    )
    torch.set_num_threads(threads)
    return plan, migration


@pytest.fixture
def saved(fitted, tmp_path):
    """The plan, a copy of the fitted migration set to corpus-side (what apply migrates the index with) and the path
    it is saved at."""
    plan, migration = fitted
    migration = copy.copy(migration)  # the session's migration stays as fitted
    migration.mode = "corpus"
    return plan, migration, migration.save(tmp_path / "migration.json")
