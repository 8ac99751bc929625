"""Conventions shared by every index: types in and out, gradients, errors, metadata, compare and pairwise."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from latentstitch import similarity as sim
from latentstitch._core.errors import ZeroNormError
from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch.similarity import MEASURES

OPTIONS = {"minibatch_cka": {"batch_size": 10}, "cycle_knn": {"k": 5}}  # k=3 ties both directions at 27/40 here


def options(name, n):
    """The measure's test options; a row option (deconfounded CKA's confounder) is a fixed random input of n rows."""
    out = dict(OPTIONS.get(name, {}))
    for option in MEASURES[name].row_options:
        out[option] = np.random.default_rng(n).standard_normal((n, 3))
    return out


def data(n=40, p=5, q=4, seed=0, same=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, p)) + 1.0
    y = (
        x + 0.5 * rng.standard_normal((n, p))
        if same
        else np.tanh(x @ rng.standard_normal((p, q))) + 0.3 * rng.standard_normal((n, q))
    )
    return x, y


def pair_for(name, **kwargs):
    return data(same=MEASURES[name].same_space, **kwargs)


@pytest.mark.parametrize("name", sorted(MEASURES))
def test_value_in_documented_range_and_types(name):
    spec = MEASURES[name]
    x, y = pair_for(name)
    value = spec(x, y, **options(name, len(x)))
    assert type(value) is float
    low, high = spec.value_range
    assert low - 1e-12 <= value <= high + 1e-12
    tensor = spec(torch.from_numpy(x).float(), torch.from_numpy(y).float(), **options(name, len(x)))
    assert isinstance(tensor, torch.Tensor) and tensor.ndim == 0 and tensor.dtype == torch.float32
    assert float(tensor) == pytest.approx(value, abs=1e-4)


@pytest.mark.parametrize("name", sorted(MEASURES))
def test_symmetry_flag_is_honest(name):
    spec = MEASURES[name]
    x, y = pair_for(name, q=5)
    forward, backward = spec(x, y, **options(name, len(x))), spec(y, x, **options(name, len(x)))
    if spec.symmetric:
        assert forward == pytest.approx(backward, abs=1e-10)
    else:
        assert abs(forward - backward) > 1e-6


@pytest.mark.parametrize("name", sorted(MEASURES))
def test_differentiable_flag_is_honest(name):
    spec = MEASURES[name]
    x, y = (torch.from_numpy(v).requires_grad_() for v in pair_for(name))
    value = spec(x, y, **options(name, len(x)))
    assert value.requires_grad == spec.differentiable
    if spec.differentiable:
        value.backward()
        assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


GRADCHECK = {
    "linear_cka": lambda x, y: sim.cka(x, y),
    "linear_cka_gram": lambda x, y: sim.cka(x, y, method="gram"),
    "debiased_cka": lambda x, y: sim.cka(x, y, debiased=True),
    "debiased_cka_gram": lambda x, y: sim.cka(x, y, debiased=True, method="gram"),
    "rbf_cka": lambda x, y: sim.cka(x, y, kernel="rbf"),
    "minibatch_cka": lambda x, y: sim.minibatch_cka(x, y, batch_size=6),
    "r2_linear": sim.r2_linear,
    "mean_cca": sim.cca,
    "r2_cca": lambda x, y: sim.cca(x, y, reduce="r2"),
    "svcca": lambda x, y: sim.svcca(x, y, keep=2),
    "pwcca": sim.pwcca,
    "procrustes_distance": sim.procrustes_distance,
    "shape_metric_angular": sim.shape_metric_angular,
    "rsa_pearson": lambda x, y: sim.rsa(x, y, correlation="pearson"),
    "matched_cosine": sim.matched_cosine,
    "gulp": sim.gulp,
    "gulp_ridge": lambda x, y: sim.gulp(x, y, ridge=0.1),
    "pnka": sim.pnka,
    "ensd": sim.ensd,
    "distance_correlation": sim.distance_correlation,
    "eigenspace_overlap": sim.eigenspace_overlap,
    "correlation_match": sim.correlation_match,
    "soft_correlation_match": lambda x, y: sim.correlation_match(x, y, soft=True),
    "permutation": sim.permutation_metric,
    "deconfounded_cka": lambda x, y: sim.deconfounded_cka(x, y, torch.linspace(-1, 1, 14, dtype=x.dtype)[:, None] ** 2),
}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "pwcca" else n for n in sorted(GRADCHECK)]
)
def test_gradients_match_finite_differences(name):
    x, y = data(n=14, p=3, q=3 if name == "matched_cosine" else 4, seed=3, same=name == "matched_cosine")
    inputs = tuple(torch.from_numpy(v).requires_grad_() for v in (x, y))
    assert torch.autograd.gradcheck(GRADCHECK[name], inputs, eps=1e-6, atol=1e-5)


def test_cka_as_a_loss_decreases():
    torch.manual_seed(0)
    x = torch.randn(64, 6)
    layer = torch.nn.Linear(6, 6)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)
    with torch.no_grad():
        start = float(sim.cka(layer(x), x))
    for _ in range(30):
        optimizer.zero_grad()
        loss = 1 - sim.cka(layer(x), x)
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        assert float(sim.cka(layer(x), x)) > start + 0.01


# --- errors ----------------------------------------------------------------------------------------------------


def test_too_few_samples_raise_clear_errors():
    x, y = data(n=3)
    with pytest.raises(ValueError, match="debiased linear CKA needs at least 4 samples"):
        sim.cka(x, y, debiased=True)
    with pytest.raises(ValueError, match="needs at least 2 samples"):
        sim.cka(x[:1], y[:1])
    with pytest.raises(ValueError, match="k=10"):
        sim.mutual_knn(*data(n=10))
    with pytest.raises(ValueError, match="batch_size"):
        sim.minibatch_cka(*data(), batch_size=3)


def test_bad_inputs_name_the_argument():
    x, y = data()
    bad = x.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match=r"x: contains NaN or inf \(first at row 5"):
        sim.cka(bad, y)
    with pytest.raises(ValueError, match="same number of samples"):
        sim.cca(x, y[:-1])
    with pytest.raises(TypeError, match="y: expected a floating-point"):
        sim.cka(x, y.astype(int))
    with pytest.raises(ValueError, match=r"y: expected \(n_samples"):
        sim.cka(x, y[:, 0])
    with pytest.raises(ValueError, match="same number of features"):
        sim.matched_cosine(x, y)
    with pytest.raises(ValueError, match="kernel: expected one of"):
        sim.cka(x, y, kernel="poly")
    with pytest.raises(ValueError, match="unknown measure 'cka'"):
        sim.compare(x, y, measures=["cka"])


@pytest.mark.parametrize("debiased", [False, True])
def test_constant_representation_is_an_error_not_nan(debiased):
    x, _ = data()
    constant = np.ones((40, 3))
    with pytest.raises(sim.ZeroVarianceError, match="y: has zero variance"):
        sim.cka(x, constant, debiased=debiased)
    with pytest.raises(sim.ZeroVarianceError, match="x: has zero variance"):
        sim.procrustes_distance(constant, x)
    with pytest.raises(sim.ZeroVarianceError):
        sim.cca(x, constant)


def test_small_batches_never_give_nan():
    # The failure of popular CKA packages: tiny or rank-one batches producing NaN.
    rng = np.random.default_rng(0)
    for n in (4, 5, 6):
        x, y = rng.standard_normal((n, 50)), rng.standard_normal((n, 30))
        for debiased in (False, True):
            assert math.isfinite(sim.cka(x, y, debiased=debiased))
    assert sim.cka(rng.standard_normal((2, 3)), rng.standard_normal((2, 3))) == pytest.approx(1.0)


def test_cca_with_constant_and_collinear_columns_warns_and_stays_finite():
    x, y = data(n=100, p=5, q=4)
    padded = np.column_stack([x, np.full(100, 3.0), x[:, 0] + x[:, 1]])
    with pytest.warns(RankDeficiencyWarning, match="numerical rank 5 < 7 features .1 constant"):
        value = sim.cca(padded, y)
    assert value == pytest.approx(sim.cca(x, y), abs=1e-9)
    # A constant neuron carries no weight in PWCCA (a collinear one does: the weights depend on x's neurons).
    with pytest.warns(RankDeficiencyWarning, match="1 constant"):
        assert sim.pwcca(padded[:, :6], y) == pytest.approx(sim.pwcca(x, y), abs=1e-9)


def test_cca_with_more_features_than_samples_warns():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((20, 15)), rng.standard_normal((20, 12))
    with pytest.warns(RankDeficiencyWarning, match="exceed n - 1"):
        assert 0 <= sim.cca(x, y) <= 1


def test_cca_is_unaffected_by_column_units():
    x, y = data(n=200, p=6, q=4)
    scaled = x * np.array([1e-6, 1.0, 1e6, 1e-3, 1e3, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sim.cca(scaled.astype(np.float32), y.astype(np.float32)) == pytest.approx(sim.cca(x, y), abs=1e-5)


def test_r2_direction_and_agreement_with_kornblith_lr():
    x, y = data(n=80, p=6, q=3)
    xc, yc = x - x.mean(0), y - y.mean(0)
    q, _ = np.linalg.qr(xc)
    assert sim.r2_linear(x, y) == pytest.approx(np.linalg.norm(q.T @ yc) ** 2 / np.linalg.norm(yc) ** 2, abs=1e-10)
    assert sim.r2_linear(x, y) != pytest.approx(sim.r2_linear(y, x), abs=1e-3)


def test_neighbour_measures_on_identical_spaces():
    x, _ = data(n=50, p=6)
    assert sim.mutual_knn(x, x, 5) == 1.0
    assert sim.jaccard_at_k(x, x, 5) == 1.0
    assert sim.mrr(x, x) == 1.0
    assert sim.matched_cosine(x, x) == pytest.approx(1.0)
    x[3] = 0
    with pytest.raises(ZeroNormError, match="row 3"):
        sim.mutual_knn(x, x, 5)


def test_mrr_truncation_matches_its_definition():
    x, y = data(n=60, p=6, same=True, seed=5)
    full, top3 = sim.mrr(x, y), sim.mrr(x, y, k=3)
    assert top3 <= full
    ux = x / np.linalg.norm(x, axis=1, keepdims=True)
    uy = y / np.linalg.norm(y, axis=1, keepdims=True)
    scores = ux @ uy.T
    ranks = 1 + (scores > np.diag(scores)[:, None]).sum(axis=1)
    assert full == pytest.approx(np.mean(1 / ranks))
    assert top3 == pytest.approx(np.mean(np.where(ranks <= 3, 1 / ranks, 0.0)))


@pytest.mark.kernels
def test_large_inputs_are_chunked(monkeypatch):
    import latentstitch._core.knn as knn

    x, y = data(n=90, p=6, same=True, seed=2)
    expected = (sim.mutual_knn(x, y, 4), sim.jaccard_at_k(x, y, 4), sim.mrr(x, y))
    monkeypatch.setattr(knn, "CHUNK_ELEMENTS", 200)  # chunks of 2 rows
    assert (sim.mutual_knn(x, y, 4), sim.jaccard_at_k(x, y, 4), sim.mrr(x, y)) == expected


def test_feature_and_gram_routes_agree_in_float32():
    x, y = data(n=300, p=40, q=30)
    for debiased in (False, True):
        features = sim.cka(x.astype(np.float32), y.astype(np.float32), debiased=debiased, method="features")
        gram = sim.cka(x, y, debiased=debiased, method="gram")
        assert features == pytest.approx(gram, abs=1e-5)


def test_activations_are_flattened_per_sample():
    rng = np.random.default_rng(0)
    maps = rng.standard_normal((30, 2, 3, 3))
    y = rng.standard_normal((30, 4))
    assert sim.cka(maps, y) == pytest.approx(sim.cka(maps.reshape(30, -1), y))


# --- compare and pairwise ---------------------------------------------------------------------------------------


def test_compare_defaults_and_options():
    x, y = data(n=50, p=5, q=4)
    values = sim.compare(x, y)
    assert list(values) == list(sim.DEFAULT_MEASURES)
    assert values["linear_cka"] == pytest.approx(sim.cka(x, y))
    same = sim.compare(*data(n=50, p=5, same=True))
    assert set(sim.SAME_SPACE_MEASURES) <= set(same)
    chosen = sim.compare(x, y, measures={"mutual_knn": {"k": 3}, "debiased_cka": {}})
    assert chosen == {"mutual_knn": sim.mutual_knn(x, y, 3), "debiased_cka": sim.cka(x, y, debiased=True)}


def test_pairwise_matrix_and_heatmap(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.standard_normal((40, 5))
    reps = {"a": base, "b": base @ rng.standard_normal((5, 5)), "c": rng.standard_normal((40, 3))}
    matrix = sim.pairwise(reps, "linear_cka")
    sim.heatmap(matrix, tmp_path / "cka.png", labels=list(reps), measure="linear_cka")
    assert matrix.shape == (3, 3)
    np.testing.assert_allclose(matrix, matrix.T)
    np.testing.assert_allclose(np.diag(matrix), 1.0)
    assert matrix[0, 1] == pytest.approx(sim.cka(base, reps["b"]))
    assert (tmp_path / "cka.png").stat().st_size > 1000
    asymmetric = sim.pairwise(list(reps.values()), "r2_linear")
    assert asymmetric[0, 2] != pytest.approx(asymmetric[2, 0])


def test_pairwise_computes_symmetric_measures_once_per_pair(monkeypatch):
    calls = []
    spec = MEASURES["linear_cka"]
    monkeypatch.setitem(
        MEASURES,
        "counting",
        type(spec)(
            **{
                **spec.__dict__,
                "name": "counting",
                "function": lambda x, y, **kw: calls.append(1) or sim.cka(x, y, **kw),
            }
        ),
    )
    sim.pairwise([np.random.default_rng(i).standard_normal((10, 3)) for i in range(4)], "counting")
    assert len(calls) == 10  # 4 diagonal + 6 pairs, not 16


def test_metadata_uses_the_invariance_vocabulary():
    from latentstitch.invariance import ALL

    for spec in MEASURES.values():
        assert spec.invariances_x <= set(ALL) and spec.invariances_y <= set(ALL)
        assert spec.kind in ("similarity", "distance") and spec.centering
        if spec.streaming:
            assert hasattr(sim, spec.streaming)
