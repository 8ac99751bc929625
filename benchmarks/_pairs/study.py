"""Which label-free score ranks the routes as the consumers do (development half), and what the chosen rule
achieves (validation half, evaluated once with the rule fixed from the development half).

Per run (ordered pair, budget, seed) and consumer, over the routes that fitted: the Spearman and Kendall rank
correlation between a candidate score and the consumer's figure, and what picking the route with the highest
score gives: the consumer's figure over the weaker encoder's own figure (both encoders' own heads on their own
vectors; 1 for Recall@10, whose own figure is 1), and whether it is within 0.01 of the best route's.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from scipy.stats import kendalltau, spearmanr

from benchmarks._pairs.scores import CANDIDATES
from benchmarks._pairs.shipped import table_cell, tables

CONSUMERS = ("lr_f1", "lr_raw_f1", "mlp_f1", "recall10")
TOLERANCE = 0.01
GOAL = {768: 0.95, 100: 0.90}
RULES = ("current", *CANDIDATES)


def _valid(run: dict, consumer: str) -> list[dict]:
    return [r for r in run["routes"] if "error" not in r and consumer in r.get("consumers", {})]


def weaker_own(run: dict, consumer: str) -> float:
    if consumer == "recall10":
        return 1.0
    own = run.get("own") or {}
    values = [own[side][consumer] for side in ("source", "target") if side in own and consumer in own[side]]
    return min(values) if values else float("nan")


def current_rule(rows: list[dict]) -> dict:
    """The rule ``Bridge`` ships, re-computed from fold means (its paired standard error is over anchors; here the
    margin is 2 standard errors of the five fold means): translation unless the best relative route's MRR beats
    the best translation route's clearly; within translation the highest standard-scaled R^2, within relative the
    highest MRR."""
    translation = [r for r in rows if r["family"] == "translation"]
    relative = [r for r in rows if r["family"] == "relative"]
    if not translation or not relative:
        pool = translation or relative
        key = "r2_scaled" if translation else "mrr_anchors"
        return max(pool, key=lambda r: r["scores"][key])
    best_t = max(translation, key=lambda r: r["scores"]["mrr_anchors"])
    best_r = max(relative, key=lambda r: r["scores"]["mrr_anchors"])
    margin = best_r["scores"]["mrr_anchors"] - best_t["scores"]["mrr_anchors"]
    spread = max(1 - best_t["scores"]["mrr_anchors"], 1e-3) / math.sqrt(5)
    if margin > 2 * spread:
        return best_r
    return max(translation, key=lambda r: r["scores"]["r2_scaled"])


def pick(rows: list[dict], rule: str) -> dict:
    if rule == "current":
        return current_rule(rows)
    return max(rows, key=lambda r: r["scores"][rule] if np.isfinite(r["scores"][rule]) else -np.inf)


def run_figures(run: dict, consumer: str, rule: str) -> dict | None:
    rows = _valid(run, consumer)
    if len(rows) < 2:
        return None
    values = np.array([r["consumers"][consumer] for r in rows])
    chosen = pick(rows, rule)
    figure = chosen["consumers"][consumer]
    out = {
        "picked": chosen["route"],
        "figure": figure,
        "best": float(values.max()),
        "best_route": rows[int(values.argmax())]["route"],
        "ratio": figure / weaker_own(run, consumer),
        "within": bool(values.max() - figure <= TOLERANCE + 1e-12),
    }
    if rule != "current":
        scores = np.array([r["scores"][rule] for r in rows])
        if np.ptp(scores) > 0 and np.ptp(values) > 0 and np.all(np.isfinite(scores)):
            out["spearman"] = float(spearmanr(scores, values).statistic)
            out["kendall"] = float(kendalltau(scores, values).statistic)
    return out


def summarise(runs: list[dict], consumer: str, rule: str) -> dict:
    """Mean rank correlation (per pair first, then over pairs), share within 0.01 of the best, and the worst
    direction's mean ratio (over seeds) at each goal budget."""
    per_pair = defaultdict(list)
    within, directions = [], defaultdict(list)
    for run in runs:
        f = run_figures(run, consumer, rule)
        if f is None:
            continue
        within.append(f["within"])
        directions[(run["source"], run["target"], run["pair"], run["budget"])].append(f["ratio"])
        if "spearman" in f:
            per_pair[run["pair"]].append((f["spearman"], f["kendall"]))
    pairs = [np.mean(v, axis=0) for v in per_pair.values()]
    out = {
        "spearman": float(np.mean([p[0] for p in pairs])) if pairs else None,
        "kendall": float(np.mean([p[1] for p in pairs])) if pairs else None,
        "within": float(np.mean(within)) if within else None,
        "runs": len(within),
    }
    for budget, goal in GOAL.items():
        means = [float(np.mean(v)) for k, v in directions.items() if k[3] == budget]
        if means:
            out[f"worst_ratio_{budget}"] = min(means)
            out[f"directions_meeting_{budget}"] = [sum(m >= goal for m in means), len(means)]
    return out


def choose(development: list[dict]) -> dict[str, str]:
    """Per consumer, the candidate score with the highest mean development Spearman (ties: more runs within
    0.01)."""
    chosen = {}
    for consumer in CONSUMERS:
        table = {rule: summarise(development, consumer, rule) for rule in CANDIDATES}
        ranked = [r for r in CANDIDATES if table[r]["spearman"] is not None]
        if ranked:
            chosen[consumer] = max(ranked, key=lambda r: (round(table[r]["spearman"], 3), table[r]["within"] or 0))
    return chosen


def study(runs: list[dict]) -> dict:
    development = [r for r in runs if r["half"] == "development"]
    validation = [r for r in runs if r["half"] == "validation"]
    out: dict = {"development": {}, "chosen": choose(development) if development else {}, "validation": {}}
    for consumer in CONSUMERS:
        out["development"][consumer] = {rule: summarise(development, consumer, rule) for rule in RULES}
        if validation and consumer in out["chosen"]:
            rules = ("current", out["chosen"][consumer])
            out["validation"][consumer] = {rule: summarise(validation, consumer, rule) for rule in rules}
    return out


def table(results: dict) -> str:
    study_ = results["study"]
    lines = ["# Bridge generalisation: which label-free score predicts the consumer", ""]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines += ["", f"Split ({results['split_rule']}):", ""]
    for half, names in results["split"].items():
        lines.append(f"- {half}: {', '.join(names)}")
    columns = [
        "spearman",
        "kendall",
        "within",
        "worst_ratio_768",
        "directions_meeting_768",
        "worst_ratio_100",
        "directions_meeting_100",
        "runs",
    ]
    for half in ("development", "validation"):
        if not study_.get(half):
            continue
        lines += ["", f"## {half.capitalize()} half", ""]
        for consumer, rules in study_[half].items():
            lines += [
                f"### {consumer}",
                "",
                "| rule | " + " | ".join(columns) + " |",
                "|---" * (len(columns) + 1) + "|",
            ]
            for rule, s in rules.items():
                lines.append(f"| {rule} | " + " | ".join(table_cell(s.get(c)) for c in columns) + " |")
            lines.append("")
    lines += [
        "Chosen on the development half (per consumer): " + ", ".join(f"{c}: {r}" for c, r in study_["chosen"].items()),
        "",
    ]
    lines += tables(results["runs"], results.get("shipped", {}))
    old = [r for r in results["runs"] if r["routes"]]
    lines += _direction_table(old, study_["chosen"])
    lines += _run_table(old, study_["chosen"])
    return "\n".join(lines) + "\n"


def _run_table(runs: list[dict], chosen: dict[str, str]) -> list[str]:
    lines = ["## Every run: the chosen rule's pick per consumer (figure / weaker own; best route)", ""]
    lines += [
        "| half | source -> target (set) | anchors | seed | " + " | ".join(CONSUMERS) + " |",
        "|---" * (4 + len(CONSUMERS)) + "|",
    ]
    for run in runs:
        cells = []
        for consumer in CONSUMERS:
            f = run_figures(run, consumer, chosen.get(consumer, "current"))
            cells.append(
                "-"
                if f is None
                else f"{f['picked']} {f['figure']:.3f} ({f['ratio']:.2f}); {f['best_route']} {f['best']:.3f}"
            )
        lines.append(
            f"| {run['half'][:3]} | {run['source']} -> {run['target']} ({run['item_set']}) | {run['budget']} "
            f"| {run['seed']} | " + " | ".join(cells) + " |"
        )
    return lines


def _direction_table(runs: list[dict], chosen: dict[str, str]) -> list[str]:
    """Per direction and budget, mean over seeds: the chosen rule's pick, the current rule's and the best route's
    figure over the weaker encoder's own (Recall@10: the figure itself)."""
    groups: dict = defaultdict(list)
    for run in runs:
        groups[(run["half"], run["source"], run["target"], run["item_set"], run["budget"])].append(run)
    lines = ["## Per direction (mean over seeds): chosen rule / current rule / best route, over the weaker own", ""]
    lines += [
        "| half | source -> target (set) | anchors | seeds | " + " | ".join(CONSUMERS) + " |",
        "|---" * (4 + len(CONSUMERS)) + "|",
    ]
    for (half, source, target, item_set, budget), members in sorted(groups.items()):
        cells = []
        for consumer in CONSUMERS:
            figures = [
                (run_figures(r, consumer, chosen.get(consumer, "current")), run_figures(r, consumer, "current"))
                for r in members
            ]
            figures = [(a, b) for a, b in figures if a is not None]
            if not figures:
                cells.append("-")
                continue
            own = weaker_own(members[0], consumer)
            ratio = np.mean([a["ratio"] for a, _ in figures])
            current = np.mean([b["ratio"] for _, b in figures])
            best = np.mean([a["best"] / own for a, _ in figures])
            cells.append(f"{ratio:.3f} / {current:.3f} / {best:.3f}")
        lines.append(
            f"| {half[:3]} | {source} -> {target} ({item_set}) | {budget} | {len(members)} | "
            + " | ".join(cells)
            + " |"
        )
    return [*lines, ""]
