"""With many anchors the bridge scores only as many folds as hold the capped scored anchors (``scored_folds``):
the same number of scored anchors, each map still fitted on (cv - 1) / cv of them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from latentstitch._core.folds import kfold
from latentstitch.bridge import Bridge
from latentstitch.bridge._pool import MAX_QUERIES, query_rows, scored_folds


@pytest.mark.parametrize(("n", "cv", "expected"), [(5000, 5, 3), (768, 5, 5), (1500, 5, 4), (2400, 10, 5), (900, 3, 3)])
def test_folds_are_scored_until_they_hold_the_capped_anchors(n, cv, expected):
    parts = kfold(n, cv, 0, name="cv", min_rows=5)
    count = scored_folds(parts)
    assert count == expected
    # the folds left out would add no scored anchor: those scored already hold the cap (or every anchor)
    scored = sum(map(len, query_rows(parts[:count], 0)))
    assert min(n, MAX_QUERIES) - count <= scored <= min(n, MAX_QUERIES)  # each fold's share rounded


def test_a_large_fit_scores_the_capped_anchors_on_maps_fitted_on_four_fifths(rng):
    source = rng.normal(size=(2500, 12)).astype(np.float32)
    target = (source @ rng.normal(size=(12, 10)) + 0.1 * rng.normal(size=(2500, 10))).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = Bridge(routes=["ridge_raw", "procrustes_scaled", "relative_centered"]).fit(source, target)
    assert MAX_QUERIES - 3 <= bridge.estimate_.items <= MAX_QUERIES  # 3 of the 5 folds of 500 scored
    assert all(row.error is None for row in bridge.routes_)
    assert bridge.route_ == "ridge_raw" and bridge.routes_[0].r2[0] > 0.99
