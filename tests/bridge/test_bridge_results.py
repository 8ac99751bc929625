"""A bridge's results as types (``RouteScore``, ``BudgetRow``): their JSON form is the one of earlier versions, and
bridges saved by earlier versions load as before (fixtures in tests/fixtures/bridge, written by the code before the
results became types: ``old_*.safetensors``, with the reports it wrote, ``old_*_report.json``, and its inputs)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from latentstitch.bridge import Bridge, BudgetRow, RouteScore, bridge_report

FIXTURES = Path(__file__).parents[1] / "fixtures" / "bridge"


def _inputs():
    data = np.load(FIXTURES / "old_inputs.npz")
    return data["source"], data["target"]


def _header(path: Path) -> dict:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        return json.loads(handle.metadata()["latentstitch"])


def _without_seconds(learned: dict) -> dict:
    rows = learned["routes_"]["value"]
    return {**learned, "routes_": {"value": [{"dict": {**r["dict"], "seconds": None}} for r in rows]}}


@pytest.mark.parametrize("name", ["label_free", "relative"])
def test_a_bridge_saved_by_the_earlier_code_loads_reports_and_bridges_as_before(name):
    bridge = Bridge.load(FIXTURES / f"old_{name}.safetensors")
    assert all(isinstance(row, RouteScore) for row in bridge.routes_)
    assert all(isinstance(row, BudgetRow) for row in bridge.budget_)
    assert bridge.estimate_ is None  # earlier versions made no quality estimate
    old = json.loads((FIXTURES / f"old_{name}_report.json").read_text())
    report = json.loads(json.dumps(bridge_report(bridge, source="s.npy"), sort_keys=True))
    assert report["choice"] == old["choice"] and report["selection_rule"] == old["selection_rule"]
    assert {row[0] for row in report["tables"][0]["rows"]} == {row[0] for row in old["tables"][0]["rows"]}
    source, _ = _inputs()
    np.testing.assert_allclose(bridge.transform(source[:5]), bridge.estimator_.transform(source[:5]))


def test_a_saved_bridge_round_trips_with_its_route_table_and_estimate(tmp_path):
    source, target = _inputs()
    bridge = Bridge(routes=["relative_centered", "ridge_raw", "low_rank"], cv=4, seed=2, budget=(12, 24))
    bridge.fit(source, target).save(tmp_path / "new.safetensors")
    again = Bridge.load(tmp_path / "new.safetensors")
    assert again.routes_ == bridge.routes_ and again.budget_ == bridge.budget_ and again.estimate_ == bridge.estimate_
    assert again.selection_rule() == bridge.selection_rule()
    np.testing.assert_allclose(again.transform(source[:5]), bridge.transform(source[:5]))


def test_with_a_head_the_rows_hold_agreement():
    bridge = Bridge.load(FIXTURES / "old_head.safetensors")
    assert bridge.criterion_ == "agreement"
    assert all(row.agreement is not None for row in bridge.routes_)
    assert set(bridge.budget_[0].scores) == {row.route for row in bridge.routes_}


def test_rows_convert_to_and_from_their_json_form():
    row = RouteScore("ridge", "translation", "d", mrr=(0.5, 0.1), shuffled_mrr=(0.2, 0.0), z=4.0, chance_mrr=0.2)
    plain = row.to_dict()
    assert plain["mrr"] == [0.5, 0.1] and plain["r2"] is None and plain["route"] == "ridge"
    assert list(plain)[:4] == ["route", "family", "description", "error"]
    assert RouteScore.from_dict(json.loads(json.dumps(plain))) == row
    assert row["mrr"] == (0.5, 0.1) and row.score("mrr") == row.mrr  # the dict rows' reading still works
    with pytest.raises(KeyError):
        row["nope"]
    with pytest.raises(ValueError, match="unknown keys: nope"):
        RouteScore.from_dict({**plain, "nope": 1})
    failed = RouteScore("broken", "translation", "", error="no")
    assert not failed.fitted and math.isinf(failed.z)
    budget = BudgetRow(10, {"ridge": (0.9, 0.01), "broken": None})
    assert budget.to_dict() == {"anchors": 10, "ridge": [0.9, 0.01], "broken": None}
    assert BudgetRow.from_dict(budget.to_dict()) == budget
    assert budget["anchors"] == 10 and budget["ridge"] == (0.9, 0.01) and budget.get("other") is None
