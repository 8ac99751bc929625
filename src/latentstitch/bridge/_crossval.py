"""Cross-validation of one bridge route over folds of the anchor pairs, and the choice among routes."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from latentstitch._core.arrays import take_rows
from latentstitch._core.folds import training_rows
from latentstitch._core.moments import RankDeficiencyWarning
from latentstitch.bridge._head import LinearHead
from latentstitch.bridge._routes import RouteSpec
from latentstitch.bridge._scores import (
    SCORES,
    agreement,
    chance_mrr,
    derangement,
    mrr_z_score,
    pair_scores,
    predictions,
)

#: Fewest held-out anchor pairs per fold: retrieval among fewer candidates says little.
MIN_PER_FOLD = 5
#: A route is "clearly better than shuffled pairs" when its pooled held-out MRR is this many standard errors above
#: the MRR of shuffled pairs (with three z, a route carrying no information passes about once in 700 fits).
CLEAR_Z = 3.0


def matched_order(source_ids: Any, target_ids: Any, source: Any, target: Any) -> np.ndarray:
    from latentstitch.embeddings import match_ids

    for name, ids, rows in (("source_ids", source_ids, source), ("target_ids", target_ids, target)):
        if len(ids) != len(rows):
            raise ValueError(f"{name}: expected one id per row ({len(rows)}), got {len(ids)}")
    return match_ids(source_ids, target_ids, ("source_ids", "target_ids"), ("the source", "the target"))


def cross_validate_route(
    spec: RouteSpec,
    source: Any,
    target: Any,
    parts: list[np.ndarray],
    reference: np.ndarray | None,
    seed: int,
    head: Callable[[Any], Any] | None,
    deficient: dict[str, int],
    advance: Callable[[], None],
    subsets: list[np.ndarray] | None = None,
    per_item: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """One route's scores on every fold (``subsets``: the training rows to use per fold, for the anchor budget).
    ``per_item`` receives the route's held-out reciprocal rank of every anchor (fold after fold), for paired
    comparisons between routes."""
    started = time.perf_counter()
    folds: dict[str, list[float]] = {}
    sizes: list[int] = []
    reciprocal: list[np.ndarray] = []
    rng = np.random.default_rng(seed)
    row: dict[str, Any] = {"route": spec.name, "family": spec.family, "description": spec.description, "error": None}
    for k, held_out in enumerate(parts):
        train = training_rows(parts, k) if subsets is None else subsets[k]
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", RankDeficiencyWarning)
                estimator = spec.build().fit(take_rows(source, train), take_rows(target, train))
            if any(issubclass(w.category, RankDeficiencyWarning) for w in caught):
                deficient[spec.name] = deficient.get(spec.name, 0) + 1
            pass_through([w for w in caught if not issubclass(w.category, RankDeficiencyWarning)])
            bridged = estimator.transform(take_rows(source, held_out))
            partner = (
                estimator.transform_target(take_rows(target, held_out))
                if spec.family == "relative"
                else take_rows(target, held_out)
            )
        except (ValueError, TypeError, np.linalg.LinAlgError, torch.linalg.LinAlgError) as error:
            row["error"] = " ".join(str(error).split()) or type(error).__name__
            advance()
            break
        scores = pair_scores(bridged, partner, per_item=True)
        reciprocal.append(scores.pop("reciprocal_ranks"))
        shuffled = pair_scores(bridged, take_rows(partner, derangement(len(held_out), rng)))
        for name in SCORES:
            folds.setdefault(name, []).append(scores[name])
            folds.setdefault(f"shuffled_{name}", []).append(shuffled[name])
        if reference is not None:
            folds.setdefault("agreement", []).append(
                _agreement(spec, estimator, head, bridged, target, train, reference, held_out)
            )
        sizes.append(len(held_out))
        advance()
    if row["error"] is None:
        for name, values in folds.items():
            row[name] = [float(np.mean(values)), float(np.std(values))]
        if spec.family == "relative":  # R^2 of relative vectors says nothing about the target's space: not scored
            row["r2"] = row["shuffled_r2"] = None
        row["z"] = mrr_z_score(folds["mrr"], sizes)
        row["chance_mrr"] = sum(chance_mrr(n)[0] * n for n in sizes) / sum(sizes)
        if per_item is not None:
            per_item[spec.name] = np.concatenate(reciprocal)
    else:
        row.update({name: None for name in (*SCORES, *(f"shuffled_{n}" for n in SCORES), "agreement")})
        row.update({"z": float("-inf"), "chance_mrr": None})
    row.setdefault("agreement", None)
    row["clearly_better"] = bool(
        row["error"] is None and row["z"] >= CLEAR_Z and row["mrr"][0] > row["shuffled_mrr"][0]
    )
    row["seconds"] = time.perf_counter() - started
    return row


def _agreement(spec, estimator, head, bridged, target, train, reference, held_out) -> float:
    """The head's prediction from the bridged vector vs from the true target vector, on the held-out anchors."""
    if spec.family != "relative":
        return agreement(predictions(head, bridged), reference[held_out])
    # A relative route's output is read by a head trained on relative target vectors: here, a LinearHead fitted on
    # the training folds to reproduce the user's head.
    labels = reference[train]
    if np.unique(labels).size < 2:
        return agreement(np.full(len(held_out), labels[0]), reference[held_out])
    proxy = LinearHead().fit(estimator.transform_target(take_rows(target, train)), labels)
    return agreement(proxy.predict(bridged), reference[held_out])


#: A relative route is chosen over the translation routes only when its held-out MRR beats the best translation
#: route's by more than this many standard errors (paired over the held-out anchors).
FAMILY_MARGIN = 2.0


def choose_route(rows: list[dict], primary: str, per_item: dict[str, np.ndarray]) -> tuple[dict, bool]:
    """The route the documented rule (``SELECTION_RULE``) picks, and whether it is clearly better than shuffled."""
    fitted = [r for r in rows if r["error"] is None]
    if not fitted:
        raise ValueError("routes: no route could be fitted: " + "; ".join(f"{r['route']}: {r['error']}" for r in rows))
    clear = [r for r in fitted if r["clearly_better"]]
    pool = clear or fitted
    order = {id(r): i for i, r in enumerate(rows)}
    if primary == "agreement":
        return max(pool, key=lambda r: (r["agreement"][0], r["mrr"][0], -order[id(r)])), bool(clear)
    family = "translation" if _translation_suffices(pool, per_item) else "relative"
    pool = [r for r in pool if r["family"] == family]
    score = "r2" if family == "translation" else "mrr"
    return max(pool, key=lambda r: (r[score][0], r["mrr"][0], -order[id(r)])), bool(clear)


def _translation_suffices(pool: list[dict], per_item: dict[str, np.ndarray]) -> bool:
    """Whether a translation route finds partners about as well as the best relative route: the best relative
    route's gain in reciprocal rank over the best translation route, anchor by anchor, is not above
    ``FAMILY_MARGIN`` standard errors."""
    translation = [r for r in pool if r["family"] == "translation"]
    relative = [r for r in pool if r["family"] == "relative"]
    if not translation or not relative:
        return bool(translation)
    best_translation = max(translation, key=lambda r: r["mrr"][0])
    best_relative = max(relative, key=lambda r: r["mrr"][0])
    gain = per_item[best_relative["route"]] - per_item[best_translation["route"]]
    error = gain.std(ddof=1) / np.sqrt(gain.size) if gain.size > 1 else 0.0
    return not (gain.mean() > FAMILY_MARGIN * error and gain.mean() > 0)


def pass_through(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
