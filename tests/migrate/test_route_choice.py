"""How ``fit_migration`` chooses the route without a query log (``choose``)."""

import warnings

import numpy as np
import pytest

from latentstitch.migrate import fit_migration, search
from latentstitch.migrate._fit import neighbour_overlap


def _upgrade(seed: int, n: int = 600):
    """Documents seen by a new model (its vectors: a latent meaning) and by an old one that reads the meaning in half
    its dimensions and noise in the other half; the queries are other wordings of each document (the meaning plus a
    perturbation), embedded by the new model. A map that weighs the old dimensions by how much they predict (a
    ridge) retrieves them better than one that keeps every dimension's spread (Procrustes)."""
    rng = np.random.default_rng(seed)
    meaning = rng.normal(size=(n, 12))
    to_new = rng.normal(size=(12, 20))
    new = meaning @ to_new
    old = np.hstack([meaning @ rng.normal(size=(12, 12)), 3.0 * rng.normal(size=(n, 12))])
    queries = (meaning + 0.6 * rng.normal(size=meaning.shape)) @ to_new
    return old.astype(np.float32), new.astype(np.float32), queries.astype(np.float32)


def _recall(migration, old, new, queries, sample):
    migrated = np.array(migration.transform_corpus(old), dtype=np.float32)
    migrated[sample] = new[sample]
    rest = np.setdiff1d(np.arange(len(old)), sample)
    top = search(queries[rest], migrated, 10, "cosine")
    return float((top == rest[:, None]).any(axis=1).mean())


@pytest.mark.parametrize("seed", [0, 1])
def test_fidelity_picks_the_route_that_retrieves_other_wordings_best(seed):
    old, new, queries = _upgrade(seed)
    ids = np.arange(len(old))
    sample = np.random.default_rng(seed).choice(len(old), 120, replace=False)
    routes = ["procrustes", "procrustes_norm", "ridge_loo"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chosen = fit_migration(ids, old, sample, new[sample], modes="corpus", routes=routes, choose="fidelity")
        alone = {r: fit_migration(ids, old, sample, new[sample], modes="corpus", routes=[r]) for r in routes}
    each = {r: _recall(m, old, new, queries, sample) for r, m in alone.items()}
    got = _recall(chosen, old, new, queries, sample)
    assert chosen.bridges["corpus"].route_ == max(each, key=each.get), each
    assert got >= max(each.values()) - 1e-9
    assert any("cosine to the true ones" in note for note in chosen.notes)


def test_neighbour_overlap_equals_a_hand_count():
    """Each item's bridged top 10 (itself left out) against the new model's own, counted by hand."""
    rng = np.random.default_rng(0)
    old = rng.normal(size=(40, 6)).astype(np.float32)
    new = (old @ rng.normal(size=(6, 5))).astype(np.float32)

    class Shift:  # a map whose bridged vectors are known: the first new coordinate dropped
        def fit(self, source, target):
            self.width = target.shape[1]
            return self

        def transform(self, source):
            out = source[:, : self.width].copy()
            out[:, 0] = 0
            return out

    got = neighbour_overlap("corpus", lambda s, t: Shift().fit(s, t), new, new, 5, 0, "ip")
    bridged = new.copy()
    bridged[:, 0] = 0
    for i in range(len(new)):
        truth = [j for j in np.argsort(-(new @ new[i])) if j != i][:10]
        found = [j for j in np.argsort(-(bridged @ new[i])) if j != i][:10]
        assert got[i] == pytest.approx(len(set(truth) & set(found)) / 10)


def test_an_unknown_choice_is_named():
    old, new, _ = _upgrade(0, n=60)
    with pytest.raises(ValueError, match="choose: expected one of self, fidelity"):
        fit_migration(np.arange(60), old, np.arange(30), new[:30], choose="queries")
