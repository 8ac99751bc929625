"""``Bridge.cv_results_``: every route's cross-validation fold by fold, as scikit-learn's searches report theirs.
Its shape (one entry per route, folds 0..cv-1 partitioning the anchors), its agreement with the route table, the
choice and the estimate, and its round trip through a saved file (a tampered one refused)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from sklearn.linear_model import LogisticRegression
from synthetic_pairs import angle_preserving_per_class, rotated_scaled_shifted

from latentstitch.bridge import ROUTES, Bridge, RelativeRoute, bridge_report, register_route
from latentstitch.bridge._report import budget_table

ROUTE_LIST = ["ridge_raw", "procrustes", "relative_centered", "ensemble"]


def _folds(cv: dict) -> int:
    return sum(1 for key in cv if key.startswith("split") and key.endswith("_test_score"))


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN (a failed route's scores)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.fixture(scope="module")
def fitted():
    source, target, _ = rotated_scaled_shifted(4, n=120)
    return Bridge(routes=ROUTE_LIST, cv=4, seed=1).fit(source, target)


def test_one_entry_per_route_and_the_folds_partition_the_anchors(fitted):
    cv = fitted.cv_results_
    assert _folds(cv) == fitted.cv == 4
    assert all(len(entries) == len(fitted.routes_) for entries in cv.values())
    assert cv["route"] == [row.route for row in fitted.routes_]
    assert cv["family"] == [row.family for row in fitted.routes_]
    rows = [cv[f"split{k}_test_rows"][0] for k in range(4)]
    assert sorted(i for fold in rows for i in fold) == list(range(fitted.n_anchors_))
    for k in range(4):
        assert all(hits is not None and len(hits) == len(rows[k]) for hits in cv[f"split{k}_test_hits"])
        assert all(set(hits) <= {0, 1} for hits in cv[f"split{k}_test_hits"])
    assert not any(key.endswith("_test_classes") for key in cv)  # no head given


def test_the_scores_are_the_route_tables_and_rank_one_is_the_chosen_route(fitted):
    cv, score = fitted.cv_results_, fitted.selection_score_
    for i, row in enumerate(fitted.routes_):
        folds = [cv[f"split{k}_test_score"][i] for k in range(4)]
        assert cv["mean_test_score"][i] == row.score(score)[0] == float(np.mean(folds))
        assert cv["std_test_score"][i] == row.score(score)[1] == float(np.std(folds))
    assert sorted(cv["rank_test_score"]) == list(range(1, len(fitted.routes_) + 1))
    assert cv["route"][cv["rank_test_score"].index(1)] == fitted.route_
    order = [fitted.routes_[cv["rank_test_score"].index(r)] for r in range(1, len(fitted.routes_) + 1)]
    clear = [row.clearly_better for row in order]
    assert clear == sorted(clear, reverse=True)  # the routes clearly better than shuffled pairs first
    means = [row.score(score)[0] for row in order if row.clearly_better]
    assert means == sorted(means, reverse=True)


def test_one_routes_hits_average_to_its_estimate():
    source, target, _ = rotated_scaled_shifted(5, n=100)
    bridge = Bridge(routes="ridge_raw", seed=3).fit(source, target)
    cv = bridge.cv_results_
    hits = np.concatenate([cv[f"split{k}_test_hits"][0] for k in range(_folds(cv))])
    assert bridge.estimate_.items == hits.size and bridge.estimate_.value == pytest.approx(hits.mean(), abs=1e-15)


def test_with_a_head_the_hits_are_agreement_and_the_classes_the_heads():
    source, target, labels = angle_preserving_per_class(2, n=120)
    head = LogisticRegression(max_iter=500).fit(target, labels)
    bridge = Bridge(routes=["ridge_raw", "relative_centered"], cv=4).fit(source, target, head=head.predict)
    cv, reference = bridge.cv_results_, head.predict(target)
    assert bridge.criterion_ == "agreement"
    for k in range(4):
        held = cv[f"split{k}_test_rows"][0]
        assert cv[f"split{k}_test_classes"] == [reference[held].tolist()] * 2
    for i, row in enumerate(bridge.routes_):
        per_fold = [float(np.mean(cv[f"split{k}_test_hits"][i])) for k in range(4)]
        assert [cv[f"split{k}_test_score"][i] for k in range(4)] == per_fold
        assert row.agreement[0] == float(np.mean(per_fold))


def test_a_failed_route_has_nan_scores_no_hits_and_the_last_rank(tmp_path):
    source, target, _ = rotated_scaled_shifted(3, n=80)
    register_route("broken_cv", lambda: RelativeRoute(similarity="no-such-similarity"), family="relative")
    try:
        bridge = Bridge(routes=["procrustes", "broken_cv"]).fit(source, target)
        bridge.save(tmp_path / "b.safetensors")
        again = Bridge.load(tmp_path / "b.safetensors")
    finally:
        ROUTES.pop("broken_cv")
    cv = bridge.cv_results_
    assert cv["error"][1] and math.isnan(cv["mean_test_score"][1]) and math.isnan(cv["split0_test_score"][1])
    assert cv["split0_test_hits"][1] is None and cv["rank_test_score"] == [1, 2]
    assert _same(again.cv_results_, cv)


def test_cv_results_survive_save_and_load(fitted, tmp_path):
    fitted.save(tmp_path / "b.safetensors")
    again = Bridge.load(tmp_path / "b.safetensors")
    assert again.cv_results_ == fitted.cv_results_


def _edit(tmp_path, path, change):
    with safe_open(str(path), "pt") as handle:
        header = json.loads(handle.metadata()["latentstitch"])
    change(header["learned"]["cv_results_"]["value"]["dict"])
    edited = tmp_path / "edited.safetensors"
    save_file(load_file(str(path)), str(edited), metadata={"latentstitch": json.dumps(header)})
    return edited


def _swap_ranks(cv):
    ranks = cv["rank_test_score"]
    first, other = ranks.index(1), ranks.index(2)
    ranks[first], ranks[other] = 2, 1


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (_swap_ranks, "rank 1 is not the chosen route"),
        (lambda cv: cv["route"].reverse(), "not the route table"),
        (lambda cv: cv.pop("split3_test_hits"), "missing keys: split3_test_hits"),
        (lambda cv: cv["split0_test_hits"][0].append(1), "a 0 or 1 per held-out row"),
        (lambda cv: cv["split1_test_rows"][0].__setitem__(0, 10_000), "rows of the 120 anchors"),
        (lambda cv: cv["mean_test_score"].__setitem__(0, "high"), "expected numbers"),
        (lambda cv: cv["params"].pop(), "one entry per route"),
    ],
)
def test_a_tampered_cv_results_is_refused_on_load(fitted, tmp_path, change, match):
    fitted.save(tmp_path / "b.safetensors")
    with pytest.raises(ValueError, match=match):
        Bridge.load(_edit(tmp_path, tmp_path / "b.safetensors", change))


def test_the_budget_table_reads_the_score_the_budget_holds():
    # without a head the anchor budget compares the consumer's score (here R^2 of standard-scaled features); the
    # table named it MRR and put the routes' MRR in its last row beside R^2 values in the others
    source, target, _ = rotated_scaled_shifted(6, n=120)
    bridge = Bridge(routes=["ridge_raw", "procrustes"], consumer="scaled_head", budget=(20,)).fit(source, target)
    table = budget_table(bridge)
    assert "R^2 of standard-scaled features" in table["title"]
    full = table["rows"][-1][1:]
    assert full == [list(row.r2_scaled) for row in bridge.routes_]
    assert [list(bridge.budget_[0].get(row.route)) for row in bridge.routes_] == table["rows"][0][1:]
    assert bridge_report(bridge)["tables"][1] == table
