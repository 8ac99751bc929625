"""``_core.numerics.svd``: where LAPACK's divide-and-conquer SVD (gesdd) does not converge on a finite matrix (it
happened on a 1280-d EfficientNet pair's cross-covariance in ``bridge_few_pairs``), the QR-iteration driver answers
instead; a matrix that is not finite still fails."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from latentstitch._core import numerics


def _gesdd_fails(monkeypatch):
    def fail(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(numerics.np.linalg, "svd", fail)
    monkeypatch.setattr(
        numerics.torch.linalg, "svd", lambda *a, **k: (_ for _ in ()).throw(torch.linalg.LinAlgError("x"))
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_non_converging_svd_is_computed_by_the_other_driver(monkeypatch, dtype):
    m = torch.as_tensor(np.random.default_rng(0).normal(size=(40, 25)), dtype=dtype)
    expected = torch.linalg.svdvals(m.double())
    _gesdd_fails(monkeypatch)
    u, s, vh = numerics.svd(m)
    assert u.dtype == s.dtype == vh.dtype == dtype and u.shape == (40, 25) and vh.shape == (25, 25)
    assert torch.allclose(s.double(), expected, rtol=1e-5)
    assert torch.allclose((u * s) @ vh, m, atol=1e-4 if dtype == torch.float32 else 1e-10)


def test_a_matrix_that_is_not_finite_still_fails(monkeypatch):
    m = torch.ones(4, 3, dtype=torch.float64)
    m[0, 0] = float("nan")
    _gesdd_fails(monkeypatch)
    with pytest.raises(np.linalg.LinAlgError):
        numerics.svd(m)
