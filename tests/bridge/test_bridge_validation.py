"""What a bridge refuses or says at its doors (issue 27): lists as anchors, routes without the methods a bridge
calls, repeated anchor pairs, anchor budgets that cannot be drawn, labels a head cannot classify, routes that
could not be loaded back, and saved bridges whose attributes were edited."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from sklearn.base import BaseEstimator

from latentstitch.bridge import ROUTES, Bridge, BridgeWarning, register_route
from latentstitch.cli import main


def _pair(n=60, p=8, q=6, seed=0):
    rng = np.random.default_rng(seed)
    source = rng.normal(size=(n, p))
    return source, source @ rng.normal(size=(p, q)) + 0.05 * rng.normal(size=(n, q))


@pytest.fixture
def scratch_route():
    """Register routes for one test and remove them after."""
    added = []

    def add(name, factory, **options):
        added.append(name)
        return register_route(name, factory, **options)

    yield add
    for name in added:
        ROUTES.pop(name, None)


def test_lists_are_anchors_on_every_auto_route():
    source, target = _pair()
    from_lists = Bridge(routes="auto", cv=3).fit(source.tolist(), target.tolist())
    from_arrays = Bridge(routes="auto", cv=3).fit(source, target)
    assert from_lists.route_ == from_arrays.route_
    assert all(row.error is None for row in from_lists.routes_), [(r.route, r.error) for r in from_lists.routes_]
    np.testing.assert_allclose(from_lists.transform(source[:5].tolist()), from_arrays.transform(source[:5]))


def test_a_budget_that_cannot_be_drawn_is_said_by_name():
    source, target = _pair()
    with pytest.warns(BridgeWarning, match=r"budget: anchor count\(s\) 1000 left out .* 48 anchors"):
        bridge = Bridge(routes="ridge", budget=(10, 1000)).fit(source, target)
    assert [row.anchors for row in bridge.budget_] == [10]
    assert any(note.startswith("budget: anchor count(s) 1000") for note in bridge.notes_)


def test_repeated_anchor_pairs_are_counted_and_said():
    source, target = _pair(40)
    twice_source, twice_target = np.concatenate([source, source[:17]]), np.concatenate([target, target[:17]])
    with pytest.warns(BridgeWarning, match=r"17 of the 57 anchor pairs repeat an earlier pair"):
        bridge = Bridge(routes="ridge").fit(twice_source, twice_target)
    assert any("17 of the 57" in note for note in bridge.notes_)


def test_distinct_anchor_pairs_say_nothing_about_repeats(recwarn):
    source, target = _pair()
    Bridge(routes="ridge").fit(source, target)
    assert not [w for w in recwarn if "repeat" in str(w.message)]


@pytest.mark.parametrize(
    "labels, message",
    [
        (np.linspace(0, 1, 60), "continuous values"),
        (np.r_[np.zeros(30), np.ones(29), np.nan], "NaN or inf"),
        (np.array([None] * 60, dtype=object), "None or NaN"),
        (np.zeros((60, 2)), "expected 60 labels"),
    ],
    ids=["continuous", "nan", "none", "two_columns"],
)
def test_a_head_needs_class_labels(labels, message):
    source, target = _pair()
    bridge = Bridge(routes=["ridge", "relative"]).fit(source, target)
    with pytest.raises(ValueError, match=rf"^labels: .*{message}"):
        bridge.fit_head(target, labels)


def test_integer_valued_float_and_string_labels_train_a_head():
    source, target = _pair()
    bridge = Bridge(routes="ridge").fit(source, target)
    classes = (target[:, 0] > 0).astype(float)
    assert bridge.fit_head(target, classes).score(bridge.transform(source), classes) > 0.8
    names = np.where(classes > 0, "up", "down")
    assert set(bridge.fit_head(target, names).classes_) == {"up", "down"}


class _FitOnly:
    def fit(self, source, target):
        return self


class _NotPersistable(BaseEstimator):
    def fit(self, source, target):
        self.width_ = np.shape(source)[1]
        return self

    def transform(self, source):
        return np.asarray(source)[:, :6]


def test_a_route_without_transform_is_named_before_fitting(scratch_route):
    scratch_route("fit_only", _FitOnly)
    source, target = _pair()
    with pytest.raises(TypeError, match=r"routes: route 'fit_only' builds a _FitOnly, which has no transform"):
        Bridge(routes="fit_only").fit(source, target)


def test_a_relative_route_needs_transform_target(scratch_route):
    scratch_route("half_relative", _NotPersistable, family="relative")
    source, target = _pair()
    with pytest.raises(TypeError, match=r"route 'half_relative' .* no transform_target"):
        Bridge(routes="half_relative").fit(source, target)


def test_a_route_that_cannot_be_loaded_is_refused_at_save(scratch_route, tmp_path):
    scratch_route("not_persistable", _NotPersistable)
    source, target = _pair()
    with pytest.warns(BridgeWarning):  # the map is meaningless: not reliable
        bridge = Bridge(routes="not_persistable").fit(source, target)
    with pytest.raises(TypeError, match=r"cannot save this bridge: its route 'not_persistable' holds estimator_"):
        bridge.save(tmp_path / "b.safetensors")
    assert not (tmp_path / "b.safetensors").exists()


def _saved(tmp_path, routes):
    source, target = _pair()
    bridge = Bridge(routes=routes).fit(source, target)
    path = tmp_path / "bridge.safetensors"
    bridge.save(path)
    with safe_open(str(path), "pt") as handle:
        header = json.loads(handle.metadata()["latentstitch"])
    return bridge, header, load_file(str(path))


def _edited(tmp_path, header, tensors, attribute, value):
    copy = json.loads(json.dumps(header))
    copy["learned"][attribute]["value"] = value
    path = tmp_path / "edited.safetensors"
    save_file(tensors, str(path), metadata={"latentstitch": json.dumps(copy)})
    return path


TRANSLATION_EDITS = [
    ("family_", "relative"),
    ("family_", "bogus"),
    ("n_features_target_", 7),
    ("n_features_source_", 9),
    ("n_anchors_", 7),
    ("reliable_", False),
    ("reliable_", "yes"),
    ("route_", "procrustes"),
    ("route_", "nowhere"),
    ("dead_features_", [99]),
    ("dead_features_", [2, 1]),
    ("dead_values_", [1.0]),
]
RELATIVE_EDITS = [
    ("family_", "translation"),
    ("n_features_target_", 7),
    ("n_features_source_", 9),
    ("n_anchors_", 59),
    ("route_", "relative_centered"),
]


@pytest.mark.parametrize(
    "routes, edits", [(["ridge", "procrustes"], TRANSLATION_EDITS), (["relative"], RELATIVE_EDITS)]
)
def test_an_edited_bridge_fails_at_load_naming_the_file_and_attribute(tmp_path, routes, edits):
    bridge, header, tensors = _saved(tmp_path, routes)
    assert Bridge.load(tmp_path / "bridge.safetensors").route_ == bridge.route_
    for attribute, value in edits:
        if header["learned"][attribute]["value"] == value:
            continue
        path = _edited(tmp_path, header, tensors, attribute, value)
        with pytest.raises(ValueError) as caught:
            Bridge.load(path)
        assert str(path) in str(caught.value) and attribute in str(caught.value), (attribute, value, caught.value)


def test_bridge_apply_target_with_an_edited_bridge_is_one_line(tmp_path, capsys):
    _, header, tensors = _saved(tmp_path, ["relative"])
    path = _edited(tmp_path, header, tensors, "n_features_target_", 7)
    np.save(tmp_path / "old.npy", np.random.default_rng(1).normal(size=(10, 7)))
    code = main(["bridge", "apply", str(path), str(tmp_path / "old.npy"), "--target", "-o", str(tmp_path / "o.npy")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "n_features_target_" in err[0] and "Traceback" not in err[0], err


# --- issue 41: degenerate anchors, a head's object labels, a renamed route ---------------------------------------


@pytest.mark.parametrize("side", ["source", "target"])
@pytest.mark.parametrize("value", [1.0, 0.0])
def test_a_side_whose_every_feature_is_constant_is_named(side, value):
    source, target = _pair()
    constant = np.full_like(source if side == "source" else target, value)
    args = (constant, target) if side == "source" else (source, constant)
    with pytest.raises(ValueError, match=rf"^{side}: every feature is constant over the 60 anchors"):
        Bridge().fit(*args)


def test_constant_features_beside_varying_ones_still_fit():
    source, target = _pair()
    source, target = np.c_[source, np.ones(60)], np.c_[target, np.full(60, 3.0)]
    bridge = Bridge(routes=["ridge", "relative"]).fit(source, target)
    assert bridge.reliable_
    if bridge.family_ == "translation":
        np.testing.assert_allclose(bridge.transform(source)[:, -1], 3.0)


def _string_head(target):
    """A head as scikit-learn's predict gives it for labels read with pandas: an object array of strings."""
    return np.where(np.asarray(target)[:, 0] > 0, "up", "down").astype(object)


def test_a_head_predicting_strings_in_an_object_array_scores_every_route():
    source, target = _pair()
    bridge = Bridge(routes=["ridge", "relative"]).fit(source, target, head=_string_head)
    assert bridge.criterion_ == "agreement"
    assert all(row.agreement is not None and row.agreement[0] > 0.8 for row in bridge.routes_)
    labels = _string_head(target)
    assert set(bridge.fit_head(target, labels).classes_) == {"up", "down"}


@pytest.mark.parametrize(
    "values, message",
    [
        (lambda n: np.array(["a", 1] * (n // 2), dtype=object), "all strings or all integers, got an object array"),
        (lambda n: np.linspace(0, 1, n), "continuous values"),
    ],
    ids=["mixed_object", "continuous"],
)
def test_a_head_whose_predictions_are_not_class_labels_is_named(values, message):
    source, target = _pair()
    with pytest.raises((TypeError, ValueError), match=rf"^head: expected class labels.*{message}"):
        Bridge(routes=["ridge", "relative"]).fit(source, target, head=lambda v: values(len(v)))


def test_object_arrays_of_integers_are_class_labels_too():
    source, target = _pair()
    bridge = Bridge(routes="ridge").fit(source, target)
    labels = (target[:, 0] > 0).astype(int).astype(object)
    assert bridge.fit_head(target, labels).score(bridge.transform(source), labels) > 0.8


def test_a_bridge_whose_route_and_its_table_row_were_renamed_is_refused_as_tampered(tmp_path):
    bridge, header, tensors = _saved(tmp_path, ["ridge", "procrustes"])
    copy = json.loads(json.dumps(header))
    copy["learned"]["route_"]["value"] = "nowhere"
    for row in copy["learned"]["routes_"]["value"]:
        if row["dict"]["route"] == bridge.route_:
            row["dict"]["route"] = "nowhere"
    path = tmp_path / "renamed.safetensors"
    save_file(tensors, str(path), metadata={"latentstitch": json.dumps(copy)})
    with pytest.raises(ValueError, match=r"route_: 'nowhere' is not a registered route") as caught:
        Bridge.load(path)
    assert str(path) in str(caught.value)


def test_a_bridge_whose_estimator_is_not_what_its_route_builds_is_refused(tmp_path):
    bridge, header, tensors = _saved(tmp_path, ["ridge", "relative"])
    other = "relative" if bridge.route_ == "ridge" else "ridge"
    copy = json.loads(json.dumps(header))
    copy["learned"]["route_"]["value"] = other
    copy["learned"]["family_"]["value"] = ROUTES[other].family
    for row in copy["learned"]["routes_"]["value"]:
        row["dict"]["chosen"] = row["dict"]["route"] == other
        row["dict"]["route"] = {bridge.route_: other, other: bridge.route_}[row["dict"]["route"]]
        row["dict"]["family"] = ROUTES[row["dict"]["route"]].family
    path = tmp_path / "swapped.safetensors"
    save_file(tensors, str(path), metadata={"latentstitch": json.dumps(copy)})
    with pytest.raises(ValueError) as caught:
        Bridge.load(path)
    assert str(path) in str(caught.value)


def test_unpaired_rows_are_warned_naming_the_id_arguments_and_paired_rows_are_not():
    """The pairing check's p-value is uniform under shuffled rows: it warns with probability 0.95 per seed, so at
    least 7 of 10 seeds must (a chance failure has probability about 0.001); paired rows never warn."""
    warned = 0
    for seed in range(10):
        source, target = _pair(seed=seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            paired = Bridge(routes="ridge").fit(source, target)
        assert paired.reliable_ and not [w for w in caught if "unpaired" in str(w.message)]
        shuffled = target[np.random.default_rng(seed).permutation(len(target))]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bridge = Bridge(routes="ridge").fit(source, shuffled)
        said = [w for w in caught if issubclass(w.category, BridgeWarning) and "rows look unpaired" in str(w.message)]
        warned += bool(said)
        assert all("source_ids=" in str(w.message) and "target_ids=" in str(w.message) for w in said)
        assert not bridge.reliable_
    assert warned >= 7
