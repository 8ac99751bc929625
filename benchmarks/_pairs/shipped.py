"""What the shipped library achieves per run (``_pairs/library.py`` records): the pick of ``Bridge(consumer=c)``
against the best route and the weaker encoder's own score, and whether ``estimate_``'s 90% interval covers what
the pick realises on the test items.

Each fit kind is judged by the figure of the consumer it is meant for (``JUDGED``); its estimate by the realised
figure in the estimate's own units (``recall_pool`` for Recall@k among the estimate's pool; ``agreement`` with a
head). "Best route" is the best realised figure of any route of the run (every route refitted with the
parameters the library chose, and every pick).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from benchmarks._pairs.calibration import interval, realised_unit, shipped_interval

#: fit kind -> the consumer figure that judges it.
JUDGED = {
    "index/auto": "recall10",
    "index/pool": "recall10",
    "index/all": "recall10",
    "scaled_head/auto": "lr_f1",
    "scaled_head/all": "lr_f1",
    "scaled_head/head": "lr_f1",
    "raw_head/auto": "lr_raw_f1",
    "raw_head/all": "lr_raw_f1",
    "raw_head/head": "lr_raw_f1",
}
GOAL = {768: 0.95, 100: 0.90}
TOLERANCE = 0.01
FIGURES = ("recall10", "lr_f1", "lr_raw_f1", "mlp_f1")


def table_cell(value) -> str:
    """A table cell: "-" for none, "k/n" for a count pair, three decimals for a float."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return f"{value[0]}/{value[1]}"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def weaker_own(run: dict, figure: str) -> float:
    if figure == "recall10":
        return 1.0
    own = run.get("own") or {}
    values = [own[side][figure] for side in ("source", "target") if figure in own.get(side, {})]
    return min(values) if values else float("nan")


def best(run: dict, figure: str) -> tuple[float, str]:
    """The best realised ``figure`` of any route of the run (nan without the every-route table: a run that has
    only some fits knows no best route, and its pick is not "within" of anything)."""
    lib = run["library"]
    if not any(figure in r.get("realised", {}) for r in lib.get("routes") or []):
        return float("nan"), "-"
    candidates = [(r["realised"][figure], r["route"]) for r in lib["routes"] if figure in r.get("realised", {})]
    candidates += [(f["realised"][figure], f["route"]) for f in lib["fits"].values() if figure in f["realised"]]
    return max(candidates) if candidates else (float("nan"), "-")


def fit_figures(run: dict, kind: str) -> dict | None:
    lib = run.get("library")
    if not lib or kind not in lib["fits"]:
        return None
    figure = JUDGED[kind]
    fit = lib["fits"][kind]
    if figure not in fit["realised"]:
        return None
    value = fit["realised"][figure]
    top, top_route = best(run, figure)
    own = weaker_own(run, figure)
    run_time = dict(zip(("value", "low", "high"), interval("items", fit), strict=True))  # the estimate before
    est = dict(zip(("value", "low", "high"), shipped_interval({**fit, "consumer": kind.split("/")[0]}), strict=True))
    truth = realised_unit(fit)
    return {
        "route": fit["route"],
        "figure": value,
        "ratio": value / own,
        "best": top,
        "best_route": top_route,
        "best_ratio": top / own,
        "within": None if top != top else bool(top - value <= TOLERANCE + 1e-12),
        "estimate": (est["value"], est["low"], est["high"]),
        "realised": truth,
        "covered": None if truth is None else bool(est["low"] - 1e-9 <= truth <= est["high"] + 1e-9),
        "covered_run_time": None if truth is None else bool(run_time["low"] - 1e-9 <= truth <= run_time["high"] + 1e-9),
        "seconds": fit["seconds"],
    }


def goals(runs: list[dict], kind: str) -> dict:
    """Share within 0.01 of the best, coverage, and per goal budget the directions (mean over seeds) meeting it."""
    within, covered, covered_old, directions, best_dirs = [], [], [], defaultdict(list), defaultdict(list)
    count = 0
    for run in runs:
        f = fit_figures(run, kind)
        if f is None:
            continue
        count += 1
        if f["within"] is not None:
            within.append(f["within"])
        if f["covered"] is not None:
            covered.append(f["covered"])
            covered_old.append(f["covered_run_time"])
        key = (run["source"], run["target"], run["item_set"], run["budget"])
        directions[key].append(f["ratio"])
        best_dirs[key].append(f["best_ratio"])
    out = {
        "runs": count,
        "within": float(np.mean(within)) if within else None,
        "within_of": len(within),  # runs with the every-route table (index/all): only they know the best route
        "coverage": float(np.mean(covered)) if covered else None,
        "coverage_before": float(np.mean(covered_old)) if covered_old else None,
    }
    for budget, goal in GOAL.items():
        means = {k: float(np.mean(v)) for k, v in directions.items() if k[3] == budget}
        if means:
            out[f"meeting_{budget}"] = [sum(m >= goal for m in means.values()), len(means)]
            out[f"worst_{budget}"] = min(means.values())
            known = [[v for v in best_dirs[k] if v == v] for k in means]  # runs with the every-route table
            bests = [float(np.mean(v)) for v in known if v]
            out[f"best_meeting_{budget}"] = [sum(m >= goal for m in bests), len(bests)]
    return out


def route_wins(runs: list[dict]) -> dict[str, dict[str, int]]:
    """Per route: in how many (run, consumer figure) cases it is the best or within 0.01 of the best route."""
    wins: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for run in runs:
        lib = run.get("library")
        if not lib:
            continue
        for figure in FIGURES:
            rows = [r for r in lib["routes"] if figure in r.get("realised", {})]
            if not rows:
                continue
            top = max(r["realised"][figure] for r in rows)
            for r in rows:
                wins[r["route"]]["of"] += 1
                if top - r["realised"][figure] <= TOLERANCE + 1e-12:
                    wins[r["route"]][figure] += 1
    return {route: dict(v) for route, v in wins.items()}


def summary(runs: list[dict]) -> dict:
    """Per half and fit kind, ``goals``; per half, ``route_wins``."""
    out: dict = {}
    for half in ("development", "validation", "fresh", "banked"):
        members = [r for r in runs if r["half"] == half and r.get("library")]
        if members:
            out[half] = {
                "goals": {kind: goals(members, kind) for kind in JUDGED},
                "route_wins": route_wins(members),
            }
    return out


GOAL_COLUMNS = (
    "runs",
    "within",
    "within_of",
    "coverage",
    "coverage_before",
    "meeting_768",
    "worst_768",
    "best_meeting_768",
    "meeting_100",
    "worst_100",
    "best_meeting_100",
)


def tables(runs: list[dict], study: dict) -> list[str]:
    lines = ["## The shipped library (Bridge(consumer=...) as a user fits it)", ""]
    lines += [
        "Fit kinds: `<consumer>/auto` = `Bridge(consumer=c)` with its default routes, `/all` = with every route, "
        "`/head` = `Bridge(consumer=c).fit(..., head=the target's trained head)`. Judged by: index -> Recall@10 "
        "among all items, scaled_head -> macro-F1 of StandardScaler + LR, raw_head -> macro-F1 of LR on raw "
        "vectors. `within`: share of runs whose pick is within 0.01 of the best route of the run, over the "
        "`within_of` runs that have the every-route table (`index/all`; the others know no best route); `coverage`: "
        "share whose `estimate_` 90% interval (as `_estimate.estimate` computes it now, from the run's recorded "
        "held-out hits) covers the realised figure in the estimate's units (Recall@10 among a pool of the estimate's "
        "size; agreement with the head), `coverage_before`: the interval the library gave before this change "
        "(percentile bootstrap over the held-out items only, recomputed from the same hits); `meeting_B`: "
        "directions (mean over seeds) whose pick keeps >= 0.95x (768) / 0.90x (100) of the weaker encoder's own "
        "figure (Recall@10: the figure "
        "itself), `best_meeting_B`: the same for the best route.",
        "",
    ]
    for half, part in study.items():
        lines += [f"### {half.capitalize()} half", ""]
        lines += ["| fit | " + " | ".join(GOAL_COLUMNS) + " |", "|---" * (len(GOAL_COLUMNS) + 1) + "|"]
        for kind, g in part["goals"].items():
            lines.append(f"| {kind} | " + " | ".join(table_cell(g.get(c)) for c in GOAL_COLUMNS) + " |")
        lines.append("")
        wins = part["route_wins"]
        lines += [
            f"Routes best or within 0.01 of the best ({half}; cases = runs x consumer figures):",
            "",
            "| route | cases | recall10 | lr_f1 | lr_raw_f1 | mlp_f1 | total |",
            "|---|---|---|---|---|---|---|",
        ]
        for route, w in sorted(wins.items(), key=lambda kv: -sum(v for k, v in kv[1].items() if k != "of")):
            total = sum(v for k, v in w.items() if k != "of")
            cells = " | ".join(str(w.get(f, 0)) for f in FIGURES)
            lines.append(f"| {route} | {w.get('of', 0)} | {cells} | {total} |")
        lines.append("")
    lines += _direction_lines(runs)
    return lines


def _direction_lines(runs: list[dict]) -> list[str]:
    groups: dict = defaultdict(list)
    for run in runs:
        if run.get("library"):
            groups[(run["half"], run["item_set"], run["source"], run["target"], run["budget"])].append(run)
    kinds = ("index/auto", "index/pool", "scaled_head/auto", "raw_head/auto", "scaled_head/head", "raw_head/head")
    lines = [
        "### Per direction (mean over seeds): pick, its figure / weaker own, best route / weaker own; "
        "estimate [90% interval] vs realised (first seed)",
        "",
        "| half | source -> target (set) | anchors | seeds | " + " | ".join(kinds) + " |",
        "|---" * (4 + len(kinds)) + "|",
    ]
    for (half, item_set, source, target, budget), members in sorted(groups.items()):
        cells = []
        for kind in kinds:
            figures = [f for f in (fit_figures(r, kind) for r in members) if f is not None]
            if not figures:
                cells.append("-")
                continue
            f0 = figures[0]
            ratio = np.mean([f["ratio"] for f in figures])
            known = [f["best_ratio"] for f in figures if f["best_ratio"] == f["best_ratio"]]
            best_ratio = f"{np.mean(known):.3f}" if known else "-"  # "-": no run with the every-route table
            v, lo, hi = f0["estimate"]
            real = "-" if f0["realised"] is None else f"{f0['realised']:.3f}"
            est = f"est {v:.3f} [{lo:.3f}, {hi:.3f}] vs {real}"
            cells.append(f"{f0['route']} {ratio:.3f} / best {best_ratio}; {est}")
        head = f"| {half[:3]} | {source} -> {target} ({item_set}) | {budget} | {len(members)} | "
        lines.append(head + " | ".join(cells) + " |")
    return [*lines, ""]
