"""One run of the benchmark: an ordered pair, an anchor budget and a seed; every route scored without labels on
the anchors (k-fold) and measured by the consumers on the test items."""

from __future__ import annotations

import time
import warnings
import zlib

import numpy as np

from benchmarks._pairs.datasets import ItemSet
from benchmarks._pairs.scores import (
    CANDIDATES,
    agreement,
    head_scores,
    heads,
    label_free,
    pseudo_head,
    pseudo_labels,
    recall_at_10,
)

FOLDS = 5


def route_names() -> list[str]:
    """Every route the library registers that uses the pairs, except the slow ones named in ``SKIPPED``."""
    from latentstitch.bridge import ROUTES

    return [name for name in ROUTES if name not in SKIPPED]


#: Routes not run: ``unpaired`` ignores the pairs (a baseline, minutes per fit), ``sparse_lasso`` (one Lasso per
#: target feature, minutes at 1280 features) and ``functional_map`` (builds k-NN graphs of the anchors; slow).
SKIPPED = ("unpaired", "sparse_lasso", "functional_map")


def anchor_rows(pair_name: str, budget: int, seed: int, train: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng([zlib.crc32(pair_name.encode()), budget, seed])
    return np.sort(rng.choice(train, size=budget, replace=False))


class PairContext:
    """What every run of one ordered pair shares: the spaces, the target's heads for translation routes, the
    encoders' own scores."""

    def __init__(self, items: ItemSet, source: str, target: str):
        self.items, self.source_name, self.target_name = items, source, target
        self.s, self.t = items.vectors[source].astype(np.float64), items.vectors[target].astype(np.float64)
        self.labels = items.labels
        tr, te = items.train, items.test
        self.own: dict[str, dict[str, float]] = {}
        self.target_heads = None
        self.pseudo = pseudo_labels(self.t[tr])
        self.pseudo_head = pseudo_head(self.t[tr], self.pseudo)
        if self.labels is not None:
            self.target_heads = heads(self.t[tr], self.labels[tr], 0)
            self.own["target"] = head_scores(self.target_heads, self.t[te], self.labels[te])
            self.own["source"] = head_scores(heads(self.s[tr], self.labels[tr], 0), self.s[te], self.labels[te])


def _cv_scores(spec, ctx: PairContext, anchors: np.ndarray, seed: int) -> dict[str, float]:
    from latentstitch._core.folds import kfold

    tr = ctx.items.train
    per_fold = []
    for held in kfold(len(anchors), FOLDS, seed, min_rows=5):
        fit_rows = np.setdiff1d(anchors, anchors[held])
        route = spec.build().fit(ctx.s[fit_rows], ctx.t[fit_rows])
        bridged = np.asarray(route.transform(ctx.s[anchors[held]]))
        if spec.family == "relative":
            partner = np.asarray(route.transform_target(ctx.t[anchors[held]]))
            index = np.asarray(route.transform_target(ctx.t[tr]))
        else:
            partner, index = ctx.t[anchors[held]], ctx.t[tr]
        scores = label_free(bridged, partner, index, anchors[held])  # train rows are 0..n_train-1
        head = pseudo_head(index, ctx.pseudo) if spec.family == "relative" else ctx.pseudo_head
        scores["pseudo_agree"] = agreement(head, bridged, partner)
        per_fold.append(scores)
    return {k: float(np.mean([f[k] for f in per_fold])) for k in CANDIDATES}


def run_route(name: str, ctx: PairContext, anchors: np.ndarray, seed: int, cached: dict | None = None) -> dict:
    """The route's label-free scores and consumer figures; with ``cached`` (a row holding the consumer figures but
    not every candidate score), only the scores are recomputed."""
    from latentstitch.bridge import get_route

    spec = get_route(name)
    started = time.perf_counter()
    if cached is not None and "consumers" in cached:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {**cached, "scores": _cv_scores(spec, ctx, anchors, seed)}
    row: dict = {"route": name, "family": spec.family}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            row["scores"] = _cv_scores(spec, ctx, anchors, seed)
            route = spec.build().fit(ctx.s[anchors], ctx.t[anchors])
            tr, te = ctx.items.train, ctx.items.test
            query = np.asarray(route.transform(ctx.s[te]))
            everything = np.arange(len(ctx.t))
            if spec.family == "relative":
                index = np.asarray(route.transform_target(ctx.t))
                trained = None if ctx.labels is None else heads(index[tr], ctx.labels[tr], 0)
            else:
                index, trained = ctx.t, ctx.target_heads
            figures = {"recall10": recall_at_10(query, index, everything[te])}
            if trained is not None:
                figures.update(head_scores(trained, query, ctx.labels[te]))
            row["consumers"] = figures
    except Exception as error:  # a route that cannot fit these anchors is reported, not fatal
        row["error"] = f"{type(error).__name__}: {error}"[:300]
    row["seconds"] = time.perf_counter() - started
    return row


def run_one(ctx: PairContext, pair_name: str, budget: int, seed: int, routes: list[str]) -> dict:
    anchors = anchor_rows(f"{pair_name}:{ctx.source_name}>{ctx.target_name}", budget, seed, ctx.items.train)
    return {
        "budget": budget,
        "seed": seed,
        "routes": [run_route(name, ctx, anchors, seed) for name in routes],
    }
