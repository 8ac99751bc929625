"""``Bridge(consumer=...)``: the label-free rule reads the score that ranked routes as that consumer did on the
development half of ``benchmarks bridge_generalisation``, the choice is saved, and a bad consumer names itself."""

from __future__ import annotations

import numpy as np
import pytest

import latentstitch as ls
from latentstitch.bridge import CONSUMER_SCORES, select_route


@pytest.fixture(scope="module")
def anchors():
    rng = np.random.default_rng(0)
    old = rng.normal(size=(200, 12)).astype(np.float32)
    new = np.tanh(old @ rng.normal(size=(12, 16)).astype(np.float32) / 6)
    return new, old


@pytest.mark.parametrize("consumer", sorted(CONSUMER_SCORES))
def test_consumer_chooses_on_its_score(anchors, consumer, tmp_path):
    bridge = ls.Bridge(routes=["ridge_raw", "procrustes", "relative"], consumer=consumer).fit(*anchors)
    assert bridge.selection_score_ == CONSUMER_SCORES[consumer]
    expected, _ = select_route(bridge.routes_, CONSUMER_SCORES[consumer])
    assert bridge.route_ == expected.route  # the pick is the rule's on the consumer's score
    bridge.save(tmp_path / "b.safetensors")
    loaded = ls.Bridge.load(tmp_path / "b.safetensors")
    assert loaded.consumer == consumer and loaded.route_ == bridge.route_


def test_bad_consumer_is_named(anchors):
    with pytest.raises(ValueError, match="^consumer: expected one of 'index', 'scaled_head', 'raw_head'"):
        ls.Bridge(consumer="classifier").fit(*anchors)


def test_cli_consumer_option(anchors, tmp_path, capsys):
    from latentstitch.cli import main

    np.save(tmp_path / "new.npy", anchors[0])
    np.save(tmp_path / "old.npy", anchors[1])
    argv = [
        "bridge",
        "fit",
        str(tmp_path / "new.npy"),
        str(tmp_path / "old.npy"),
        "-o",
        str(tmp_path / "b.safetensors"),
    ]
    assert main([*argv, "--consumer", "scaled_head", "--no-budget", "--routes", "ridge_raw", "procrustes"]) == 0
    assert ls.Bridge.load(tmp_path / "b.safetensors").selection_score_ == "r2_scaled"
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--consumer", "nope"])
    assert exit_info.value.code == 2
    assert "--consumer" in capsys.readouterr().err
