"""The few-pairs benchmark's judgements (benchmarks/bridge_few_pairs.py): the raw-head rule is adopted exactly as its
fixed criterion says, and a pooled pick worse than the paired-only pick by more than 0.01 is a miss."""

from __future__ import annotations

from benchmarks.bridge_few_pairs import direction_rows, goal_lines, raw_head_rule


def _run(budget: int, seed: int, table: dict[str, float], library: float, direction=("a", "b")) -> dict:
    fit = {"route": "ensemble", "realised": {"lr_raw_f1": library}}
    return {
        "pair": "set:a|b",
        "source": direction[0],
        "target": direction[1],
        "budget": budget,
        "seed": seed,
        "own": {},
        "library": {
            "fits": {"raw_head/auto": fit},
            "routes": [{"route": r, "realised": {"lr_raw_f1": v}} for r, v in table.items()],
        },
    }


def test_raw_head_rule_adopts_procrustes_only_when_it_is_within_more_often_and_not_worse_on_average():
    near = {"procrustes": 0.80, "ridge": 0.805}
    far = {"procrustes": 0.60, "ridge": 0.805}
    # procrustes within 0.01 of the best in 2 of 3 cases, the library's pick in 1: adopted
    runs = [_run(100, 0, near, 0.70), _run(100, 1, near, 0.70), _run(768, 0, far, 0.80)]
    rule = raw_head_rule(runs)
    assert (rule["procrustes_within"], rule["library_within"], rule["adopted"]) == (2, 1, True)
    # as often within as the library's pick: not adopted (the criterion asks for strictly more)
    runs = [_run(100, 0, near, 0.70), _run(768, 0, far, 0.80)]
    assert raw_head_rule(runs)["adopted"] is False
    # within more often (3 cases against 2) but 0.10 lower on average: not adopted
    runs = [_run(100, s, near, 0.70) for s in range(3)] + [_run(768, 0, far, 0.80)]
    runs += [_run(768, 1, {"procrustes": 0.20, "ridge": 0.805}, 0.80)]
    rule = raw_head_rule(runs)
    assert rule["procrustes_within"] > rule["library_within"] and rule["adopted"] is False
    # runs at other budgets or without the every-route table are not cases
    assert raw_head_rule([_run(25, 0, near, 0.7), {**_run(100, 0, {}, 0.7)}])["cases"] == 0


def _pooled_run(paired: float, pooled: float, seed: int) -> dict:
    def fit(value):
        estimate = {"low": 0.0, "high": 1.0, "metric": "recall@10", "pool": 100, "value": 0.5}
        return {"route": "r", "realised": {"recall10": value, "recall_pool": value}, "estimate": estimate, "seconds": 1}

    return {
        "pair": "set:a|b",
        "source": "a",
        "target": "b",
        "budget": 100,
        "seed": seed,
        "own": {},
        "library": {"fits": {"index/auto": fit(paired), "index/pool1000": fit(pooled)}, "routes": []},
    }


def test_a_pooled_pick_more_than_001_below_the_paired_pick_is_a_miss():
    ok = direction_rows([_pooled_run(0.80, 0.795, 0), _pooled_run(0.80, 0.90, 1)])
    assert any(line.startswith("- PASS: never worse") for line in goal_lines(ok))
    bad = direction_rows([_pooled_run(0.80, 0.78, 0), _pooled_run(0.80, 0.90, 1)])
    line = next(line for line in goal_lines(bad) if "never worse" in line)
    assert line.startswith("- MISS") and "1 of 2 worse" in line and "-0.020" in line


def test_the_speed_goal_is_judged_on_the_slowest_directions_cpu_time_at_the_goals_pool():
    from benchmarks.bridge_few_pairs import speed_line

    def measured(cpu, pool=10000):
        fits = [{"cpu_s": c, "wall_s": 2 * c, "peak_added_mib": 300.0} for c in cpu]
        return {"pool": pool, "fits": fits}

    assert speed_line(measured([6.0, 9.5])).startswith("- PASS")
    assert speed_line(measured([6.0, 10.5])).startswith("- MISS")  # one direction over 10 s is a miss
    assert speed_line(measured([6.0], pool=1000)).startswith("- NOT JUDGED")
    assert speed_line(None).startswith("- NOT JUDGED")


def test_paired_only_runs_fit_no_pool_and_embed_none(tmp_path, monkeypatch):
    import argparse

    import numpy as np

    import benchmarks._pairs.few_pairs_data as data
    from benchmarks.bridge_few_pairs import collect

    asked = []

    def small_set(name, pool=10000, progress=True):
        asked.append(pool)
        rng = np.random.default_rng(0)
        pair = next(p for p in data.FEW_PAIRS if p.item_set == name)
        labels = np.repeat(np.arange(4), 40)
        z = rng.normal(size=(160, 8)) + labels[:, None]
        core = {pair.first: z @ rng.normal(size=(8, 12)), pair.second: z @ rng.normal(size=(8, 12))}
        pools = {e: rng.normal(size=(pool, 12)) for e in core}
        return data.PoolSet(name, core, pools, np.arange(120), np.arange(120, 160), labels, "small")

    monkeypatch.setattr(data, "load_pool_set", small_set)
    monkeypatch.setattr(data, "cache_dir", lambda: tmp_path)
    args = argparse.Namespace(
        budgets="25", pools="1000", seeds=1, table_budgets="", sets="bible-books", paired_only=True, fresh=True
    )
    runs = collect(args)
    assert asked == [1] and len(runs) == 2  # both directions; a one-row pool set loaded, none embedded
    for run in runs:
        assert set(run["library"]["fits"]) == {"index/auto", "scaled_head/auto", "raw_head/auto"}
        assert not run["library"].get("unpaired")


def test_a_worse_pick_is_told_apart_by_its_route_and_paired_only_runs_judge_no_pool_goal():
    runs = [_pooled_run(0.80, 0.70, 0), _pooled_run(0.80, 0.70, 1)]
    runs[1]["library"]["fits"]["index/pool1000"]["route"] = "self_learning"  # a semi-supervised route kept
    line = next(line for line in goal_lines(direction_rows(runs)) if "never worse" in line)
    assert "2 of 2 worse" in line and "(1 with a semi-supervised route kept, 1 with a route without pools" in line
    paired_only = [{**run, "library": {"fits": {"index/auto": run["library"]["fits"]["index/auto"]}}} for run in runs]
    lines = goal_lines(direction_rows(paired_only))  # --paired-only: no pooled fit anywhere
    assert all("NOT JUDGED" in line for line in lines if "anchors with" in line or "never worse" in line)
