"""How far "within 0.01 of the best route" can be met at all: the routes as a ``head=`` user gets them, and the noise
of the test figure the goal is judged by (heads and the index).

For a run with the every-route table (``index/all``) and a ``<consumer>/head`` fit, every route is refitted on the
run's anchors with the parameter ``Bridge(routes=every route, consumer=c).fit(..., head=)`` chooses for it (on
agreement, as the ``/head`` pick's own) and each test item's class is predicted the way a user holding only the old
model's head can: translation routes feed the head itself; a relative route feeds a head trained to reproduce the
user's head on the relative vectors of the old model's training items (no true labels; as ``Realiser`` measures
``agreement``). The benchmark's ``lr_f1`` / ``lr_raw_f1`` of a relative route instead retrain the head with the true
labels: a figure a user with only ``head=`` cannot get.

The index (``index/pool``'s pick) is studied the same way with each test item's hit (its own target vector among
the 10 nearest of all target vectors; every route as ``Bridge(routes=every route)`` parametrises it, the pick's
route too, so its figure can differ a little from the ``index/pool`` fit's own).

Figures per run (macro-F1 of those predictions against the true labels; for the index, Recall@10):

- ``fair_within``: the pick within 0.01 of the best route a ``head=`` user can have (full test set);
- split halves (``DRAWS`` random halves of the test items): ``oracle_within``, the route with the best macro-F1 on
  one half (chosen *with* the test labels) within 0.01 of the best route on the other half; ``pick_within``, the
  label-free pick within 0.01 on that same other half. The oracle's share is what the test figure's own noise allows
  a rule to reach (an upper bound for any label-free rule judged on half the items; the full set halves the variance
  of the judging figure, not of a rule's own choice);
- bootstrap (``DRAWS`` resamples of the test items, their full size): ``oracle_within_boot``, the route best on the
  whole test set within 0.01 of the best route of a resample (a rule that knew each route's expected figure exactly,
  judged as the benchmark judges, on a test set of this size); ``pick_within_boot``, the pick the same way.
"""

from __future__ import annotations

import warnings

import numpy as np

from benchmarks._pairs.library import HEADS, _Fitted, held_out_classes, held_out_hits
from benchmarks._pairs.shipped import TOLERANCE

DRAWS = 200
#: consumer -> the fit kind whose pick is studied.
KIND = {"index": "index/pool", "scaled_head": "scaled_head/head", "raw_head": "raw_head/head"}


def macro_f1(predicted: np.ndarray, truth: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Macro-F1 over the classes present in the truth or the predictions of each subset, as scikit-learn's
    ``f1_score(average="macro")``: ``predicted`` (routes, n), ``truth`` (n,) int, ``masks`` (subsets, n) bool, or
    counts (a bootstrap resample) -> (routes, subsets)."""
    classes = int(max(predicted.max(), truth.max())) + 1
    eye = np.eye(classes, dtype=np.float64)
    true_hot = eye[truth]  # (n, K)
    pred_hot = eye[predicted]  # (routes, n, K)
    m = masks.astype(np.float64)
    true_count = m @ true_hot  # (subsets, K)
    pred_count = np.einsum("sn,rnk->rsk", m, pred_hot)
    hits = np.einsum("sn,rnk->rsk", m, pred_hot * true_hot[None])
    denominator = pred_count + true_count[None]
    present = denominator > 0
    f1 = np.divide(2 * hits, denominator, out=np.zeros_like(hits), where=present)
    return f1.sum(-1) / present.sum(-1)


def _refitted(ctx, anchors: np.ndarray, seed: int, consumer: str, head=None):
    """(route, its refitted view) for every route ``Bridge(routes=every route, consumer=c).fit(..., head=)`` fits,
    each with the parameter that fit chose for it; and, with a head, what a rule reading agreement sees: the head's
    class of each held-out anchor's true vector and each route's per-anchor agreement (same order), else None."""
    from benchmarks._pairs.runs import route_names
    from latentstitch.bridge import Bridge, get_route

    s, t = ctx.s[anchors], ctx.t[anchors]
    views = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = Bridge(routes=route_names(), consumer=consumer, seed=seed).fit(s, t, head=head)
        for row in bridge.routes_:
            if not row.error:
                spec = get_route(row.route)
                views.append((row.route, _Fitted(spec.build(**row.params).fit(s, t), spec.family, bridge)))
    classes = held_out_classes(bridge)
    if classes is None:
        return views, None
    return views, (classes, held_out_hits(bridge))


def _row_of(names: list[str], route: str, kind: str) -> int:
    if route not in names:
        raise ValueError(f"the {kind} pick {route!r} failed in the every-route refit")
    return names.index(route)


def head_predictions(ctx, anchors: np.ndarray, seed: int, library: dict, consumer: str):
    """Per route, the fixed head's test-item classes (a relative route: a head trained to mimic it), and the row of
    the ``/head`` pick."""
    from latentstitch.bridge import LinearHead

    head = ctx.target_heads[HEADS[consumer]]
    tr, te = ctx.items.train, ctx.items.test
    wanted = head.predict(ctx.t[tr])
    names, rows = [], []
    views, cv = _refitted(ctx, anchors, seed, consumer, head.predict)
    for name, view in views:
        query = np.asarray(view.transform(ctx.s[te]), dtype=np.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if view.family_ == "relative":  # the user's head cannot read relative vectors: one trained to mimic it
                index = np.asarray(view.transform_target(ctx.t), dtype=np.float64)
                rows.append(np.asarray(LinearHead().fit(index[tr], wanted).predict(query)))
            else:
                rows.append(np.asarray(head.predict(query)))
        names.append(name)
    pick = _row_of(names, library["fits"][f"{consumer}/head"]["route"], f"{consumer}/head")
    return names, np.stack(rows), pick, rule_rows(names, *cv)


def index_hits(ctx, anchors: np.ndarray, seed: int, library: dict, kind: str = "index/pool"):
    """Per route, each test item's hit (its own target vector among the 10 nearest of all target vectors), and the
    row of the ``kind`` pick's route (each route with the parameter the every-route fit chose for it)."""
    from benchmarks._pairs.scores import own_ranks

    te = ctx.items.test
    names, rows = [], []
    for name, view in _refitted(ctx, anchors, seed, "index")[0]:
        query = np.asarray(view.transform(ctx.s[te]), dtype=np.float64)
        index = np.asarray(view.transform_target(ctx.t), dtype=np.float64)
        rows.append(own_ranks(query, index, te) <= 10)
        names.append(name)
    return names, np.stack(rows).astype(np.float64), _row_of(names, library["fits"][kind]["route"], kind)


#: Routes a rule could always take instead of choosing (the study's fixed baselines).
FIXED = ("procrustes", "ridge_raw")


def rule_rows(names: list[str], classes: np.ndarray, bits: dict[str, np.ndarray]) -> dict[str, int]:
    """The row each head rule picks, from the fit's held-out agreement: ``agreement`` (the share of held-out
    anchors on which the head agrees; the library's rule, ties here by route order where the library's go to the
    higher MRR), ``balanced`` (the same per class of the head's prediction on the true vector, averaged over the
    classes: macro-F1 weighs classes equally, plain agreement by their frequency), and the fixed routes."""
    candidates = [r for r in names if r in bits]
    classes = np.asarray(classes)
    present = np.unique(classes)

    def balanced(route: str) -> float:
        values = np.asarray(bits[route], dtype=np.float64)
        return float(np.mean([values[classes == c].mean() for c in present]))

    out = {}
    if candidates:
        out["agreement"] = names.index(max(candidates, key=lambda r: float(np.mean(bits[r]))))
        out["balanced"] = names.index(max(candidates, key=balanced))
    out.update({f"fixed {r}": names.index(r) for r in FIXED if r in names})
    return out


def f1_figure(predicted: np.ndarray, truth: np.ndarray):
    """``weights -> (routes, subsets)`` macro-F1 of ``predicted`` (routes, n) against ``truth`` (n,)."""
    classes = np.unique(np.concatenate([truth, predicted.ravel()]))
    p, y = np.searchsorted(classes, predicted), np.searchsorted(classes, truth)
    return lambda weights: macro_f1(p, y, weights)


def mean_figure(hits: np.ndarray):
    """``weights -> (routes, subsets)`` weighted mean of per-item ``hits`` (routes, n)."""
    return lambda weights: hits @ weights.T.astype(np.float64) / weights.sum(1)


def noise_figures(names: list[str], figure, pick: int, n: int, seed: int = 0, rules: dict | None = None) -> dict:
    """The run's figures (module docstring): ``figure(weights (subsets, n)) -> (routes, subsets)``; ``rules``: the
    row each alternative rule picks (``rule_rows``), judged like the pick on the full test set."""
    full = figure(np.ones((1, n), dtype=bool))[:, 0]
    rng = np.random.default_rng(seed)
    halves = np.zeros((DRAWS, n), dtype=bool)
    for d in range(DRAWS):
        halves[d, rng.permutation(n)[: n // 2]] = True
    first, second = figure(halves), figure(~halves)  # (routes, draws)
    oracle = first.argmax(0)
    best_second = second.max(0)
    columns = np.arange(DRAWS)
    resampled = figure(rng.multinomial(n, np.full(n, 1.0 / n), size=DRAWS))  # (routes, draws)
    best_resampled = resampled.max(0)
    top = int(full.argmax())
    return {
        "routes": names,
        "full": [float(v) for v in full],
        "fair_best": float(full[top]),
        "fair_best_route": names[top],
        "pick": float(full[pick]),
        "pick_route": names[pick],
        "fair_within": bool(full[top] - full[pick] <= TOLERANCE + 1e-12),
        "oracle_within": float(np.mean(best_second - second[oracle, columns] <= TOLERANCE + 1e-12)),
        "pick_within": float(np.mean(best_second - second[pick] <= TOLERANCE + 1e-12)),
        "oracle_within_boot": float(np.mean(best_resampled - resampled[top] <= TOLERANCE + 1e-12)),
        "pick_within_boot": float(np.mean(best_resampled - resampled[pick] <= TOLERANCE + 1e-12)),
        "test_items": int(n),
        "rules": {
            name: {"route": names[row], "within": bool(full[top] - full[row] <= TOLERANCE + 1e-12)}
            for name, row in (rules or {}).items()
        },
    }


def _groups(runs: list[dict], keep=lambda figures: True) -> list[tuple[tuple, list[tuple[dict, dict]]]]:
    """The runs' ``head_noise`` figures grouped by (half, consumer, budget), largest budget first: [(key, [(run,
    figures), ...]), ...], only the figures ``keep`` accepts."""
    groups: dict[tuple, list] = {}
    for run in runs:
        for consumer, figures in (run.get("head_noise") or {}).items():
            if keep(figures):
                groups.setdefault((run["half"], consumer, run["budget"]), []).append((run, figures))
    return sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[0][2]))


def noise_table(runs: list[dict]) -> list[str]:
    """Per half, head consumer and budget: the pick within 0.01 as judged by the benchmark (against a best route
    whose relative heads were retrained with labels) and against the best route a ``head=`` user can have, and the
    noise ceilings (module docstring). Means over runs."""
    from benchmarks._pairs.shipped import JUDGED, fit_figures

    lines = [
        "| half | fit (figure) | anchors | runs | test items | within (benchmark's best) | within (a head= "
        "user's best) | best - pick | pick within, resampled | oracle within, resampled | pick within, halves | "
        "oracle within, halves |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (half, consumer, budget), rows in _groups(runs):
        figures = [f for _, f in rows]
        judged = [fit_figures(run, KIND[consumer]) for run, _ in rows]
        judged = [j["within"] for j in judged if j is not None and j["within"] is not None]

        def mean(key, figures=figures):
            return f"{np.mean([f[key] for f in figures]):.3f}"

        lines.append(
            f"| {half} | {KIND[consumer]} ({JUDGED[KIND[consumer]]}) | {budget} | {len(rows)} | "
            f"{int(np.median([f['test_items'] for f in figures]))} | "
            f"{np.mean(judged):.3f} | {mean('fair_within')} | "
            f"{np.mean([f['fair_best'] - f['pick'] for f in figures]):.3f} | {mean('pick_within_boot')} | "
            f"{mean('oracle_within_boot')} | {mean('pick_within')} | {mean('oracle_within')} |"
        )
    return lines


def rules_table(runs: list[dict]) -> list[str]:
    """Per half, head consumer and budget (runs that recorded the rules): the share of runs whose rule's route is
    within 0.01 of the best route a ``head=`` user can have (full test set)."""
    groups = _groups(runs, lambda figures: bool(figures.get("rules")))
    if not groups:
        return []
    columns = list(dict.fromkeys(name for _, rows in groups for _, f in rows for name in f["rules"]))
    lines = [
        "| half | fit | anchors | runs | the library's pick | " + " | ".join(columns) + " |",
        "|---|---|---|---|---|" + "---|" * len(columns),
    ]
    for (half, consumer, budget), rows in groups:
        rows = [f for _, f in rows]
        cells = [f"{np.mean([f['rules'][c]['within'] for f in rows if c in f['rules']]):.3f}" for c in columns]
        pick = np.mean([f["fair_within"] for f in rows])
        lines.append(f"| {half} | {KIND[consumer]} | {budget} | {len(rows)} | {pick:.3f} | " + " | ".join(cells) + " |")
    return lines
