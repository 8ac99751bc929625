"""latentstitch.alignment: each method recovers a known transformation, reports failure on unrelated spaces, and
matches the official code's numbers where it exists (fixtures/alignment_reference.json)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.base import clone
from threadpoolctl import threadpool_limits

from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch.alignment import (
    FunctionalMap,
    GeneralizedProcrustes,
    InverseRelativeProjection,
    UnpairedAlignment,
    bootstrap_anchors,
)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "alignment_reference.json").read_text())
SEEDS = (0, 1, 2)


@pytest.fixture(autouse=True)
def single_threaded(one_thread):
    with threadpool_limits(limits=1):
        yield


def rotation(d: int, seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return q


def anisotropic(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, d)) * np.linspace(3.0, 0.5, d) + 1.0).astype(np.float32)


def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - b.mean(axis=0), b - b.mean(axis=0)
    return float(np.mean(np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)))


# --- InverseRelativeProjection ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_inverse_relative_projection_recovers_rotation_scale_and_shift(seed, device):
    x = anisotropic(400, 16, seed)
    y = (2.5 * x @ rotation(16, seed) - 3.0).astype(np.float32)
    xt, yt = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
    model = InverseRelativeProjection(rescale="relative").fit(xt[:64], yt[:64])
    out = model.transform(xt[64:])
    assert isinstance(out, torch.Tensor) and out.device.type == device.type and out.dtype == torch.float32
    assert torch.allclose(out, yt[64:], atol=1e-3 * float(yt.abs().max()))
    assert model.score_ > 0.999 and model.rank_ == 16


def test_inverse_relative_projection_equals_an_independent_derivation():
    """The paper's three steps written out with numpy's least squares: cosines to the source anchors, least squares
    against the normalised target anchors, the direction rescaled to the target anchors' mean norm."""
    rng = np.random.default_rng(0)
    s, t, x = rng.standard_normal((50, 12)), rng.standard_normal((50, 9)), rng.standard_normal((7, 12))
    model = InverseRelativeProjection().fit(s, t)
    sc, tc = s - s.mean(0), t - t.mean(0)
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)  # noqa: E731
    relative = unit(x - s.mean(0)) @ unit(sc).T
    direction = np.linalg.lstsq(unit(tc), relative.T, rcond=None)[0].T
    expected = unit(direction) * np.linalg.norm(tc, axis=1).mean() + t.mean(0)
    np.testing.assert_allclose(model.transform(x), expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(model.decode(relative), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("rescale", ["mean", "relative", "none"])
@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_inverse_relative_projection_is_exact_at_extreme_magnitudes(rescale, scale, device):
    """Norms whose squares overflow or underflow float64 (1e200, 1e-200): the map scales with its data, its
    translation of s * x is s times that of x; with rescale="none" (uncentred, so no target mean is added to the
    unit directions) it is the same unit direction."""
    rng = np.random.default_rng(0)
    s, t, x = rng.standard_normal((30, 6)) + 1.0, rng.standard_normal((30, 5)), rng.standard_normal((7, 6)) + 1.0
    options = {"rescale": rescale, "center": rescale != "none"}
    unit = InverseRelativeProjection(**options).fit(s, t).transform(x)
    to = lambda a: torch.from_numpy(a * scale).to(device)  # noqa: E731
    got = InverseRelativeProjection(**options).fit(to(s), to(t)).transform(to(x)).cpu().numpy()
    assert np.isfinite(got).all()
    degree = 0 if rescale == "none" else 1
    np.testing.assert_allclose(got / scale**degree, unit, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_inverse_relative_projection_score_flags_shuffled_anchors(seed):
    x = anisotropic(200, 20, seed)
    y = x @ rotation(20, seed)
    good = InverseRelativeProjection().fit(x, y).score_
    shuffled = InverseRelativeProjection().fit(x, y[np.random.default_rng(seed).permutation(200)]).score_
    # Unrelated rows: the off-diagonal cosines of 200 anchors are uncorrelated; measured |score| < 0.03 over seeds
    assert good > 0.999 and abs(shuffled) < 0.15


def test_inverse_relative_projection_persistence_and_errors(tmp_path):
    x = anisotropic(60, 8, 0)
    model = InverseRelativeProjection(rescale="none").fit(x, x[:, :5])
    model.save(tmp_path / "irp.safetensors")
    loaded = InverseRelativeProjection.load(tmp_path / "irp.safetensors")
    np.testing.assert_array_equal(loaded.transform(x), model.transform(x))
    assert np.allclose(np.linalg.norm(model.transform(x) - model.target_mean_, axis=1), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="rescale"):
        InverseRelativeProjection(rescale="median").fit(x, x)
    with pytest.raises(ValueError, match="same number of samples"):
        InverseRelativeProjection().fit(x, x[:10])
    with pytest.raises(ValueError, match="x: has 5 features"):
        model.transform(x[:, :5])
    with pytest.warns(RankDeficiencyWarning, match="span"):
        InverseRelativeProjection().fit(x[:4], x[:4])
    assert clone(model).get_params() == model.get_params()


# --- bootstrap_anchors -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_bootstrap_anchors_recovers_a_permutation_from_ten_seeds(seed):
    rng = np.random.default_rng(seed)
    x = anisotropic(300, 12, seed)
    permutation = rng.permutation(300)
    y = (x @ rotation(12, seed) * 4.0)[permutation]  # target row permutation[i] is source row i... inverted below
    partner = np.argsort(permutation)  # source row i is target row partner[i]
    seeds = np.stack([np.arange(10), partner[:10]], axis=1)
    found = bootstrap_anchors(x, y, seeds, 150)
    assert found.pairs.shape == (150, 2) and not set(found.pairs[:, 0]) & set(range(10))
    assert np.mean(partner[found.pairs[:, 0]] == found.pairs[:, 1]) > 0.97
    assert np.median(found.confidence) > 0.9 and np.all(np.diff(found.confidence) <= 0)
    wrong = np.stack([np.arange(10), rng.permutation(300)[:10]], axis=1)  # seeds that are not matches
    failed = bootstrap_anchors(x, y, wrong, 150)
    assert np.mean(partner[failed.pairs[:, 0]] == failed.pairs[:, 1]) < 0.1
    assert np.median(failed.confidence) < 0.5


@pytest.mark.parametrize("max_iter", [1, 7, 100])
def test_sinkhorn_plan_is_the_textbook_sweep_to_the_bit(max_iter):
    """``sinkhorn_plan`` reuses each sweep's products (two a sweep, not four): the plan must be the textbook loop's
    (u = a / (K v), v = b / (K^T u), u = a / (K v), stop when the column sums meet 1/m), bit for bit, whether it
    stops on the tolerance (100 sweeps) or on ``max_iter`` (1, 7)."""
    from latentstitch.alignment._bootstrap import sinkhorn_plan

    cost = torch.as_tensor(np.random.default_rng(0).random((40, 70)), dtype=torch.float64)
    epsilon, tol = 0.05, 1e-9
    kernel = torch.exp(-(cost - cost.min(dim=1, keepdim=True).values) / epsilon)
    a, b = 1.0 / 40, 1.0 / 70
    v, sweeps = torch.ones(70, dtype=torch.float64), 0
    for _ in range(max_iter):
        u = a / (kernel @ v)
        v = b / (kernel.T @ u)
        u = a / (kernel @ v)
        sweeps += 1
        if float(((kernel.T @ u) * v / b - 1.0).abs().max()) < tol:
            break
    assert sweeps < 100 if max_iter == 100 else sweeps == max_iter  # both ways of stopping are exercised
    assert torch.equal(sinkhorn_plan(cost, epsilon, max_iter, tol), u[:, None] * kernel * v[None, :])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lower_median_is_torch_median_by_selection(dtype):
    """``bootstrap_anchors`` scales its costs by ``lower_median`` (np.partition, not a sort): the element
    ``torch.median`` gives, for odd and even counts, ties, and NaN."""
    from latentstitch._core.numerics import lower_median

    rng = np.random.default_rng(0)
    for values in (rng.random((37, 11)), rng.random((40, 50)), rng.integers(0, 4, (30, 30)), rng.random(2)):
        t = torch.as_tensor(values, dtype=dtype)
        assert lower_median(t).dtype == dtype and torch.equal(lower_median(t), t.median())
    with_nan = torch.as_tensor(rng.random(9), dtype=dtype)
    with_nan[3] = torch.nan
    assert torch.isnan(lower_median(with_nan))


def test_bootstrap_anchors_errors():
    x = anisotropic(30, 4, 0)
    with pytest.raises(ValueError, match="seed_pairs: target index 30"):
        bootstrap_anchors(x, x, [[0, 30]], 5)
    with pytest.raises(ValueError, match="n: asked for 40"):
        bootstrap_anchors(x, x, [[0, 0]], 40)
    with pytest.raises(ValueError, match="appears in two seed pairs"):
        bootstrap_anchors(x, x, [[0, 0], [0, 1]], 5)
    with pytest.raises(TypeError, match="integer row indices"):
        bootstrap_anchors(x, x, np.zeros((2, 2)), 5)


def test_bootstrap_anchors_names_the_seeds_when_they_give_no_cosine():
    """Seeds no item can take a cosine against are an error on ``seed_pairs`` (which pair, which side, how many are
    needed), not a zero-norm error about ``anchors`` the caller never passed."""
    x = anisotropic(60, 6, 0)
    y = x @ rotation(6, 0)
    seeds = np.stack([np.arange(10), np.arange(10)], axis=1)
    with pytest.raises(ValueError, match=r"seed_pairs: one seed pair .* at least 2 seed pairs .* center=False"):
        bootstrap_anchors(x, y, seeds[:1], 30)
    assert bootstrap_anchors(x, y, seeds[:1], 30, center=False).pairs.shape == (30, 2)  # one cosine is defined
    same = x.copy()
    same[1:3] = same[0]  # three seed rows holding one vector: centring on their mean leaves nothing
    with pytest.raises(ValueError, match="seed_pairs: the 3 seed rows of source are all the same vector"):
        bootstrap_anchors(same, y, seeds[:3], 20)
    zero = y.copy()
    zero[4] = 0.0
    with pytest.raises(ValueError, match=r"seed_pairs: pair 4 \(row 4 of target\) is the zero vector"):
        bootstrap_anchors(x, zero, seeds[:5], 20, center=False)
    middle = x.copy()
    middle[2] = (x[0] + x[1]) / 2  # centred on the seeds' mean, this seed is the zero vector
    with pytest.raises(ValueError, match=r"seed_pairs: pair 2 \(row 2 of source\) equals the mean"):
        bootstrap_anchors(middle, y, seeds[:3], 20)
    with pytest.raises(ValueError, match="source: row 12 has zero norm"):  # a zero row that is not a seed
        bootstrap_anchors(np.where(np.arange(60)[:, None] == 12, 0.0, x), y, seeds[:5], 20, center=False)


# --- GeneralizedProcrustes -------------------------------------------------------------------------------------
def views(seed: int, noise: float = 0.0, widths=(12, 12, 10, 12)) -> tuple[np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((500, 12)) * np.linspace(2.0, 0.5, 12)
    out = []
    for i, width in enumerate(widths):
        view = 3.0 * (i + 1) * z @ rotation(12, 10 * seed + i) + rng.normal(size=12)
        out.append((view[:, :width] + noise * rng.standard_normal((500, width))).astype(np.float64))
    return z, out


@pytest.mark.parametrize("seed", SEEDS)
def test_generalized_procrustes_recovers_rotated_views_and_composes(seed):
    _, spaces = views(seed, widths=(12, 12, 12))
    model = GeneralizedProcrustes().fit(spaces)
    for i in range(3):
        for j in range(3):
            np.testing.assert_allclose(model.translate(spaces[i], i, j), spaces[j], atol=1e-8)
    np.testing.assert_allclose(model.inverse_transform(model.transform(spaces[2], 2), 2), spaces[2], atol=1e-10)
    assert model.score_ > 1 - 1e-10
    shuffled = [s[np.random.default_rng(seed + i).permutation(500)] for i, s in enumerate(spaces)]
    # unrelated rows: measured pairwise scores 0.10-0.17 (the best rotation of noise, d=12, n=500)
    assert GeneralizedProcrustes().fit(shuffled).score_ < 0.3


@pytest.mark.kernels
def test_generalized_procrustes_streams_and_route_form(tmp_path):
    _, spaces = views(0, noise=0.1)
    whole = GeneralizedProcrustes().fit(spaces)
    streamed = GeneralizedProcrustes()
    for start in range(0, 500, 150):
        streamed.partial_fit([s[start : start + 150] for s in spaces])
    np.testing.assert_allclose(streamed.rotations_, whole.rotations_, atol=1e-9)
    assert streamed.moments_.count == 500
    route = GeneralizedProcrustes().fit(spaces[0], spaces[2])
    np.testing.assert_allclose(route.transform(spaces[0]), route.translate(spaces[0], 0, 1))
    assert route.transform(torch.from_numpy(spaces[0])).shape == (500, 10)
    route.save(tmp_path / "gpa.safetensors")
    loaded = GeneralizedProcrustes.load(tmp_path / "gpa.safetensors")
    np.testing.assert_array_equal(loaded.transform(spaces[0]), route.transform(spaces[0]))
    with pytest.raises(ValueError, match="index: give the space"):
        whole.transform(spaces[0])
    with pytest.raises(ValueError, match="expected the index of a fitted space"):
        whole.transform(spaces[0], 4)
    with pytest.raises(TypeError, match="list of M >= 2"):
        GeneralizedProcrustes().fit(spaces[0])


@pytest.mark.kernels
def test_generalized_procrustes_on_dask_equals_in_memory():
    da = pytest.importorskip("dask.array")
    _, spaces = views(1, noise=0.1)
    memory = GeneralizedProcrustes().fit(spaces)
    lazy = GeneralizedProcrustes().fit([da.from_array(s, chunks=(120, -1)) for s in spaces])
    np.testing.assert_allclose(lazy.rotations_, memory.rotations_, atol=1e-9)
    np.testing.assert_allclose(lazy.pairwise_scores_, memory.pairwise_scores_, atol=1e-12)


# --- UnpairedAlignment -----------------------------------------------------------------------------------------
# A reduced budget (the official notebook's 20 clusters x 30 matchings x 30 QAP restarts took ~1 min per fit before
# issue 26; the defaults now take ~0.5 s at 1,800 x 16)
FAST = {"n_clusters": 8, "n_matchings": 10, "n_restarts": 10, "refine_iter": 10, "refine_clusters": 40}


def clustered(seed: int, n: int = 800, d: int = 12, k: int = 8) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres, spreads = rng.standard_normal((k, d)) * 2, rng.uniform(0.2, 1.0, size=(k, d))
    labels = rng.integers(k, size=n)
    return (centres[labels] + spreads[labels] * rng.standard_normal((n, d))).astype(np.float32)


def test_unpaired_alignment_recovers_without_pairs_and_its_score_tells_failures():
    """Rotated, row-permuted copies of clustered data. At this reduced budget most fits recover the rotation
    (measured 5 of 6 seeds; the full budget recovered the failing case); the property users rely on is that
    ``score_`` tells which: recovered fits scored >= 0.999, the failed one 0.77, unrelated spaces 0.35-0.50."""
    recovered = 0
    for seed in range(4):
        rng = np.random.default_rng(100 + seed)
        x = clustered(seed)
        q = rotation(12, 100 + seed)
        y = (x @ q)[rng.permutation(len(x))]
        model = UnpairedAlignment(random_state=seed, **FAST).fit(x, y)
        good = mean_cosine(model.transform(x), x @ q) > 0.999
        recovered += good
        assert (model.score_ > 0.9) == good, (seed, model.score_)
    assert recovered >= 3
    unrelated = np.stack([rng.permutation(column) for column in y.T], axis=1)  # features shuffled independently
    assert UnpairedAlignment(random_state=0, **FAST).fit(x, unrelated).score_ < 0.9
    assert isinstance(model.transform(torch.from_numpy(x)), torch.Tensor)


def test_unpaired_alignment_parameters_are_checked():
    x = clustered(0, n=100)
    with pytest.raises(ValueError, match="n_clusters: expected an integer >= 2"):
        UnpairedAlignment(n_clusters=1).fit(x, x)
    with pytest.raises(ValueError, match="source: expected at least 24 rows"):
        UnpairedAlignment(n_clusters=12).fit(x[:10], x)
    with pytest.raises(TypeError, match="check"):
        UnpairedAlignment(check="yes").fit(x, x)


# --- FunctionalMap ---------------------------------------------------------------------------------------------
def lfmap_inputs(case: dict) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(case["seed"])
    n, d, noise = case["n"], case["d"], case["noise"]
    angles = rng.uniform(0, 3 * np.pi, size=(n, 3))
    base = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)
    x = base @ rng.standard_normal((6, d)) + noise * rng.standard_normal((n, d))
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    y = (x + noise * rng.standard_normal((n, d))) @ q
    if case["shuffled"]:
        y = y[np.random.default_rng(case["seed"] + 100).permutation(n)]
    return x, y


@pytest.mark.parametrize("key", list(FIXTURE["lfmap"]["cases"]))
def test_functional_map_matches_the_official_code(key):
    case, expected = json.loads(key), FIXTURE["lfmap"]["cases"][key]
    x, y = lfmap_inputs(case)
    pairs = np.stack([np.arange(case["n_anchors"])] * 2, axis=1)
    model = FunctionalMap(n_neighbors=case["k"] - 1, n_eigenvectors=case["num_eigs"]).fit(x, y, pairs)
    accuracy = np.mean(model.correspondence_ == np.arange(case["n"]))
    if case["shuffled"]:
        # unrelated: the energy is flat, so the official L-BFGS stopping point and ours differ (0.065 vs 0.057)
        assert model.similarity_ < 0.15 and expected["similarity"] < 0.15 and accuracy == expected["p2p_accuracy"]
    else:
        assert model.similarity_ == pytest.approx(expected["similarity"], abs=1e-6)
        np.testing.assert_allclose(np.abs(model.map_), np.asarray(expected["abs_C"]), atol=5e-6)
        assert accuracy == expected["p2p_accuracy"]
        assert mean_cosine(model.transform(x), y) > 0.9


@pytest.mark.parametrize("seed", SEEDS)
def test_functional_map_route_form_scores_parallel_rows(seed):
    """Without pairs the rows are parallel: C is the ground-truth map. Measured over seeds 0-2: similarity
    0.72-0.82 for noisy rotated copies, 0.20-0.22 with shuffled rows (the constant functions always match)."""
    x, y = lfmap_inputs({"seed": seed, "n": 200, "d": 8, "noise": 0.05, "shuffled": False})
    parallel = FunctionalMap(n_eigenvectors=20).fit(x, y)
    shuffled = FunctionalMap(n_eigenvectors=20).fit(x, y[np.random.default_rng(seed).permutation(200)])
    assert parallel.similarity_ > 0.6 and shuffled.similarity_ < 0.35
    assert mean_cosine(parallel.transform(x), y) > 0.99


def test_functional_map_errors():
    x, y = lfmap_inputs({"seed": 3, "n": 200, "d": 8, "noise": 0.05, "shuffled": False})
    with pytest.raises(ValueError, match="pairs: without pairs the rows must be parallel"):
        FunctionalMap().fit(x, y[:100])
    with pytest.raises(ValueError, match="n_eigenvectors: expected fewer than"):
        FunctionalMap(n_eigenvectors=500).fit(x, y)
    with pytest.raises(ValueError, match="transfer"):
        FunctionalMap(transfer="ridge").fit(x, y)
