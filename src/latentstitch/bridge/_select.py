"""The selection rule: which route a bridge keeps, from the cross-validated route table, without labels.

``SELECTION_SCORE`` names the held-out score the rule reads (one of ``SELECTABLE``); it also chooses each route's
own parameter (the ridge penalty on the ridge path, the rank of the low-rank route), so a route's parameter and the
route are chosen on the same score. Changing the rule is changing that one line (the benchmark
``python -m benchmarks bridge_generalisation`` studies which score ranks routes as the consumers do).

Scores (all on held-out anchors, against every target vector given): ``mrr`` (reciprocal rank of the own partner),
``top1``, ``recall_at_k`` (own partner among the k most similar: what the old index returns), ``knn_jaccard``
(neighbourhood agreement with the target), ``r2`` (variance-weighted R^2 in the target's own units; translation
routes only, relative routes then rank last), ``r2_scaled`` (R^2 with every target feature standard-scaled: what a
consumer that standard-scales its input reads, where near-dead features count fully), ``cosine``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from latentstitch.bridge._estimate import SAME_ITEMS
from latentstitch.bridge._results import RouteScore

SELECTABLE = ("mrr", "top1", "recall_at_k", "knn_jaccard", "r2", "r2_scaled", "cosine")
#: The score the label-free rule reads for each kind of consumer (``Bridge(consumer=...)``), chosen on the
#: development half of ``benchmarks/bridge_generalisation.py`` (results/bridge/generalisation): the score whose
#: ranking of the routes best matched that consumer's ranking there.
#: - "index": a nearest-neighbour index (Recall@10): MRR of the own partner among all target vectors (Spearman
#:   0.93 with the index's ranking; the pick within 0.01 of the best route in 83% of development runs, 77% on the
#:   validation half, against 18% for the previous rule);
#: - "scaled_head": a classifier that standard-scales its input (LinearHead, StandardScaler + LR or MLP): R^2 of
#:   standard-scaled target features, where near-dead features count fully (development: Spearman 0.48 with the
#:   scaled LR head's ranking, pick within 0.01 of the best in 50% of runs; the previous rule, which read this score
#:   within translation routes and kept a relative route only when clearly better on MRR, 70% on development and
#:   78% on validation; MRR-based picks 5-10%: no score predicts this consumer well, so pass ``head=`` when you have
#:   the head);
#: - "raw_head": a classifier on the raw vectors: neighbourhood agreement (development pick; validation 61% vs 17%).
#: The score study ran on the routes main had before ridge_raw, low_rank, mlp_adapter and ensemble. The shipped
#: library was then judged as a user fits it (``Bridge(consumer=c)``, every route added; "The shipped library" in
#: results/bridge/generalisation/results.md): "index" keeps its pick within 0.01 of the best route in 91% of
#: development and 71% of validation runs; "scaled_head" and "raw_head" without a head in 21-56% (their scores do not
#: rank routes as a fixed head does; and a scikit-learn StandardScaler head, which does not floor near-dead features
#: as ``LinearHead`` does, collapses on the ensemble's pick when the target is MiniLM-L6): with a head, pass
#: ``head=``.
CONSUMER_SCORES = {"index": "mrr", "scaled_head": "r2_scaled", "raw_head": "knn_jaccard"}
CONSUMERS = tuple(CONSUMER_SCORES)
#: The score read when nothing is said about the consumer (an index: the job most users have).
SELECTION_SCORE = CONSUMER_SCORES["index"]


def rule_sentence(score: str = SELECTION_SCORE, with_head: bool = False) -> str:
    """The rule in one sentence."""
    if with_head:
        return (
            "Chosen: the route whose bridged held-out anchors the given head classifies most often as it classifies "
            "their true target vectors (agreement); ties: the higher MRR, then the route order."
        )
    return (
        f"Chosen: among the routes clearly better than shuffled pairs, the highest held-out {_WORDS[score]}; ties: "
        "the higher MRR, then the route order."
    )


_WORDS = {
    "mrr": "MRR (a bridged anchor's own partner ranked among all target vectors)",
    "top1": "top-1 (a bridged anchor's nearest target vector is its own partner)",
    "recall_at_k": "Recall@k (a bridged anchor's own partner among its k nearest target vectors)",
    "knn_jaccard": "neighbourhood agreement (k nearest target vectors of the bridged vs the true vector)",
    "r2": "R^2 in the target's own units",
    "r2_scaled": "R^2 of standard-scaled target features (what a standard-scaling head reads)",
    "cosine": "cosine to the own partner",
}


def _value(row: RouteScore, score: str) -> float:
    value = row.score(score)
    return -math.inf if value is None or value[0] != value[0] else value[0]


def rank_routes(rows: Sequence[RouteScore], score: str = SELECTION_SCORE) -> tuple[list[RouteScore], bool]:
    """Every route in the rule's order (the first is the one it keeps) and whether that one is clearly better than
    shuffled pairs: the routes clearly better than shuffled pairs (``clearly_better``) first, or every fitted route
    when none is; within them the highest mean held-out ``score``, ties to the higher MRR, then the earlier route;
    the routes that failed to fit last."""
    if score not in (*SELECTABLE, "agreement"):
        raise ValueError(f"score: expected one of {', '.join(SELECTABLE)} or 'agreement', got {score!r}")
    fitted = [r for r in rows if r.fitted]
    if not fitted:
        raise ValueError("routes: no route could be fitted: " + "; ".join(f"{r.route}: {r.error}" for r in rows))
    clear = any(r.clearly_better for r in fitted)
    order = {id(r): i for i, r in enumerate(rows)}

    def key(r: RouteScore) -> tuple:
        return (clear and r.clearly_better, round(_value(r, score), 12), _value(r, "mrr"), -order[id(r)])

    ranked = sorted(fitted, key=key, reverse=True)
    return ranked + [r for r in rows if not r.fitted], clear


#: One-sided level of the test a semi-supervised route (fitted with ``Bridge.fit``'s pools) must pass to be kept over
#: the best route fitted without them: the per-fold differences of the selection score on the same held-out folds,
#: Student's t with folds - 1 degrees of freedom. The pools must not hurt when they do not help (issue 39): a pool
#: route tried beside the others is one more candidate for the noise of the folds to favour.
POOL_LEVEL = 0.05


@dataclass(frozen=True)
class PoolTest:
    """The comparison of the best pool route with the best route without pools on the same folds: the mean per-fold
    difference of ``score``, its standard error, the threshold it had to exceed, and whether the pool route is kept."""

    pooled: str
    paired: str
    score: str
    difference: float
    standard_error: float
    threshold: float
    kept: bool

    def sentence(self) -> str:
        verdict = "kept" if self.kept else "not kept"
        return (
            f"{self.pooled} (fitted with the pools) was {verdict}: held out it differs from {self.paired} (the best "
            f"route without them) by {self.difference:+.4f} {self.score} per fold (SE {self.standard_error:.4f}); "
            f"kept only above {self.threshold:.4f} (one-sided t-test at {POOL_LEVEL:g})"
        )


def pool_test(pooled: RouteScore, paired: RouteScore, pooled_folds, paired_folds, score: str) -> PoolTest:
    """Whether ``pooled`` (a semi-supervised route the rule ranked first) beats ``paired`` (the rule's pick among the
    routes without pools) by more than the folds' noise: one-sided paired t-test on the per-fold values of
    ``score`` (``pooled_folds``, ``paired_folds``: one value per fold, the same folds). Without per-fold values of
    both, or with fewer than two folds, the pool route is not kept."""
    from scipy import stats

    a = np.asarray(pooled_folds if pooled_folds is not None else [], dtype=np.float64)
    b = np.asarray(paired_folds if paired_folds is not None else [], dtype=np.float64)
    if a.shape != b.shape or a.size < 2 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return PoolTest(pooled.route, paired.route, score, math.nan, math.nan, math.nan, False)
    d = a - b
    se = float(d.std(ddof=1) / math.sqrt(d.size))
    threshold = float(stats.t.ppf(1.0 - POOL_LEVEL, d.size - 1)) * se
    mean = float(d.mean())
    return PoolTest(pooled.route, paired.route, score, mean, se, threshold, mean > 0 and mean > threshold)


def select_route(rows: Sequence[RouteScore], score: str = SELECTION_SCORE) -> tuple[RouteScore, bool]:
    """The route the rule keeps and whether it is clearly better than shuffled pairs (``rank_routes``' first).

    Pool: the fitted routes clearly better than shuffled pairs (``clearly_better``), or every fitted route when none
    is. Pick: the highest mean held-out ``score`` (``"agreement"`` when a head was given); ties: the higher MRR,
    then the earlier route.
    """
    ranked, clear = rank_routes(rows, score)
    return ranked[0], clear


@dataclass(frozen=True)
class Criterion:
    """How a bridge chooses its route, decided once per fit (``Criterion.of``) and read everywhere else.

    ``score``: what the choice, every route's own parameter and the anchor budget compare (``"agreement"`` with a
    head, else the consumer's label-free score, ``CONSUMER_SCORES``); ``with_head``: whether a head was given;
    ``legacy``: a bridge saved before the rule became ``select_route`` (it did not record its score).
    """

    score: str = SELECTION_SCORE
    with_head: bool = False
    legacy: bool = False

    @classmethod
    def of(cls, score: str, head: Any) -> Criterion:
        """The criterion of a fit reading the label-free ``score`` when no ``head`` is given."""
        return cls("agreement", True) if head is not None else cls(score)

    @classmethod
    def of_bridge(cls, bridge: Any) -> Criterion:
        """The criterion a fitted (or loaded) bridge was chosen by, from its ``criterion_`` and ``selection_score_``."""
        with_head = bridge.criterion_ == "agreement"
        if not hasattr(bridge, "selection_score_"):
            return cls("agreement" if with_head else "mrr", with_head, legacy=True)
        return cls(bridge.selection_score_, with_head)

    @property
    def name(self) -> str:
        """``Bridge.criterion_``: "agreement" (with a head) or "label-free"."""
        return "agreement" if self.with_head else "label-free"

    @property
    def item(self) -> str:
        """The per-item held-out value ``estimate_`` averages: the head's agreement, or the own partner among the k
        nearest target vectors (Recall@k's hit)."""
        return "agreement" if self.with_head else "hit_k"

    def metric(self, k: int) -> str:
        """``estimate_``'s metric: "agreement", or "recall@k"."""
        return "agreement" if self.with_head else f"recall@{k}"

    @property
    def same_items(self) -> bool:
        """Whether the score ranks routes on the very items the estimate reads (its winner's curse is removed)."""
        return self.score in SAME_ITEMS

    def sentence(self) -> str:
        """The rule in one sentence (``rule_sentence``)."""
        return rule_sentence(self.score, with_head=self.with_head)

    def rule(self) -> str:
        """The rule in full (``Bridge.selection_rule``)."""
        return LEGACY_RULES[self.with_head] if self.legacy else SELECTION_RULE.format(rule=self.sentence())


#: The rule in words (``Bridge.selection_rule``): ``{rule}`` is the consumer's sentence (``rule_sentence``).
SELECTION_RULE = (
    "Each route is fitted on k-1 folds of the anchor pairs and scored on the held-out fold, each held-out anchor "
    "against every target vector given. Eligible: the routes clearly better than shuffled pairs (pooled held-out "
    "MRR at least 3 standard errors above the MRR of shuffled pairs, H_N/N; when none is, every route, and a "
    "warning says the bridge is not reliable). {rule} A route's own parameter (ridge penalty, rank) is chosen on "
    "the same score."
)


#: The rule of the versions before ``select_route``, for bridges they saved.
LEGACY_RULES = {
    False: "Each route is fitted on k-1 folds of the anchor pairs and scored on the held-out fold. Eligible: the "
    "routes clearly better than shuffled pairs (pooled held-out MRR at least 3 standard errors above the MRR of "
    "shuffled pairs, H_n/n; when none is, every route, and a warning says the bridge is not reliable). Family: "
    "translation (the old model's consumer is reused as it is), unless the best relative route's held-out "
    "reciprocal ranks beat the best translation route's by more than 2 standard errors, paired over the anchors "
    "(the relation is not close to linear). Within translation, the highest mean held-out R^2 (the bridged vector "
    "closest to the true target vector, which is what a fixed head or index reads); within relative, the highest "
    "mean MRR. Ties: the higher MRR, then the order of the route list.",
    True: "Each route is fitted on k-1 folds of the anchor pairs and scored on the held-out fold. Eligible: the "
    "routes clearly better than shuffled pairs (pooled held-out MRR at least 3 standard errors above the MRR of "
    "shuffled pairs, H_n/n; when none is, every route, and a warning says the bridge is not reliable). The highest "
    "mean held-out prediction agreement with the head, over both families (ties: the higher MRR, then the order of "
    "the route list).",
}
