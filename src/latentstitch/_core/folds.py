"""Seeded k-fold splits of paired rows, shared by every cross-validation in latentstitch (the ridge path, the
bridge's route choice), so that the same ``folds`` and ``seed`` always mean the same held-out rows.
"""

from __future__ import annotations

import numpy as np

from latentstitch._core.params import check_positive_int, check_seed


def kfold(n: int, folds: int, seed: int, *, name: str = "folds", min_rows: int = 2) -> list[np.ndarray]:
    """Held-out row indices of each of ``folds`` folds of ``n`` rows: a seeded permutation
    (``numpy.random.default_rng(seed)``) cut into ``folds`` near-equal parts.

    Raises a ValueError naming ``name`` unless every held-out part and every training part (the other folds) has
    at least ``min_rows`` rows.
    """
    folds = check_positive_int(folds, name, minimum=2)
    seed = check_seed(seed)
    if n // folds < min_rows:  # then every training part, (folds - 1) parts, has enough rows too
        raise ValueError(
            f"{name}: {folds}-fold cross-validation needs at least {min_rows} rows in every fold, so at least "
            f"{min_rows * folds} paired rows; got {n}. Use fewer folds or more paired rows."
        )
    order = np.random.default_rng(seed).permutation(n)
    return np.array_split(order, folds)


def training_rows(parts: list[np.ndarray], held_out: int) -> np.ndarray:
    """The rows of every part but ``held_out``."""
    return np.concatenate([p for i, p in enumerate(parts) if i != held_out])
