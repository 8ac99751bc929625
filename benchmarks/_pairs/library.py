"""The library as a user fits it, in one run: ``Bridge(consumer=c)`` for every consumer, with its default routes
("auto") and with every route, its pick, its ``estimate_`` and what that pick realises on the test items.

Per run (ordered pair, anchor budget, seed), on the run's anchors:

- ``fits["<consumer>/<routes>"]`` for consumer in ``index``, ``scaled_head``, ``raw_head`` and routes in ``auto``,
  ``all`` (every route of ``runs.route_names()``), ``index/pool`` ("auto" with ``target_pool=`` all target
  vectors), and ``<consumer>/head`` for the two head consumers fitted with
  ``head=`` (the target's trained head: ``scaled_head`` the standard-scaled LR, ``raw_head`` the raw-vector LR):
  ``route`` (``route_``), ``params``, ``estimate`` (``estimate_.to_dict()``), ``seconds`` and ``realised``;
- ``realised``: the pick applied to the test items: ``recall10`` (own target vector among the 10 nearest of all N
  target vectors), ``recall_pool`` (Recall@k in the estimate's own units: among a pool of ``estimate.pool`` target
  vectors, the item's own and ``pool - 1`` drawn at random from the other items; the exact expectation over the
  draw, from each item's rank among all N), the heads' macro-F1 (``lr_f1``, ``lr_raw_f1``, ``mlp_f1``) and, with a
  head, ``agreement`` (the head's prediction from the bridged vector equals its prediction from the true one);
- ``routes``: every route of the "index/all" fit with the parameters the library chose for it, refitted on all the
  anchors and measured by the same consumers (the per-route consumer table; "best route" = the best of these);
- ``items``: per fit, every route's held-out per-anchor hits (``hit_k``, with a head ``agreement``) as 0/1 strings,
  the chosen route's first (for studying the estimate's interval without refitting), read from the bridge's
  ``cv_results_``; ``parts``: the held-out anchors scored per fold (the estimate's fold sizes).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from benchmarks._pairs.scores import head_scores, heads, recall_at_10

CONSUMERS = ("index", "scaled_head", "raw_head")
HEADS = {"scaled_head": "lr", "raw_head": "lr_raw"}


def _scored_folds(bridge) -> int:
    return sum(1 for key in bridge.cv_results_ if key.startswith("split") and key.endswith("_test_score"))


def held_out_hits(bridge) -> dict[str, np.ndarray]:
    """Every fitted route's held-out per-anchor values from ``bridge.cv_results_``, fold after fold: with a head,
    its agreement; without, the Recall@k hit (what ``estimate_`` averages)."""
    cv, folds = bridge.cv_results_, _scored_folds(bridge)
    return {
        route: np.concatenate([np.asarray(cv[f"split{k}_test_hits"][i], dtype=np.float64) for k in range(folds)])
        for i, route in enumerate(cv["route"])
        if cv["split0_test_hits"][i] is not None
    }


def held_out_classes(bridge) -> np.ndarray | None:
    """With a head, its class of each held-out anchor's true target vector (the order of ``held_out_hits``)."""
    cv, folds = bridge.cv_results_, _scored_folds(bridge)
    if "split0_test_classes" not in cv:
        return None
    return np.concatenate([np.asarray(cv[f"split{k}_test_classes"][0]) for k in range(folds)])


def held_out_sizes(bridge) -> list[int]:
    """The held-out anchors scored per fold."""
    return [len(bridge.cv_results_[f"split{k}_test_rows"][0]) for k in range(_scored_folds(bridge))]


def pool_recall(sims_own_rank: np.ndarray, n: int, pool: int, k: int) -> float:
    """Expected Recall@k when each item's own vector is searched among itself and ``pool - 1`` others drawn at
    random from the ``n - 1`` others; ``sims_own_rank[i]`` = how many of the n - 1 others are nearer than its own."""
    from scipy.stats import hypergeom

    closer = np.clip(np.asarray(sims_own_rank, dtype=np.int64), 0, n - 1)
    return float(np.mean(hypergeom.cdf(k - 1, n - 1, closer, pool - 1)))


def _closer_counts(query: np.ndarray, index: np.ndarray, own: np.ndarray) -> np.ndarray:
    from benchmarks._pairs.scores import own_ranks

    return np.floor(own_ranks(query, index, own) - 1).astype(np.int64)


class Realiser:
    """Applies a fitted bridge to the test items and measures what the consumers get (heads per relative output
    are trained once per distinct fitted relative estimator)."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __call__(self, bridge, head_name: str | None = None, pool=None) -> dict[str, float]:
        """``pool``: the old model's vectors the fit was given as ``target_pool`` (other items): ``recall_pool`` then
        searches the test items among the set's items *and* these, so that it is Recall@k among as many vectors as
        the estimate's (``estimate.pool``), not among the set's own items only."""
        ctx = self.ctx
        tr, te = ctx.items.train, ctx.items.test
        query = np.asarray(bridge.transform(ctx.s[te]), dtype=np.float64)
        relative = bridge.family_ == "relative"
        index = np.asarray(bridge.transform_target(ctx.t), dtype=np.float64) if relative else ctx.t
        everything = np.arange(len(ctx.t))
        out = {"recall10": recall_at_10(query, index, everything[te])}
        estimate = bridge.estimate_
        if estimate is not None:
            k = int(estimate.metric.split("@")[1]) if "@" in estimate.metric else 10
            searched = index
            if pool is not None and estimate.pool > len(index):
                extra = np.asarray(bridge.transform_target(pool) if relative else pool, dtype=np.float64)
                searched = np.concatenate([index, extra])
            closer = _closer_counts(query, searched, everything[te])
            out["recall_pool"] = pool_recall(closer, len(searched), min(estimate.pool, len(searched)), k)
        if ctx.labels is not None:
            trained = heads(index[tr], ctx.labels[tr], 0) if relative else ctx.target_heads
            out.update({k: v for k, v in head_scores(trained, query, ctx.labels[te]).items() if k.endswith("_f1")})
            if head_name is not None:
                head = ctx.target_heads[head_name]
                truth = head.predict(ctx.t[te])
                if relative:  # the user's head cannot read relative vectors: one trained to reproduce it
                    from latentstitch.bridge import LinearHead

                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        mimic = LinearHead().fit(index[tr], head.predict(ctx.t[tr]))
                    out["agreement"] = float(np.mean(mimic.predict(query) == truth))
                else:
                    out["agreement"] = float(np.mean(head.predict(query) == truth))
        return out


def _bits(values) -> str:
    return "".join("1" if v > 0.5 else "0" for v in np.asarray(values).ravel())


def fit_record(ctx, anchors, seed, consumer, routes, realise, head_name=None, pool=None, source_pool=None) -> dict:
    """One ``Bridge(routes=routes, consumer=consumer)`` fit on the run's anchors (``pool``: ``target_pool=``,
    ``source_pool``: ``source_pool=``, passed only when given) and its record."""
    from latentstitch.bridge import Bridge

    started = time.perf_counter()
    s, t = ctx.s[anchors], ctx.t[anchors]
    head = None if head_name is None else ctx.target_heads[head_name].predict
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pools = {} if source_pool is None else {"source_pool": source_pool}
        bridge = Bridge(routes=routes, consumer=consumer, seed=seed).fit(s, t, head=head, target_pool=pool, **pools)
    seconds = time.perf_counter() - started
    chosen = next(r for r in bridge.routes_ if r.chosen)
    hits = held_out_hits(bridge)
    order = [bridge.route_, *[r for r in hits if r != bridge.route_]]
    record = {
        "route": bridge.route_,
        "family": bridge.family_,
        "selection_score": bridge.selection_score_,
        "params": {k: v for k, v in chosen.params.items() if isinstance(v, (int, float, str))},
        "estimate": bridge.estimate_.to_dict(),
        "seconds": seconds,
        "realised": realise(bridge, head_name, pool=pool),
        "table": [
            {
                "route": r.route,
                "error": r.error,
                "score": None if r.score(bridge.selection_score_) is None else r.score(bridge.selection_score_)[0],
                "mrr": None if r.mrr is None else r.mrr[0],
                "clear": r.clearly_better,
            }
            for r in bridge.routes_
        ],
        "items": {r: _bits(hits[r]) for r in order if r in hits},
        "parts": held_out_sizes(bridge),
    }
    return record, bridge


def route_figures(bridge, ctx, anchors, realise) -> list[dict]:
    """Every route of a fitted "all" bridge, refitted on all anchors with the parameters the library chose for it,
    measured by the consumers (dead target features held as the bridge holds them: runs cached before 2026-11-26
    measured the routes without that hold)."""
    from latentstitch.bridge import get_route

    rows = []
    for row in bridge.routes_:
        if row.error:
            rows.append({"route": row.route, "error": row.error})
            continue
        started = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                spec = get_route(row.route)
                estimator = spec.build(**row.params).fit(ctx.s[anchors], ctx.t[anchors])
            view = _Fitted(estimator, spec.family, bridge)
            rows.append(
                {
                    "route": row.route,
                    "family": spec.family,
                    "realised": realise(view),
                    "seconds": time.perf_counter() - started,
                }
            )
        except Exception as error:
            rows.append({"route": row.route, "error": f"{type(error).__name__}: {error}"[:300]})
    return rows


class _Fitted:
    """A route's estimator seen as a bridge by ``Realiser`` (no estimate). ``bridge``: the fitted ``Bridge`` whose
    route table it comes from; a translation route's output holds that bridge's dead target features at their
    anchor mean, as ``Bridge.transform`` does (without, a standard-scaling head divides a route's rounding noise on
    those features by a spread of ~1e-33)."""

    estimate_ = None

    def __init__(self, estimator, family, bridge=None):
        self.estimator_, self.family_ = estimator, family
        if bridge is not None and (bridge.source_scale_, bridge.target_scale_) != (1.0, 1.0):
            raise ValueError("the benchmark refits routes on unscaled anchors; this bridge rescaled them")
        self.held = ([], []) if bridge is None else (bridge.dead_features_, bridge.dead_values_)

    def transform(self, x):
        from latentstitch.bridge.pieces import hold

        out = self.estimator_.transform(x)
        return out if self.family_ == "relative" else hold(out, *self.held)

    def transform_target(self, x):
        return self.estimator_.transform_target(x) if self.family_ == "relative" else x


#: Fit kinds in the order they are run (the shipped defaults first; the every-route fits of the head consumers
#: last, as they cost about ten times as much). ``index/pool``: "auto" with ``target_pool=`` every target vector of
#: the run's items (the old index a user has: anchors left out by the bridge itself).
KINDS = (
    "index/auto",
    "index/pool",
    "scaled_head/auto",
    "raw_head/auto",
    "scaled_head/head",
    "raw_head/head",
    "index/all",
    "scaled_head/all",
    "raw_head/all",
)


def library_record(
    ctx, anchors: np.ndarray, seed: int, all_routes: list[str], kinds=KINDS, done: dict | None = None, log=print
) -> dict:
    """The fits of ``kinds`` missing from ``done`` (a record from the cache), added to it."""
    realise = Realiser(ctx)
    out: dict = done or {"fits": {}, "routes": []}
    for kind in kinds:
        consumer, routes = kind.split("/")
        if kind in out["fits"] or (routes == "head" and ctx.labels is None):
            continue
        head = HEADS[consumer] if routes == "head" else None
        chosen = all_routes if routes == "all" else "auto"
        pool = ctx.t if routes == "pool" else None
        record, bridge = fit_record(ctx, anchors, seed, consumer, chosen, realise, head, pool)
        out["fits"][kind] = record
        log(f"    {kind}: {record['route']} {record['seconds']:.1f}s", flush=True)
        if kind == "index/all":
            out["routes"] = route_figures(bridge, ctx, anchors, realise)
    return out
