"""The head-noise study's arithmetic (benchmarks/_pairs/head_noise.py): its macro-F1 is scikit-learn's on every
subset or resample, and its within-0.01 shares read the routes' figures as stated."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import f1_score

from benchmarks._pairs.head_noise import f1_figure, macro_f1, mean_figure, noise_figures


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 6), st.integers(20, 120))
def test_macro_f1_is_scikit_learns_on_subsets_and_resamples(seed, classes, n):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, classes, n)
    predicted = rng.integers(0, classes + 1, (3, n))  # a class the truth may lack, as a collapsed head gives
    masks = rng.random((4, n)) < 0.5
    masks[:, 0] = True  # no empty subset
    got = macro_f1(predicted, truth, masks)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=2)
    resampled = macro_f1(predicted, truth, counts)
    for r in range(3):
        for s in range(4):
            want = f1_score(truth[masks[s]], predicted[r][masks[s]], average="macro")
            assert got[r, s] == pytest.approx(want, abs=1e-12)
        for s in range(2):
            rows = np.repeat(np.arange(n), counts[s])
            want = f1_score(truth[rows], predicted[r][rows], average="macro")
            assert resampled[r, s] == pytest.approx(want, abs=1e-12)


def test_a_route_far_ahead_is_the_oracles_and_a_pick_behind_it_is_never_within():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 4, 400)
    good = np.where(rng.random(400) < 0.9, truth, (truth + 1) % 4)
    poor = np.where(rng.random(400) < 0.5, truth, (truth + 1) % 4)
    figures = noise_figures(["good", "poor"], f1_figure(np.stack([good, poor]), truth), 1, len(truth))
    assert figures["fair_best_route"] == "good" and not figures["fair_within"]
    assert figures["oracle_within"] == 1.0 and figures["oracle_within_boot"] == 1.0
    assert figures["pick_within"] == 0.0 and figures["pick_within_boot"] == 0.0


def test_identical_routes_are_always_within():
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 3, 200)
    same = np.where(rng.random(200) < 0.7, truth, 0)
    figures = noise_figures(["a", "b"], f1_figure(np.stack([same, same]), truth), 1, len(truth))
    assert figures["fair_within"] and figures["pick_within"] == 1.0 and figures["pick_within_boot"] == 1.0


def test_mean_figure_is_the_weighted_hit_rate():
    hits = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]])
    weights = np.array([[True, True, True, True], [False, False, True, True]])
    assert np.allclose(mean_figure(hits)(weights), [[0.75, 1.0], [0.25, 0.5]])
    assert np.allclose(mean_figure(hits)(np.array([[2, 0, 0, 2]])), [[1.0], [0.0]])


def test_balanced_agreement_weighs_classes_equally():
    from benchmarks._pairs.head_noise import rule_rows

    classes = np.array([0] * 90 + [1] * 10)
    bits = {
        "keeps_the_big_class": np.array([1.0] * 90 + [0.0] * 10),  # agreement 0.90, balanced 0.50
        "keeps_both": np.array([1.0] * 80 + [0.0] * 10 + [1.0] * 10),  # agreement 0.90 too, balanced 0.94
        "worse": np.zeros(100),
    }
    names = ["worse", "keeps_the_big_class", "keeps_both", "procrustes"]
    rows = rule_rows(names, classes, bits)
    assert names[rows["agreement"]] == "keeps_the_big_class"  # 0.90 vs 0.90: the earlier route on a tie
    assert names[rows["balanced"]] == "keeps_both"
    assert rows["fixed procrustes"] == 3 and "fixed ridge_raw" not in rows


def test_the_rules_read_a_fits_held_out_agreement_from_cv_results():
    from sklearn.linear_model import LogisticRegression
    from synthetic_pairs import angle_preserving_per_class

    from benchmarks._pairs.head_noise import rule_rows
    from benchmarks._pairs.library import held_out_classes, held_out_hits, held_out_sizes
    from latentstitch.bridge import Bridge

    source, target, labels = angle_preserving_per_class(3, n=100)
    head = LogisticRegression(max_iter=500).fit(target, labels)
    bridge = Bridge(routes=["ridge_raw", "procrustes", "relative_centered"]).fit(source, target, head=head.predict)
    hits, classes = held_out_hits(bridge), held_out_classes(bridge)
    assert held_out_sizes(bridge) == [20] * 5 and classes.shape == (100,)
    assert set(hits) == {"ridge_raw", "procrustes", "relative_centered"}
    for row in bridge.routes_:  # the per-anchor agreement is the route table's, fold by fold
        assert float(np.mean(hits[row.route].reshape(5, 20).mean(axis=1))) == row.agreement[0]
    names = [row.route for row in bridge.routes_]
    picked = names[rule_rows(names, classes, hits)["agreement"]]
    assert np.mean(hits[picked]) == np.mean(hits[bridge.route_])  # the library's pick, up to its MRR tie-break
    assert held_out_classes(Bridge(routes="ridge_raw").fit(source, target)) is None
