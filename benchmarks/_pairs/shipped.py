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

#: fit kind -> the consumer figure that judges it.
JUDGED = {
    "index/auto": "recall10",
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


def weaker_own(run: dict, figure: str) -> float:
    if figure == "recall10":
        return 1.0
    own = run.get("own") or {}
    values = [own[side][figure] for side in ("source", "target") if figure in own.get(side, {})]
    return min(values) if values else float("nan")


def best(run: dict, figure: str) -> tuple[float, str]:
    lib = run["library"]
    candidates = [(r["realised"][figure], r["route"]) for r in lib["routes"] if figure in r.get("realised", {})]
    candidates += [(f["realised"][figure], f["route"]) for f in lib["fits"].values() if figure in f["realised"]]
    return max(candidates) if candidates else (float("nan"), "-")


def realised_unit(fit: dict) -> float | None:
    return fit["realised"].get("agreement" if fit["estimate"]["metric"] == "agreement" else "recall_pool")


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
    est = fit["estimate"]
    truth = realised_unit(fit)
    return {
        "route": fit["route"],
        "figure": value,
        "ratio": value / own,
        "best": top,
        "best_route": top_route,
        "best_ratio": top / own,
        "within": bool(top - value <= TOLERANCE + 1e-12),
        "estimate": (est["value"], est["low"], est["high"]),
        "realised": truth,
        "covered": None if truth is None else bool(est["low"] - 1e-9 <= truth <= est["high"] + 1e-9),
        "seconds": fit["seconds"],
    }


def goals(runs: list[dict], kind: str) -> dict:
    """Share within 0.01 of the best, coverage, and per goal budget the directions (mean over seeds) meeting it."""
    within, covered, directions, best_dirs = [], [], defaultdict(list), defaultdict(list)
    for run in runs:
        f = fit_figures(run, kind)
        if f is None:
            continue
        within.append(f["within"])
        if f["covered"] is not None:
            covered.append(f["covered"])
        key = (run["source"], run["target"], run["item_set"], run["budget"])
        directions[key].append(f["ratio"])
        best_dirs[key].append(f["best_ratio"])
    out = {
        "runs": len(within),
        "within": float(np.mean(within)) if within else None,
        "coverage": float(np.mean(covered)) if covered else None,
    }
    for budget, goal in GOAL.items():
        means = {k: float(np.mean(v)) for k, v in directions.items() if k[3] == budget}
        if means:
            out[f"meeting_{budget}"] = [sum(m >= goal for m in means.values()), len(means)]
            out[f"worst_{budget}"] = min(means.values())
            bests = [float(np.mean(best_dirs[k])) for k in means]
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
