"""The bridge's label-free choice on spaces with a known relation: it finds the right family of route, and it says
so when the pairs carry no information."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from synthetic_pairs import angle_preserving_per_class, rotated_scaled_shifted

from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch.bridge import CLEAR_Z, SELECTABLE, Bridge, BridgeWarning, RouteScore, chance_mrr, select_route

SEEDS = (0, 1, 2)


def _route(bridge, name):
    return next(row for row in bridge.routes_ if row.route == name)


@pytest.mark.parametrize("seed", SEEDS)
def test_rotation_scale_shift_and_noise_pick_a_translation_route_with_near_perfect_retrieval(seed):
    source, target, image = rotated_scaled_shifted(seed)
    bridge = Bridge().fit(source, target)
    chosen = _route(bridge, bridge.route_)
    assert bridge.family_ == "translation" and bridge.reliable_
    # measured over seeds 0-4: top-1 1.000 +- 0.000 for every translation route (noise 0.1 against scale 2.5)
    assert chosen["top1"][0] >= 0.97 and chosen["r2"][0] >= 0.99
    new = np.random.default_rng(seed + 100).normal(size=(20, source.shape[1])).astype(np.float32)
    error = np.linalg.norm(bridge.transform(new) - image(new), axis=1) / np.linalg.norm(image(new), axis=1)
    assert error.mean() < 0.05  # new vectors land on their true images (the fit saw 0.1 noise on scale ~8)


@pytest.mark.parametrize("seed", SEEDS)
def test_an_angle_preserving_nonlinear_map_picks_the_route_it_leaves_intact(seed):
    source, target, _ = angle_preserving_per_class(seed)
    # plain cosine relative is not in AUTO_ROUTES (it won no case of the generalisation benchmark's development half)
    bridge = Bridge(routes=["auto", "relative"]).fit(source, target)
    # cosine relative representations are exactly invariant to this map: perfect retrieval
    assert _route(bridge, "relative").mrr[0] == pytest.approx(1.0)
    best = max(row.mrr[0] for row in bridge.routes_)
    assert _route(bridge, bridge.route_).mrr[0] == best
    # ... and the map is really non-linear: ridge least squares cannot follow it (measured R^2 0.68-0.81)
    assert _route(bridge, "ridge_raw")["r2"][0] < 0.9


@pytest.mark.parametrize("seed", SEEDS)
def test_shuffled_pairs_are_reported_as_no_better_than_chance_once_in_words(seed):
    source, target, _ = rotated_scaled_shifted(seed)
    shuffled = target[np.random.default_rng(seed + 10).permutation(len(target))]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bridge = Bridge().fit(source, shuffled)
    said = [str(w.message) for w in caught if issubclass(w.category, BridgeWarning)]
    # said once in words; beside it, the inputs' own pairing check (compare's) may say the rows look unpaired
    assert [m for m in said if "rows look unpaired" not in m] == [m for m in said if "No route is clearly" in m]
    assert len([m for m in said if "No route is clearly" in m]) == 1 and len(said) <= 2
    assert not bridge.reliable_
    for row in bridge.routes_:
        # under shuffled pairs the own partner's rank is uniform: z ~ N(0, 1); 3 is the documented bar
        assert row.z < CLEAR_Z and not row.clearly_better
        # each held-out anchor is ranked among all 150 target vectors: chance H_N / N
        assert abs(row.mrr[0] - chance_mrr(len(source))[0]) < 0.1


def test_a_head_makes_prediction_agreement_the_choice(rng):
    from sklearn.linear_model import LogisticRegression

    source, target, labels = angle_preserving_per_class(3, n=200)
    head = LogisticRegression(max_iter=2000).fit(target, labels)
    bridge = Bridge(routes=["procrustes", "relative"]).fit(source, target, head=head.predict)
    assert bridge.criterion_ == "agreement"
    relative, procrustes = _route(bridge, "relative"), _route(bridge, "procrustes")
    assert relative.agreement[0] >= 0.95  # its LinearHead reproduces the head from exact relative vectors
    assert bridge.route_ == max((relative, procrustes), key=lambda r: r.agreement[0]).route
    scores = head.predict_proba  # a head giving one row of scores per vector works as well
    assert Bridge(routes=["procrustes"]).fit(source, target, head=scores).routes_[0].agreement[0] > 0.5


def test_rank_deficiency_is_said_once_in_words_not_per_fit(rng):
    source = rng.normal(size=(60, 64)).astype(np.float32)  # 48 training anchors per fold for 64 features
    target = source @ rng.normal(size=(64, 64)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bridge = Bridge(routes=["procrustes", "least_squares", "ridge", "ridge_cv"]).fit(source, target)
    assert not [w for w in caught if issubclass(w.category, RankDeficiencyWarning)]
    said = [str(w.message) for w in caught if issubclass(w.category, BridgeWarning)]
    # unregularised least squares is not unique with 48 anchors for 64 features; the bridge's Procrustes is (the
    # minimum-norm map, unspanned directions to zero), so it is not named
    assert len(said) == 1 and "cross-validating: least_squares (5 fits)." in said[0]
    assert any("not unique" in note for note in bridge.notes_)


def test_anchor_budget_scores_fewer_anchors_on_the_same_held_out_folds():
    source, target, _ = rotated_scaled_shifted(0, n=200)
    bridge = Bridge(routes=["procrustes", "relative_centered"], budget=(10, 40, 500)).fit(source, target)
    assert [entry.anchors for entry in bridge.budget_] == [10, 40]  # 500 is not below the 160 per fold
    for entry in bridge.budget_:
        assert set(entry.to_dict()) == {"anchors", "procrustes", "relative_centered"}
    # more anchors never hurt much here: with 40 the routes are already near their full score
    assert bridge.budget_[1].get("procrustes")[0] >= 0.95
    with pytest.raises(ValueError, match="budget: expected an integer >= 2"):
        Bridge(budget=(1,)).fit(source, target)


@example(seed=175, scale=10.578031260100513, shift=0.0)
@given(seed=st.integers(0, 2**16), scale=st.floats(0.01, 100.0), shift=st.floats(-10.0, 10.0))
def test_relative_routes_scores_ignore_rotations_rescalings_and_with_centring_shifts_of_a_space(seed, scale, shift):
    from latentstitch.invariance import random_transform

    source, target, _ = angle_preserving_per_class(seed % 7, n=60, d=8)
    # float64 throughout: in float32 the rounding of the moved copy alone flips near-tied ranks (seed 175, scale 10.58)
    source, target = source.astype(np.float64), target.astype(np.float64)
    moved = scale * source @ random_transform("orthogonal", 8, seed).matrix.astype(np.float64)
    routes = ["relative", "relative_centered"]
    first = Bridge(routes=routes).fit(source, target).routes_
    second = Bridge(routes=routes).fit(moved, target).routes_
    shifted = Bridge(routes=["relative_centered"]).fit(source + shift, target).routes_
    for a, b in zip(first, second, strict=True):
        assert a.mrr[0] == pytest.approx(b.mrr[0], abs=1e-6) and a.top1 == pytest.approx(b.top1, abs=1e-6)
    assert shifted[0].mrr[0] == pytest.approx(first[1].mrr[0], abs=1e-6)


def _row(route, family, mrr, r2=None, clear=True, **scores):
    row = RouteScore(route, family, "", clearly_better=clear, mrr=(mrr, 0.0), **scores)
    row.r2 = None if r2 is None else (r2, 0.0)
    return row


def test_the_rule_reads_the_named_score_among_routes_clearly_better_than_shuffled():
    rows = [
        _row("ridge_raw", "translation", 0.80, r2=0.6, knn_jaccard=(0.30, 0.0)),
        _row("procrustes", "translation", 0.85, r2=0.4, knn_jaccard=(0.20, 0.0)),
        _row("relative", "relative", 0.90, knn_jaccard=(0.25, 0.0), clear=False),
    ]
    assert select_route(rows, "mrr")[0].route == "procrustes"  # relative is not clearly better than shuffled
    assert select_route(rows, "r2")[0].route == "ridge_raw"
    assert select_route(rows, "knn_jaccard")[0].route == "ridge_raw"
    tie = [_row("a", "translation", 0.5, r2=0.7), _row("b", "translation", 0.6, r2=0.7)]
    assert select_route(tie, "r2")[0].route == "b"  # ties: the higher MRR
    none_clear = [_row("a", "translation", 0.1, clear=False), _row("b", "relative", 0.2, clear=False)]
    chosen, reliable = select_route(none_clear, "mrr")
    assert chosen.route == "b" and not reliable
    with pytest.raises(ValueError, match="score: expected one of"):
        select_route(rows, "accuracy")
    assert "mrr" in SELECTABLE


def test_within_translation_the_closest_to_the_target_vectors_wins(rng):
    source = rng.normal(size=(200, 16)).astype(np.float32)
    stretch = np.geomspace(0.05, 20.0, 16).astype(np.float32)  # anisotropic: no orthogonal map matches it
    target = (source * stretch) @ np.linalg.qr(rng.normal(size=(16, 16)))[0].astype(np.float32)
    target += 0.05 * rng.normal(size=target.shape).astype(np.float32)
    bridge = Bridge(routes=["procrustes_scaled", "ridge_raw"]).fit(source, target)
    rows = {row.route: row for row in bridge.routes_}
    assert bridge.route_ == "ridge_raw" and rows["ridge_raw"].r2[0] > rows["procrustes_scaled"].r2[0]
    assert rows["ridge_raw"].knn_jaccard[0] > rows["procrustes_scaled"].knn_jaccard[0]
