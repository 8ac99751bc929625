"""The checks at the door of the migration API, one place for ``plan_sample``, ``fit_migration``,
``certify_migration`` and ``apply_migration``: ids (``check_ids``: one per vector, each once, integers or strings,
never ``None``), vectors (``check_vectors``: a finite 2-D float array of the expected width, no zero row under the
cosine metric, not all one vector), which of some ids another list holds (``held_within``), and the share and
threshold arguments.

Ids are compared as text wherever they meet (a plan's CSV gives strings back for integer ids), so ``1`` and ``"1"``
are one id: a list holding both is refused like any other repeat."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.params import check_number


class MigrationWarning(UserWarning):
    """Something the user of a migration should know (the sample covers one corner of the corpus, ...)."""


def _shown(values: Sequence[Any], at_most: int = 5) -> str:
    values = list(values)
    return ", ".join(repr(v) for v in values[:at_most]) + (" ..." if len(values) > at_most else "")


def check_ids(
    ids: Any, name: str, *, count: int | None = None, count_name: str = "", unique: bool = True, min_count: int = 0
) -> np.ndarray:
    """``ids`` as a 1-D numpy array (integers, or strings), checked: a list or array of integers or strings (one
    type), no ``None`` or empty id, ``count`` of them when given (one per row of ``count_name``), and each once when
    ``unique`` (compared as text: ``1`` and ``"1"`` are one id once written to a plan). Raises ``TypeError`` or
    ``ValueError`` naming ``name``."""
    if ids is None or isinstance(ids, (str, bytes, dict, set, frozenset)) or not hasattr(ids, "__len__"):
        raise TypeError(f"{name}: expected a list or 1-D array of ids (integers or strings), got {type(ids).__name__}")
    array = np.asarray(ids) if hasattr(ids, "__array__") and not isinstance(ids, (list, tuple)) else None
    if array is not None and array.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D list of ids, got shape {array.shape}")
    if array is not None and array.dtype.kind in "iuU":  # a typed array: one kind, no None
        kinds = {str} if array.dtype.kind == "U" else {int}
        items = array
        if kinds == {str} and len(array) and (np.char.str_len(array) == 0).any():
            raise ValueError(
                f"{name}: row {int((np.char.str_len(array) == 0).argmax())} is an empty string; every item needs an id"
            )
    else:
        items, kinds = (array.tolist() if array is not None else list(ids)), set()
    for row, value in enumerate(items if isinstance(items, list) else ()):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            raise ValueError(f"{name}: row {row} is {value!r}; every item needs an id")
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, str, np.str_)):
            raise TypeError(
                f"{name}: expected integer or string ids, got {value!r} ({type(value).__name__}) at row {row}"
            )
        if isinstance(value, (str, np.str_)) and not value:
            raise ValueError(f"{name}: row {row} is an empty string; every item needs an id")
        kinds.add(str if isinstance(value, (str, np.str_)) else int)
    if len(kinds) > 1:
        first_int = next(v for v in items if not isinstance(v, (str, np.str_)))
        raise TypeError(
            f"{name}: mixes integer and string ids (e.g. {first_int!r}); give them one type (1 and '1' are one id "
            "once written to a plan)"
        )
    if count is not None and len(items) != count:
        raise ValueError(f"{name}: expected one id per row of {count_name} ({count}), got {len(items)}")
    if len(items) < min_count:
        raise ValueError(f"{name}: expected at least {min_count} ids, got {len(items)}")
    out = np.asarray(items, dtype=np.int64 if kinds == {int} else str) if len(items) else np.asarray([], np.int64)
    if unique and len(out):
        values, counts = np.unique(out, return_counts=True)
        if (counts > 1).any():
            repeated = values[counts > 1]
            raise ValueError(
                f"{name}: {len(repeated)} ids appear more than once ({_shown(repeated.tolist())}); each item "
                "needs its own id"
            )
    return out


def check_vectors(
    vectors: Any,
    name: str,
    *,
    metric: str | None = None,
    width: int | None = None,
    width_of: str = "",
    rows: str = "rows",
    min_rows: int = 1,
    distinct: bool = False,
) -> np.ndarray:
    """``vectors`` as a float32 numpy array (a list of lists too): 2-D, at least ``min_rows`` rows, finite,
    ``width`` features when given (``width_of``: what fixes it; ``rows``: what a row is), no zero row under the
    cosine ``metric`` (it has no direction), and not every row one vector when ``distinct``. Errors name ``name``."""
    tensor = as_float_tensor(vectors, name, ndim=2, min_rows=min_rows)
    array = tensor.detach().cpu().numpy().astype(np.float32, copy=False)
    if width is not None and array.shape[1] != width:
        raise ValueError(f"{name}: expected ({rows}, {width}) {width_of}, got shape {array.shape}")
    if metric == "cosine":
        zero = ~array.any(axis=1)
        if zero.any():
            raise ValueError(
                f"{name}: row {int(zero.argmax())} is a zero vector ({int(zero.sum())} in all), which has no "
                "direction under the cosine metric; remove those items or give the index's true metric"
            )
    if distinct and len(array) > 1 and (array == array[0]).all():
        raise ValueError(
            f"{name}: all {len(array)} vectors are the same vector; nothing can be fitted or measured on them "
            "(was the embedding job given one text for every id?)"
        )
    return array


def check_index_and_sample(
    index_ids: Any,
    index_vectors: Any,
    sample_ids: Any,
    sample_new: Any,
    *,
    metric: str,
    old_width: int | None = None,
    new_width: int | None = None,
    min_sample_rows: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(index ids, index vectors, sample ids, sample's new vectors): a migration's index and re-embedded sample, each
    checked (``check_vectors``, ``check_ids``) under ``metric`` and, for a fitted migration, against its widths."""
    old = check_vectors(
        index_vectors,
        "index_vectors",
        metric=metric,
        width=old_width,
        width_of="like the index the migration was fitted on",
        min_rows=2,
        distinct=True,
    )
    index_ids = check_ids(index_ids, "index_ids", count=len(old), count_name="index_vectors")
    new = check_vectors(
        sample_new,
        "sample_new",
        metric=metric,
        width=new_width,
        width_of="like the migration's new model",
        min_rows=min_sample_rows,
        distinct=True,
    )
    sample_ids = check_ids(sample_ids, "sample_ids", count=len(new), count_name="sample_new")
    return index_ids, old, sample_ids, new


def held_within(wanted: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """Per id of ``wanted``, whether ``pool`` holds it (compared as text)."""
    return np.isin(np.asarray(wanted).astype(str), np.asarray(pool).astype(str))


def warn_or_refuse(missing: int, total: int, refuse: str, warn: str) -> None:
    """Refuse (``ValueError``: ``refuse``) when none of ``total`` items is usable, warn (``MigrationWarning``:
    ``warn``) when ``missing`` of them are not: a result on none is meaningless, on some it is partial."""
    if total and missing == total:
        raise ValueError(refuse)
    if missing:
        warnings.warn(warn, MigrationWarning, stacklevel=3)


def held_in_sample(holdout_ids: np.ndarray, sample_ids: np.ndarray, consequence: str) -> np.ndarray:
    """Per sample id, whether ``holdout_ids`` holds it. Held-out ids outside the sample (not re-embedded): none
    inside is an error (``consequence``: what would follow), some a ``MigrationWarning``."""
    known = held_within(holdout_ids, sample_ids)
    missing = int((~known).sum())
    warn_or_refuse(
        missing,
        len(known),
        f"holdout_ids: none of the {len(known)} held-out ids is in sample_ids (not re-embedded), so {consequence}; "
        "give the held-out ids of the plan the sample was re-embedded for",
        f"holdout_ids: {missing} of {len(known)} held-out ids are not in sample_ids (not re-embedded); only the "
        "others are held out",
    )
    return held_within(sample_ids, holdout_ids)


#: The values a score can take under each metric (cosine: unit vectors' inner product; l2: a distance).
SCORE_RANGES = {"cosine": (-1.0, 1.0), "ip": (None, None), "l2": (0.0, None)}


def check_thresholds(thresholds: Any, metric: str, name: str = "thresholds") -> list[float]:
    """Score cut-offs of an index of ``metric``: finite numbers its scores can take (cosine in [-1, 1], l2 >= 0)."""
    if isinstance(thresholds, (str, bytes)) or not hasattr(thresholds, "__iter__"):
        raise TypeError(f"{name}: expected a list of numbers, got {type(thresholds).__name__}")
    low, high = SCORE_RANGES[metric]
    checked = []
    for i, t in enumerate(thresholds):
        try:
            checked.append(check_number(t, f"{name}[{i}]", low=low, high=high))
        except (ValueError, TypeError) as error:  # the argument first (the CLI translates it), then the range's
            raise type(error)(f"{error} ({metric} scores)") from None
    return checked
