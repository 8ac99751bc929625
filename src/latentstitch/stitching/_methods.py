"""Methods of ``sweep`` and ``stitch_nulls``: a direct-matching estimator of ``latentstitch.stitching``, or a
``TaskLoss`` (the options of ``fit_task_loss``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sklearn.base import BaseEstimator

from latentstitch.stitching._least_squares import LeastSquares
from latentstitch.stitching._procrustes import Procrustes


class TaskLoss:
    """Task-loss matching as a method of ``sweep``: ``fit_task_loss(stitched, data, **options)``.

    Without an ``init`` option the layer starts from the least-squares fit of the same sweep when there is one
    (method ``"least_squares"``), else from a least-squares fit on the training data: the paper's initialisation.
    """

    def __init__(self, **options: Any):
        self.options = options

    def __repr__(self) -> str:
        inner = ", ".join(f"{key}={value!r}" for key, value in self.options.items())
        return f"TaskLoss({inner})"


def _default_methods() -> dict[str, Any]:
    return {"least_squares": LeastSquares(), "procrustes": Procrustes(), "task_loss": TaskLoss()}


def as_methods(methods: Sequence[str] | Mapping[str, Any]) -> dict[str, Any]:
    named = _default_methods()
    if isinstance(methods, Mapping):
        out = dict(methods)
    else:
        unknown = [m for m in methods if m not in named]
        if unknown:
            raise ValueError(f"methods: unknown names {unknown}; known: {', '.join(named)} (or pass a mapping)")
        out = {name: named[name] for name in methods}
    if not out:
        raise ValueError("methods: expected at least one method")
    for name, method in out.items():
        if not isinstance(method, TaskLoss) and not (isinstance(method, BaseEstimator) and hasattr(method, "fit")):
            raise TypeError(f"methods: {name!r} is a {type(method).__name__}, not an estimator or a TaskLoss")
    return out
