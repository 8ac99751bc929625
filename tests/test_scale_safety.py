"""Scale safety: at magnitudes whose squares overflow or underflow (1e20 and 1e-30 in float32, 1e200 and 1e-200 in
float64), every kernel returns the value the same data have at unit scale (times the scale to the power the result
carries, rounded to the dtype), or a ValueError naming the argument and the cause; never a silently wrong number.

Each case states which of the two it must be. Inputs are tensors on the ``--device``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from latentstitch import relative_projection
from latentstitch import similarity as sim
from latentstitch._core.errors import ZeroNormError
from latentstitch.losses import death_times
from latentstitch.relative import SIMILARITIES
from latentstitch.stitching import LeastSquares, Procrustes

MAGNITUDES = [(torch.float32, 1e-30), (torch.float32, 1e20), (torch.float64, 1e-200), (torch.float64, 1e200)]
IDS = ["float32-1e-30", "float32-1e20", "float64-1e-200", "float64-1e200"]
# How each similarity scales when samples and anchors are scaled together by s: s ** degree.
DEGREE = {
    "cosine": 0,
    "angular": 0,
    "basis_change": 0,
    "dot": 2,
    "euclidean": 1,
    "l1": 1,
    "linf": 1,
    "geodesic": 0,  # divided by the median graph distance
    "whitened": 0,  # the anchors' covariance scales with the data
}


def _rtol(dtype: torch.dtype) -> float:
    return 2e-5 if dtype == torch.float32 else 1e-9


def _scaled(base: np.ndarray, scale: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return (torch.from_numpy(base) * scale).to(dtype).to(device)


def _unit(t: torch.Tensor, scale: float) -> torch.Tensor:
    """The scaled data brought back to unit scale in float64 (their rounding to the dtype included)."""
    return t.double() / scale


def _data(seed: int = 0, n: int = 40, p: int = 6, q: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, p)) * np.linspace(0.5, 2.0, p) + 0.3
    return x, np.tanh(x @ rng.standard_normal((p, q))) + 0.3 * rng.standard_normal((n, q))


def test_overflowing_dot_similarity_is_named_with_its_row(device):
    x = torch.randn(10, 4, device=device) * 1e20
    with pytest.raises(ValueError, match=r"x, anchors: the dot values of row 0 of x are beyond the range of"):
        relative_projection(x, x[:3], "dot")


@pytest.mark.parametrize("name", sorted(DEGREE))
@pytest.mark.parametrize(("dtype", "scale"), MAGNITUDES, ids=IDS)
@pytest.mark.parametrize("chunked", [False, True])
def test_relative_projection_at_extreme_magnitudes(name, dtype, scale, chunked, device, monkeypatch):
    if chunked:  # several chunks, their checks read once at the end (as on a GPU), and the failing ones redone
        monkeypatch.setattr("latentstitch._core.device.DEFER_ON_CPU", True)
    assert set(DEGREE) == set(SIMILARITIES)
    base_x = np.random.default_rng(0).standard_normal((23, 6))
    base_anchors = np.random.default_rng(1).standard_normal((9, 6))
    x, anchors = _scaled(base_x, scale, dtype, device), _scaled(base_anchors, scale, dtype, device)
    degree = DEGREE[name]
    if degree == 2 and scale > 1:  # 1e40 is beyond float32, 1e400 beyond float64: an error, not inf
        with pytest.raises(ValueError, match=r"x, anchors: the dot values of row 0 of x are beyond the range"):
            relative_projection(x, anchors, name, chunk_size=7 if chunked else None)
        return
    got = relative_projection(x, anchors, name, chunk_size=7 if chunked else None)
    assert got.dtype == dtype and torch.isfinite(got).all()
    unit = relative_projection(_unit(x, scale), _unit(anchors, scale), name)
    expected = (unit * scale**degree).to(dtype)  # e.g. dot products of 1e-30 vectors round to 0 in float32
    rtol = _rtol(dtype)
    torch.testing.assert_close(got, expected, rtol=rtol, atol=rtol * float(expected.abs().max()))


@pytest.mark.parametrize("name", ["cosine", "angular"])
def test_rows_of_any_magnitude_mix_in_one_input(name, device):
    """Rows of 1e20, 1e-30 and unit size in one float32 input: none is taken for a zero vector, none overflows."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(12, 5, generator=generator, dtype=torch.float64)
    anchors = torch.randn(4, 5, generator=generator, dtype=torch.float64)
    sizes = torch.tensor([1e20, 1e-30, 1.0, 3e-38] * 3, dtype=torch.float64)[:, None]
    got = relative_projection((x * sizes).float().to(device), anchors.float().to(device), name)
    expected = relative_projection(x, anchors, name)  # rows scaled alone do not change cosines
    torch.testing.assert_close(got.double().cpu(), expected, rtol=1e-5, atol=1e-5)


def test_a_zero_row_is_still_an_error_next_to_tiny_ones(device):
    x = torch.randn(10, 3, device=device) * 1e-30
    x[6] = 0
    with pytest.raises(ZeroNormError, match="x: row 6 has zero norm"):
        relative_projection(x, torch.randn(2, 3, device=device))


def test_deferred_checks_name_the_first_bad_row_across_chunks(device, monkeypatch):
    """Checks read once at the end (a GPU's path, forced here on any device) still report the first bad row of
    the whole input, whichever kind of error it has."""
    monkeypatch.setattr("latentstitch._core.device.DEFER_ON_CPU", True)
    x = torch.randn(40, 3, device=device)
    x[9] = 0
    x[17, 1] = float("nan")
    with pytest.raises(ZeroNormError, match="x: row 9 has zero norm"):
        relative_projection(x, x[20:22], chunk_size=4)
    x[9] = 1.0
    with pytest.raises(ValueError, match=r"x: contains NaN or inf \(first at row 17\)"):
        relative_projection(x, x[20:22], chunk_size=4)


CKA_VARIANTS = {
    "linear": lambda x, y: sim.cka(x, y),
    "debiased": lambda x, y: sim.cka(x, y, debiased=True),
    "linear-gram": lambda x, y: sim.cka(x, y, method="gram"),
    "debiased-gram": lambda x, y: sim.cka(x, y, debiased=True, method="gram"),
    "rbf": lambda x, y: sim.cka(x, y, kernel="rbf"),
    "minibatch": lambda x, y: sim.minibatch_cka(x, y, batch_size=16),
    "streaming": lambda x, y: sim.StreamingMinibatchCKA().update(x[:20], y[:20]).update(x[20:], y[20:]).compute(),
    "r2": sim.r2_linear,
    "cca": sim.cca,
    "svcca": sim.svcca,
    "pwcca": sim.pwcca,
    "procrustes": sim.procrustes_distance,
    "angular": sim.shape_metric_angular,
}


@pytest.mark.parametrize("measure", sorted(CKA_VARIANTS))
@pytest.mark.parametrize(("dtype", "scale"), MAGNITUDES, ids=IDS)
def test_scale_invariant_measures_at_extreme_magnitudes(measure, dtype, scale, device):
    """Invariant to rescaling each side, these return the unit-scale value: tiny values are not 'zero variance',
    huge ones do not overflow (float32 products of out-of-range data are taken in float64; float64 data are
    brought into range by a power of two)."""
    base_x, base_y = _data()
    x, y = _scaled(base_x, scale, dtype, device), _scaled(base_y, scale, dtype, device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rank warnings of the CCA family are about the data, not the scale
        got = float(CKA_VARIANTS[measure](x, y))
        expected = float(CKA_VARIANTS[measure](_unit(x, scale), _unit(y, scale)))
    assert got == pytest.approx(expected, rel=1e-5 if dtype == torch.float32 else 1e-9, abs=1e-6)


@pytest.mark.parametrize("debiased", [False, True])
@pytest.mark.parametrize(("dtype", "scale"), MAGNITUDES, ids=IDS)
def test_streaming_cka_at_extreme_magnitudes(debiased, dtype, scale, device):
    """float32 chunks: exact (float64 products). float64 chunks beyond float64's squares: an error naming the
    argument and saying to rescale (a stream cannot rescale chunks it has not seen)."""
    base_x, base_y = _data(n=60)
    x, y = _scaled(base_x, scale, dtype, device), _scaled(base_y, scale, dtype, device)
    stream = sim.StreamingCKA(debiased=debiased)
    if dtype == torch.float64:
        with pytest.raises(ValueError, match=r"x: values of magnitude .* rescale x by a constant"):
            stream.update(x[:30], y[:30])
        return
    stream.update(x[:30], y[:30]).update(x[30:], y[30:])
    expected = float(sim.cka(_unit(x, scale), _unit(y, scale), debiased=debiased))
    assert stream.compute() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("estimator", [LeastSquares(), LeastSquares(bias=False, ridge=0.0), Procrustes(),
                                       Procrustes(center=True, scale=True)], ids=repr)  # fmt: skip
@pytest.mark.parametrize(("dtype", "scale"), MAGNITUDES, ids=IDS)
def test_stitching_fits_at_extreme_magnitudes(estimator, dtype, scale, device):
    """float32: the same map as at unit scale (products in float64). float64 beyond float64's squares: an error
    naming the argument (LAPACK used to fail on the infinities), never a zero map."""
    base_a, base_b = _data(n=80, p=6, q=6)
    a, b = _scaled(base_a, scale, dtype, device), _scaled(base_b, scale, dtype, device)
    if dtype == torch.float64:
        with pytest.raises(ValueError, match=r"a: values of magnitude .* rescale a by a constant"):
            type(estimator)(**estimator.get_params()).fit(a, b)
        return
    fitted = type(estimator)(**estimator.get_params()).fit(a, b)
    unit = type(estimator)(**estimator.get_params()).fit(_unit(a, scale), _unit(b, scale))
    torch.testing.assert_close(fitted.coef_, unit.coef_, rtol=1e-5, atol=1e-6)  # a common scale cancels in coef_
    torch.testing.assert_close(fitted.intercept_ / scale, unit.intercept_, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("accelerator_path", [False, True])
@pytest.mark.parametrize(("dtype", "scale"), MAGNITUDES, ids=IDS)
def test_death_times_scale_with_the_cloud(dtype, scale, accelerator_path, device, monkeypatch):
    monkeypatch.setattr("latentstitch._core.device.DEFER_ON_CPU", accelerator_path)
    points = _scaled(np.random.default_rng(4).standard_normal((30, 5)), scale, dtype, device)
    got = death_times(points)
    expected = (death_times(_unit(points, scale)) * scale).to(dtype)
    assert (got > 0).all()
    torch.testing.assert_close(got, expected, rtol=_rtol(dtype), atol=0.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="host synchronisations are counted on a CUDA device")
def test_host_synchronisations_do_not_grow_with_the_number_of_chunks(device):
    """Issue 21: a projection used to wait for the GPU twice per chunk. Now the waits of a call are a fixed few."""
    if device.type != "cuda":
        pytest.skip("run with --device cuda")
    x, anchors = torch.randn(4096, 64, device=device), torch.randn(32, 64, device=device)

    def waits(chunk_size: int) -> int:
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                relative_projection(x, anchors, chunk_size=chunk_size)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        return len(caught)

    assert waits(64) == waits(2048)


@pytest.mark.parametrize("accelerator_path", [False, True])
@pytest.mark.parametrize(("dtype", "scale"), MAGNITUDES, ids=IDS)
def test_l2_output_norm_at_extreme_magnitudes(dtype, scale, accelerator_path, device, monkeypatch):
    """The l2 output normalisation of a layer (``r / max(|r|, 1e-12)``, no wait for an accelerator) is exact for
    rows of any magnitude: here dot similarities of vectors scaled so that the outputs are ~scale (tiny rows are
    divided by the clamp, huge ones by their norm, which squares would overflow)."""
    monkeypatch.setattr("latentstitch._core.device.DEFER_ON_CPU", accelerator_path)
    from latentstitch import RelativeProjection

    generator = torch.Generator().manual_seed(5)
    x, anchors = torch.randn(6, 4, generator=generator, dtype=torch.float64), torch.randn(3, 4, generator=generator)
    layer = RelativeProjection("dot", anchors=anchors.to(dtype), output_norm="l2").to(device)
    got = layer((x * scale).to(dtype).to(device))
    exact = ((x * scale).to(dtype).double() @ anchors.to(dtype).double().T) / scale  # at unit scale, float64
    expected = exact * scale / (exact.norm(dim=1, keepdim=True) * scale).clamp_min(1e-12)
    torch.testing.assert_close(got.double().cpu(), expected.to(dtype).double(), rtol=_rtol(dtype), atol=0.0)
