"""A translation route's parameter settings compared together (one similarity product per fold, only the selection
score) score exactly as each setting scored alone by ``fold_scores``, so the ridge penalty and the rank are chosen
as before; and the eigendecomposition the folds use is one of the matrix."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from latentstitch._core.folds import training_rows
from latentstitch._core.numerics import eigh
from latentstitch.bridge import get_route
from latentstitch.bridge._crossval import Anchors, _subset_scores, pooled
from latentstitch.bridge._trials import TRIAL_SCORES, setting_scores


def _anchors(score: str, n: int = 450, p: int = 24, q: int = 20, dtype=np.float64) -> Anchors:
    rng = np.random.default_rng(5)
    source = rng.normal(size=(n, p)) * np.geomspace(2.0, 0.05, p)
    target = np.tanh(source @ rng.normal(size=(p, q))) + 0.2 * rng.normal(size=(n, q)) + 1.0
    parts = np.array_split(rng.permutation(n), 5)
    return Anchors(source.astype(dtype), target.astype(dtype), parts, 0, score=score)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("score", TRIAL_SCORES)
@pytest.mark.parametrize("name", ["ridge_raw", "low_rank"])
def test_settings_scored_together_equal_each_setting_scored_alone(name, score, dtype):
    anchors = _anchors(score, dtype=dtype)
    assert not all(keep.all() for keep in anchors.param_rows)  # the settings are compared on a share of the queries
    spec = get_route(name)
    outputs: dict[str, list] = {}
    for k in range(len(anchors.parts)):
        fold = anchors.fold(k, training_rows(anchors.parts, k))
        for params, output in spec.path(fold):
            outputs.setdefault(repr(sorted(params.items())), []).append((fold, k, output))
    assert len(outputs) >= 4  # six penalties, or the ranks 4, 8, 16 and 20
    together = setting_scores(anchors, outputs, score)
    alone = {key: [_subset_scores(spec, anchors, *entry) for entry in entries] for key, entries in outputs.items()}
    values = {key: pooled(together[key], score) for key in outputs}
    for key in outputs:
        assert values[key] == pytest.approx(pooled(alone[key], score), rel=1e-6, abs=1e-9), key
    assert len(set(values.values())) > 1  # the settings differ, so the comparison can go wrong


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_eigh_decomposes_the_symmetric_matrix(dtype):
    a = torch.as_tensor(np.random.default_rng(0).normal(size=(40, 30)), dtype=dtype)
    gram = a.T @ a
    values, vectors = eigh(gram)
    assert values.dtype == dtype and vectors.dtype == dtype and bool((values[1:] >= values[:-1]).all())
    tol = 1e-10 if dtype == torch.float64 else 1e-3
    torch.testing.assert_close(vectors @ torch.diag(values) @ vectors.T, gram, rtol=tol, atol=tol * float(values[-1]))
    torch.testing.assert_close(vectors.T @ vectors, torch.eye(30, dtype=dtype), rtol=tol, atol=tol)
    torch.testing.assert_close(values, torch.linalg.eigvalsh(gram), rtol=tol, atol=tol * float(values[-1]))
