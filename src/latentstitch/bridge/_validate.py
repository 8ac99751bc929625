"""Checks at a bridge's doors: what ``Bridge.fit``, ``fit_head``, ``save`` and ``load`` accept, each refusal naming
the argument (or the file's attribute) and what was expected.

Kept apart from the route selection (``_crossval``) so that the rules a user meets at the entry points read in one
place: anchors as arrays (lists too), routes that have the methods a bridge calls, anchor pairs that repeat (they
leak across folds), anchor budgets that cannot be drawn, class labels for a head, and a loaded bridge checked as a
whole against its route table and its fitted estimator.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator

from latentstitch._core.arrays import as_float_tensor, to_numpy
from latentstitch._core.persist import registered_classes
from latentstitch.bridge._routes import FAMILIES, RouteSpec, get_route
from latentstitch.bridge._scores import predictions
from latentstitch.similarity import UNPAIRED_P, pairing_p_value


def as_anchor_array(x: Any, name: str) -> Any:
    """Numpy arrays and torch tensors as they are; lists, tuples and other array-likes (a DataFrame) as a float
    numpy array, so that every route sees an array (the README promises lists work)."""
    if isinstance(x, (np.ndarray, torch.Tensor)):
        return x
    return to_numpy(as_float_tensor(x, name, ndim=2), name)


def required_methods(family: str) -> tuple[str, ...]:
    return ("fit", "transform", "transform_target") if family == "relative" else ("fit", "transform")


def check_route_methods(specs: Sequence[RouteSpec]) -> None:
    """Each route builds an estimator with the methods a bridge calls (``fit``, ``transform``, and for a relative
    route ``transform_target``); otherwise an error naming the route, before any cross-validation runs."""
    for spec in specs:
        estimator = spec.build()
        missing = [m for m in required_methods(spec.family) if not callable(getattr(estimator, m, None))]
        if missing:
            raise TypeError(
                f"routes: route {spec.name!r} builds a {type(estimator).__name__}, which has no "
                f"{', '.join(missing)} method; a {spec.family} route needs {', '.join(required_methods(spec.family))}"
            )


def check_varies(x: torch.Tensor, name: str) -> None:
    """One side of the anchors, refused when every feature is constant over them (all rows equal): no route can
    learn a map from or to it. Constant *features* beside varying ones are fine (a target's are held at their anchor
    value: ``_dead``)."""
    if x.shape[0] > 1 and x.shape[1] > 0 and not bool((x != x[0]).any()):
        raise ValueError(
            f"{name}: every feature is constant over the {x.shape[0]} anchors (all rows are equal), so no route can "
            f"be fitted; pass the model's vectors of {x.shape[0]} different items"
        )


def repeated_pairs(source: torch.Tensor, target: torch.Tensor) -> int:
    """How many anchor pairs (source row, target row) repeat an earlier pair exactly."""
    if source.shape[0] < 2:
        return 0
    rows = torch.cat([source.detach().reshape(source.shape[0], -1), target.detach().to(source)], dim=1)
    return int(source.shape[0] - torch.unique(rows.cpu(), dim=0).shape[0])


def input_notes(
    source: torch.Tensor, target: torch.Tensor, counts: list[int], usable: list[int], n_train: int, seed: int = 0
):
    """What makes a bridge's scores less trustworthy than they look, in words: rows that look unpaired (compare's
    check: ``similarity.pairing_p_value``), anchor pairs that repeat (they leak across folds) and anchor-budget
    counts that cannot be drawn from the training folds."""
    notes = []
    p_value = pairing_p_value(source, target, seed)
    if p_value is not None and p_value >= UNPAIRED_P:
        notes.append(unpaired_note(p_value))
    repeats = repeated_pairs(source, target)
    if repeats:
        notes.append(repeated_pairs_note(repeats, source.shape[0]))
    dropped = [c for c in counts if c not in usable]
    if dropped:
        notes.append(dropped_budget_note(dropped, n_train - 1))
    return notes


#: How a Python caller matches rows by id; the command line says ``UNPAIRED_FIX_CLI`` instead (``bridge_report``).
UNPAIRED_FIX = "match them by id (fit(..., source_ids=, target_ids=))"
UNPAIRED_FIX_CLI = "match them by id (--id-column)"


def unpaired_note(p_value: float) -> str:
    return (
        f"source, target: the rows look unpaired: linear CKA between the two sides is no higher than with the target's "
        f"rows shuffled (closed-form permutation p = {p_value:.2g} >= {UNPAIRED_P}), so row i of each may not hold "
        f"the same item. Check the row order of both, or {UNPAIRED_FIX}."
    )


def repeated_pairs_note(count: int, n: int) -> str:
    return (
        f"source, target: {count} of the {n} anchor pairs repeat an earlier pair exactly. A repeat held out in one "
        "fold has its twin in the training folds, so the cross-validated scores are optimistic (a route that "
        "memorises pairs looks good). Drop the duplicates first (e.g. keep np.unique(..., axis=0, "
        "return_index=True)'s rows)."
    )


def dropped_budget_note(dropped: list[int], usable_max: int) -> str:
    return (
        f"budget: anchor count(s) {', '.join(map(str, dropped))} left out of the anchor-budget advice: each fold "
        f"trains on only {usable_max + 1} anchors, so a budget must be below that; give fewer anchors per budget "
        "or more anchors"
    )


def check_class_labels(labels: Any, n: int, name: str = "labels", rows: str = "one per row of x") -> np.ndarray:
    """Class labels for a classification head: one per row, no NaN, discrete (strings, integers, booleans, or
    floats with integer values; an object array of strings, or of integers, as scikit-learn's ``predict`` returns
    for labels read with pandas); a one-line error naming ``name`` otherwise."""
    y = to_numpy(labels, name) if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"{name}: expected {n} labels ({rows}), got shape {y.shape}")
    if y.dtype.kind == "f":
        if not np.isfinite(y).all():
            bad = int(np.flatnonzero(~np.isfinite(y))[0])
            raise ValueError(f"{name}: expected class labels, got NaN or inf (first at row {bad}); drop those rows")
        if not np.array_equal(y, np.round(y)):
            raise ValueError(
                f"{name}: expected class labels (strings or integers), got continuous values "
                f"(e.g. {float(y[np.flatnonzero(y != np.round(y))[0]])!r}); a head classifies, it does not regress"
            )
    elif y.dtype.kind == "O":
        y = _object_labels(y, name)
    elif y.dtype.kind not in "biuUS":
        raise TypeError(f"{name}: expected class labels (strings or integers), got values of dtype {y.dtype}")
    return y


def _object_labels(y: np.ndarray, name: str) -> np.ndarray:
    """An object array of labels: strings only (kept as they are, as scikit-learn takes them), or integers only
    (booleans only), returned as an integer (boolean) array, which scikit-learn's classifiers need."""
    if any(v is None or (isinstance(v, float) and not np.isfinite(v)) for v in y):
        raise ValueError(f"{name}: expected class labels, got None or NaN; drop those rows")
    if all(isinstance(v, str) for v in y):
        return y
    if all(isinstance(v, (bool, np.bool_)) for v in y):
        return y.astype(bool)
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in y):
        return y.astype(np.int64)
    kinds = sorted({type(v).__name__ for v in y})
    raise TypeError(
        f"{name}: expected class labels, all strings or all integers, got an object array of {', '.join(kinds)}"
    )


def head_labels(head: Any, target: Any) -> np.ndarray:
    """The head's class of each target anchor (``predictions``), checked as class labels naming ``head``."""
    return check_class_labels(predictions(head, target), target.shape[0], "head", "one prediction per target anchor")


# --- saving and loading ---------------------------------------------------------------------------------------------


def unloadable_parts(estimator: Any, where: str = "estimator_") -> list[str]:
    """The estimators inside ``estimator`` (itself, its parameters, its fitted parts) that ``load`` could not
    rebuild: classes not registered as persistable (``latentstitch._core.persist``)."""
    classes = registered_classes()
    kind = type(estimator)
    found = [] if classes.get(kind.__name__) is kind else [f"{where} ({kind.__module__}.{kind.__qualname__})"]
    if isinstance(estimator, BaseEstimator):
        inner = {**estimator.get_params(deep=False), **vars(estimator)}
        for name, value in inner.items():
            if isinstance(value, BaseEstimator):
                found += unloadable_parts(value, f"{where}.{name}")
    return found


def check_savable(bridge: Any) -> None:
    """Refuse to save a bridge whose chosen route could not be loaded back (a route estimator that is not
    ``Persistable``): the error comes now, at ``save``, not when the file is read."""
    parts = unloadable_parts(bridge.estimator_)
    if parts:
        raise TypeError(
            f"path: cannot save this bridge: its route {bridge.route_!r} holds {', '.join(parts)}, which "
            "latentstitch cannot load back; route estimators must subclass latentstitch's Persistable (see "
            "latentstitch.bridge.register_route)"
        )


def _output_width(estimator: Any, method: str, width: int, attribute: str) -> int | None:
    """The width of ``estimator.method`` on one row of ones of ``width`` features (None if it cannot tell); an
    error naming ``attribute`` (the saved width) if the estimator refuses that width."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = getattr(estimator, method)(np.ones((1, width)))
        except Exception as error:  # any failure here means the saved widths do not fit the estimator
            raise ValueError(
                f"{attribute}: {width}, but the fitted route's {method} fails on {width}-feature vectors ({error})"
            ) from None
    shape = getattr(out, "shape", None)
    return int(shape[1]) if shape is not None and len(shape) == 2 else None


def check_loaded(bridge: Any, min_per_fold: int) -> None:
    """A loaded bridge, checked as a whole (raises ValueError naming the attribute; ``load`` adds the file name):
    its chosen route, family and reliability against its route table, and its widths and anchor count against
    the fitted estimator (one row bridged through it)."""
    for name in ("n_anchors_", "n_features_source_", "n_features_target_"):
        value = getattr(bridge, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    if not isinstance(bridge.reliable_, bool):
        raise ValueError(f"reliable_: expected true or false, got {bridge.reliable_!r}")
    rows = {row.route: row for row in bridge.routes_}
    if bridge.route_ not in rows:
        raise ValueError(f"route_: {bridge.route_!r} is not in the route table ({', '.join(rows)})")
    chosen = rows[bridge.route_]
    if bridge.family_ not in FAMILIES or bridge.family_ != chosen.family:
        raise ValueError(f"family_: {bridge.family_!r}, but route {bridge.route_!r} is a {chosen.family} route")
    spec = _registered(bridge.route_)
    if spec.family != bridge.family_:
        raise ValueError(f"family_: {bridge.family_!r}, but route {bridge.route_!r} is registered as {spec.family}")
    built = type(spec.build())
    if type(bridge.estimator_) is not built:
        raise ValueError(
            f"estimator_: a {type(bridge.estimator_).__name__}, but route {bridge.route_!r} builds a "
            f"{built.__name__}: the file was changed after it was saved"
        )
    marked = [row.route for row in bridge.routes_ if row.chosen]
    if marked != [bridge.route_]:
        raise ValueError(f"route_: {bridge.route_!r}, but the route table marks {marked or 'no route'} as chosen")
    clear = any(row.clearly_better for row in bridge.routes_ if row.fitted)
    if bridge.reliable_ != clear:
        raise ValueError(
            f"reliable_: {bridge.reliable_}, but the route table says {'a' if clear else 'no'} route is clearly "
            "better than shuffled pairs"
        )
    if bridge.n_anchors_ < bridge.cv * min_per_fold:
        raise ValueError(
            f"n_anchors_: {bridge.n_anchors_}, but cv={bridge.cv} folds need at least {bridge.cv * min_per_fold}"
        )
    _check_estimator(bridge)


def _registered(route: str) -> RouteSpec:
    """The registered route a loaded bridge names; a bridge can only have chosen a registered one."""
    try:
        return get_route(route)
    except ValueError:
        raise ValueError(
            f"route_: {route!r} is not a registered route, so the file was changed after it was saved (a route "
            "added with latentstitch.bridge.register_route must be registered again before loading)"
        ) from None


def _check_estimator(bridge: Any) -> None:
    estimator = bridge.estimator_
    missing = [m for m in required_methods(bridge.family_)[1:] if not callable(getattr(estimator, m, None))]
    if missing:
        raise ValueError(f"family_: {bridge.family_!r}, but the fitted route has no {', '.join(missing)} method")
    width = getattr(estimator, "n_features_in_", None)
    if width is not None and width != bridge.n_features_source_:
        raise ValueError(
            f"n_features_source_: {bridge.n_features_source_}, but the fitted route maps {width}-feature vectors"
        )
    out = _output_width(estimator, "transform", bridge.n_features_source_, "n_features_source_")
    if bridge.family_ == "relative":
        if out is not None and out != bridge.n_anchors_:
            raise ValueError(f"n_anchors_: {bridge.n_anchors_}, but the relative route holds {out} anchors")
        target_out = _output_width(estimator, "transform_target", bridge.n_features_target_, "n_features_target_")
        if target_out is not None and target_out != out:
            raise ValueError(f"n_features_target_: {bridge.n_features_target_} does not fit the relative route")
    elif out is not None and out != bridge.n_features_target_:
        raise ValueError(f"n_features_target_: {bridge.n_features_target_}, but the fitted route outputs {out}")
    counts = [row.anchors for row in bridge.budget_ or []]
    if any(c >= bridge.n_anchors_ for c in counts):
        raise ValueError(f"n_anchors_: {bridge.n_anchors_}, but the anchor budget advice drew {max(counts)} anchors")
