"""``Bridge.fit(target_pool=...)``: held-out anchors ranked among the old index's vectors too, as a search of the
user's index ranks them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from latentstitch.bridge import Bridge, get_route
from latentstitch.bridge._crossval import Anchors
from latentstitch.bridge._pool import pool_rows


def _items(seed, n=2000, p=24, q=18):
    """A nonlinear pair: an item's own vector is easy to find among few, harder among many."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, p)).astype(np.float32)
    y = np.tanh(x @ rng.normal(size=(p, q)) / 3) + 0.2 * rng.normal(size=(n, q))
    return x, y.astype(np.float32)


def _fit(x, y, anchors, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Bridge(routes=["ridge_raw", "procrustes", "relative_centered"], seed=3).fit(
            x[anchors], y[anchors], **options
        )


def test_the_held_out_anchors_are_searched_among_the_pool_too():
    x, y = _items(0)
    anchors = np.arange(60)
    alone, pooled = _fit(x, y, anchors), _fit(x, y, anchors, target_pool=y[60:])
    assert alone.estimate_.pool == 60 and pooled.estimate_.pool == 2000
    # more vectors to be confused with: no route's held-out MRR rises, and at least one falls
    before = {r.route: r.mrr[0] for r in alone.routes_}
    after = {r.route: r.mrr[0] for r in pooled.routes_}
    assert all(after[name] <= before[name] + 1e-12 for name in before)
    assert any(after[name] < before[name] - 0.05 for name in before)
    assert any("1,940 target_pool vectors" in note for note in pooled.notes_)


def test_the_anchors_own_rows_in_the_pool_are_left_out():
    # a user passes the whole old index, anchors included: the same fit as with the other items only
    x, y = _items(1)
    anchors = np.arange(0, 2000, 25)
    whole = _fit(x, y, anchors, target_pool=y)
    rest = _fit(x, y, anchors, target_pool=np.delete(y, anchors, axis=0))
    assert [r.to_dict() | {"seconds": 0} for r in whole.routes_] == [r.to_dict() | {"seconds": 0} for r in rest.routes_]
    assert whole.estimate_.pool == 2000
    assert any("80 target_pool rows equal to an anchor's" in note for note in whole.notes_)


@pytest.mark.kernels
def test_the_pool_is_read_from_torch_and_dask_as_from_numpy():
    import dask.array as da

    x, y = _items(2, n=600)
    anchors = np.arange(50)
    reference = _fit(x, y, anchors, target_pool=y[50:])
    for pool in (torch.as_tensor(y[50:]), da.from_array(y[50:], chunks=100)):
        other = _fit(x, y, anchors, target_pool=pool)
        assert [r.mrr for r in other.routes_] == [r.mrr for r in reference.routes_]


def test_the_relative_fast_path_scores_pool_items_with_the_anchors_centre():
    # pool items' relative vectors take the anchors' centre (never their own): cosine between relative vectors over
    # the fold's training anchors, every side centred on its all-anchor mean while cross-validating (_relative_folds)
    x, y = (a.astype(np.float64) for a in _items(3, n=300))
    extra = y[100:] + 0.5  # shifted: a centre of their own would differ
    anchors = Anchors(x[:100], y[:100], np.array_split(np.arange(100), 5), 0, extra=extra)
    fold = anchors.fold(1, np.concatenate([anchors.parts[j] for j in (0, 2, 3, 4)]))
    ((_, fast),) = get_route("relative_centered").path(fold)

    def phi(rows, reference):
        rows = torch.as_tensor(rows - reference.mean(axis=0))
        return torch.nn.functional.normalize(rows, dim=1)

    source, target = phi(x, x[:100]), phi(np.concatenate([y[:100], extra]), y[:100])
    left = torch.nn.functional.normalize(source[fold.queries] @ source[fold.train].T, dim=1)
    right = torch.nn.functional.normalize(target @ target[fold.train].T, dim=1)
    assert fast.shape == (len(fold.queries), 300)
    torch.testing.assert_close(fast.double(), left @ right.T, rtol=1e-9, atol=1e-9)


def test_a_large_pool_is_drawn_down_to_the_cap_with_the_seed():
    rng = np.random.default_rng(4)
    target = torch.as_tensor(rng.normal(size=(10, 5)))
    pool = rng.normal(size=(500, 5))
    rows, notes = pool_rows(pool, target, seed=1, cap=100)
    again, _ = pool_rows(pool, target, seed=1, cap=100)
    other, _ = pool_rows(pool, target, seed=2, cap=100)
    assert rows.shape == (100, 5) and torch.equal(rows, again) and not torch.equal(rows, other)
    assert "drawn at random from 500" in notes[0]
    # a pool just above the cap keeps a random cap of it, not its first rows
    small = rng.normal(size=(105, 5))
    kept, _ = pool_rows(small, target, seed=1, cap=100)
    where = {int(np.flatnonzero((small == row.numpy()).all(axis=1))[0]) for row in kept}
    assert len(where) == 100 and max(where) >= 100
    assert all(any(torch.equal(row, torch.as_tensor(p)) for p in pool) for row in rows[:5])


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        (np.zeros((5, 7), dtype=np.float32), "target_pool: has 7 features but target has 18"),
        (np.zeros((0, 18), dtype=np.float32), "target_pool: expected at least one vector"),
        (np.zeros(18, dtype=np.float32), "target_pool: expected a 2-D array"),
        (np.full((3, 18), np.nan, dtype=np.float32), "target_pool"),
        (np.arange(18 * 3).reshape(3, 18), "target_pool: expected a floating-point array"),
    ],
)
def test_a_bad_pool_is_refused_naming_it(pool, message):
    x, y = _items(5, n=100)
    with pytest.raises((ValueError, TypeError), match=message):
        Bridge().fit(x, y, target_pool=pool)


def test_a_pool_of_only_the_anchors_is_refused():
    x, y = _items(6, n=100)
    with pytest.raises(ValueError, match="every row is one of the anchors"):
        Bridge().fit(x, y, target_pool=y[:10])
