"""``plan_sample``'s access and uncertainty strategies: access re-embeds what the query log reaches first,
uncertainty (second stage) what the provisional bridge gets wrong; both return the budget, once each, with the same
random held-out part as the other strategies, from numpy and torch inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from latentstitch.migrate import MigrationPlan, plan_sample

N, WIDTH = 600, 8


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def index():
    rng = np.random.default_rng(0)
    return np.arange(N, dtype=np.int64) * 3 + 1, unit(rng.normal(size=(N, WIDTH)))


def rotation(seed: int = 1) -> np.ndarray:
    return np.linalg.qr(np.random.default_rng(seed).normal(size=(WIDTH, WIDTH)))[0].astype(np.float32)


def broken_bridge(vectors) -> np.ndarray:
    """A rotation (which keeps every neighbourhood), except on documents with a first coordinate above 0.35, which it
    sends to unrelated directions."""
    vectors = np.asarray(vectors, dtype=np.float32)
    out = vectors @ rotation()
    broken = vectors[:, 0] > 0.35
    out[broken] = unit(np.random.default_rng(2).normal(size=(int(broken.sum()), WIDTH)))
    return out


def test_access_takes_the_documents_the_query_log_reaches(index):
    ids, old = index
    rng = np.random.default_rng(3)
    targets = rng.choice(N, size=30, replace=False)
    # each target's query, asked once, lies right next to it: its top result is the target
    log = unit(old[targets] + 0.01 * rng.normal(size=(30, WIDTH)))
    plan = plan_sample(ids, old, 100, strategy="access", query_log=log, depth=1, holdout=0.2, seed=0)
    held = set(plan.holdout_ids.tolist())
    wanted = {int(ids[t]) for t in targets} - held  # a target drawn into the random held-out part stays there
    assert wanted <= set(plan.fit_ids.tolist())
    # kmeans coverage fills the other 80 - |wanted| of the fit part
    assert len(plan.fit_ids) == 80


def test_access_by_counts_takes_the_most_accessed_first(index):
    ids, old = index
    counts = {int(ids[i]): 100 - i for i in range(60)}  # id of row i accessed 100 - i times
    plan = plan_sample(ids, old, 25, strategy="access", query_log=counts, holdout=0.2, seed=4)
    assert len(plan.fit_ids) == 20
    ranked = [i for i in counts if i not in set(plan.holdout_ids.tolist())]
    assert plan.fit_ids.tolist() == ranked[:20]  # the most accessed, in order of access


def test_access_weights_frequency(index):
    ids, old = index
    rng = np.random.default_rng(5)
    popular, rare = rng.choice(N, size=(2, 20), replace=False)
    # popular documents' queries asked five times each, the rare ones' once; room for only 20
    log = np.concatenate([np.repeat(old[popular], 5, axis=0), old[rare]])
    plan = plan_sample(ids, old, 20, strategy="access", query_log=log, depth=1, holdout=0.0, seed=0)
    assert set(plan.fit_ids.tolist()) == {int(ids[p]) for p in popular}


def test_uncertainty_second_stage_takes_the_broken_region(index):
    ids, old = index
    broken = old[:, 0] > 0.35
    assert 0.1 < broken.mean() < 0.3  # the region is a minority, larger than what the second stage adds
    first = plan_sample(ids, old, 80, strategy="uncertainty", holdout=0.25, seed=0)
    assert first.stage == "first" and len(first.fit_ids) == 30 and len(first.holdout_ids) == 20
    second = plan_sample(ids, old, 80, strategy="uncertainty", bridge=broken_bridge, previous=first, seed=0)
    added = np.setdiff1d(second.fit_ids, first.fit_ids)
    assert len(added) == 30
    rows = (added - 1) // 3
    assert broken[rows].mean() >= 0.9, broken[rows].mean()
    # the same call on a bridge that breaks nothing takes its documents from everywhere
    calm = plan_sample(ids, old, 80, strategy="uncertainty", bridge=lambda v: v @ rotation(), previous=first, seed=0)
    calm_rows = (np.setdiff1d(calm.fit_ids, first.fit_ids) - 1) // 3
    assert broken[calm_rows].mean() < 0.6


def test_uncertainty_reads_a_migration_and_load_plans_pair(index, tmp_path):
    from latentstitch.migrate import fit_migration, load_plan, save_plan

    ids, old = index
    new = old @ rotation(7)
    first = plan_sample(ids, old, 60, strategy="uncertainty", holdout=0.2, first_share=0.6, seed=1)
    migration = fit_migration(
        ids, old, first.ids, new[(first.ids - 1) // 3], holdout_ids=first.holdout_ids, routes=["ridge"], folds=2
    )
    save_plan(first, tmp_path / "first.csv")
    second = plan_sample(
        ids, old, 60, strategy="uncertainty", bridge=migration, previous=load_plan(tmp_path / "first.csv"), seed=1
    )
    assert len(second.ids) == 60 and len(np.unique(second.ids)) == 60
    assert set(first.fit_ids.tolist()) <= set(second.fit_ids.astype(np.int64).tolist())
    assert set(second.holdout_ids.astype(np.int64).tolist()) == set(first.holdout_ids.tolist())


def _plans(ids, old, budget, convert):
    log = convert(old[:40])
    yield plan_sample(ids, convert(old), budget, strategy="access", query_log=log, holdout=0.3, seed=2)
    first = plan_sample(ids, convert(old), budget, strategy="uncertainty", holdout=0.3, seed=2)
    yield first
    yield plan_sample(ids, convert(old), budget, strategy="uncertainty", bridge=broken_bridge, previous=first, seed=2)


@pytest.mark.parametrize("convert", [np.asarray, torch.as_tensor], ids=["numpy", "torch"])
def test_budget_once_each_and_the_same_held_out_part(index, convert):
    ids, old = index
    kmeans = plan_sample(ids, old, 50, strategy="kmeans", holdout=0.3, seed=2)
    for plan in _plans(ids, old, 50, convert):
        assert isinstance(plan, MigrationPlan)
        if plan.stage != "first":
            assert len(plan.ids) == 50
        assert len(np.unique(plan.ids)) == len(plan.ids)
        assert set(plan.ids.tolist()) <= set(ids.tolist())
        # the held-out part is a random draw of the corpus, whatever the strategy
        assert plan.holdout_ids.tolist() == kmeans.holdout_ids.tolist()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"strategy": "access"}, "query_log: the access strategy needs"),
        ({"strategy": "access", "query_log": np.ones((3, 5), np.float32)}, r"query_log: expected \(queries, 8\)"),
        ({"strategy": "access", "query_log": {"x": 1}}, "query_log: none of its 1 ids is in the index"),
        ({"strategy": "access", "query_log": {1: -1}}, "query_log: expected access counts"),
        ({"strategy": "kmeans", "query_log": np.ones((3, 8), np.float32)}, "query_log: only the access strategy"),
        ({"strategy": "uncertainty", "bridge": broken_bridge}, "bridge: the uncertainty strategy's second stage"),
        ({"strategy": "kmeans", "bridge": broken_bridge}, "bridge: only the uncertainty strategy"),
        ({"strategy": "uncertainty", "bridge": 3, "previous": ([1, 4], [7])}, "bridge: expected a Migration"),
        ({"strategy": "uncertainty", "bridge": broken_bridge, "previous": ([1, 5], [7])}, "previous: 1 of 2 ids"),
        ({"strategy": "uncertainty", "bridge": broken_bridge, "previous": "plan.csv"}, "previous: expected"),
        (
            {"strategy": "uncertainty", "bridge": broken_bridge, "previous": (list(range(1, 91, 3)), [])},
            "budget: the first stage's plan already holds 30",
        ),
        ({"strategy": "uncertainty", "first_share": 0.0}, "first_share"),
    ],
)
def test_bad_inputs_name_the_argument(index, options, match):
    ids, old = index
    with pytest.raises((ValueError, TypeError), match=match):
        plan_sample(ids, old, 20, **options)


# --- the command line: latentstitch migrate plan --strategy access | uncertainty -----------------------------------
def _cli(argv: list[str]) -> int:
    from latentstitch.cli import main

    return main(argv)


def _error(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert _cli(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


@pytest.fixture
def files(index, tmp_path):
    _, old = index
    np.save(tmp_path / "old.npy", old)  # ids: the row numbers
    return tmp_path


def test_cli_access_reads_query_vectors_and_access_counts(index, files, capsys):
    from latentstitch.migrate import load_plan

    _, old = index
    np.save(files / "log.npy", old[[5, 9, 9, 9, 14]])
    plan = ["migrate", "plan", str(files / "old.npy"), "--budget", "12", "--holdout", "0", "--strategy", "access"]
    assert _cli([*plan, "--query-log", str(files / "log.npy"), "-o", str(files / "a.csv")]) == 0
    assert {5, 9, 14} <= set(load_plan(files / "a.csv")[0].astype(int).tolist())
    (files / "counts.csv").write_text("id,count\n300,2\n301,7\n300,4\n")
    assert _cli([*plan, "--query-log", str(files / "counts.csv"), "-o", str(files / "b.csv")]) == 0
    assert load_plan(files / "b.csv")[0][:2].astype(int).tolist() == [301, 300]  # 7 accesses, then 2 + 4


def test_cli_uncertainty_in_two_stages(index, files, capsys):
    from latentstitch.migrate import load_plan

    _, old = index
    base = ["migrate", "plan", str(files / "old.npy"), "--budget", "60", "--strategy", "uncertainty"]
    assert _cli([*base, "--first-share", "0.6", "-o", str(files / "p1.csv")]) == 0
    assert "--provisional provisional.json" in capsys.readouterr().out  # the next steps are spelled out
    fit_ids, held_ids = load_plan(files / "p1.csv")
    rows = np.concatenate([fit_ids, held_ids]).astype(int)
    np.savez(files / "sample.npz", embeddings=broken_bridge(old[rows]), id=rows)
    fit = ["migrate", "fit", str(files / "old.npy"), str(files / "sample.npz"), "--plan", str(files / "p1.csv")]
    assert _cli([*fit, "--folds", "2", "-o", str(files / "provisional.json")]) == 0
    second = ["--provisional", str(files / "provisional.json"), "--first-plan", str(files / "p1.csv")]
    assert _cli([*base, *second, "-o", str(files / "p2.csv")]) == 0
    fit2, held2 = load_plan(files / "p2.csv")
    assert len(fit2) + len(held2) == 60 and set(fit_ids.tolist()) <= set(fit2.tolist())
    assert held2.tolist() == held_ids.tolist()


def test_cli_plan_user_errors(index, files, capsys):
    np.save(files / "narrow.npy", np.ones((4, 3), np.float32))
    (files / "bad.csv").write_text("id,count,extra\n1,2,3\n")
    base = ["migrate", "plan", str(files / "old.npy"), "--budget", "20", "-o", str(files / "p.csv")]
    assert "--query-log: --strategy access needs" in _error(capsys, [*base, "--strategy", "access"])
    err = _error(capsys, [*base, "--strategy", "kmeans", "--query-log", str(files / "narrow.npy")])
    assert "--query-log: only --strategy access" in err
    err = _error(capsys, [*base, "--strategy", "access", "--query-log", str(files / "narrow.npy")])
    assert "--query-log: expected (queries, 8)" in err
    err = _error(capsys, [*base, "--strategy", "access", "--query-log", str(files / "missing.npy")])
    assert "--query-log" in err
    assert "expected only id and count" in _error(
        capsys, [*base, "--strategy", "access", "--query-log", str(files / "bad.csv")]
    )
    err = _error(capsys, [*base, "--strategy", "uncertainty", "--first-plan", str(files / "p0.csv")])
    assert "--provisional: the second stage" in err
    err = _error(capsys, [*base, "--strategy", "uncertainty", "--first-share", "1.5"])
    assert "--first-share: expected a share in (0, 1]" in err
    assert not (files / "p.csv").exists()
