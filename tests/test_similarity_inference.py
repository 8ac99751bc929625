"""Permutation tests, bootstrap intervals and the correction over pairs: batched nulls equal the loop over the
measure; p-values are uniform when nothing is shared and small when something is; intervals cover a known population
value at about their level; grouped permutations keep groups together; small samples are flagged."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import pytest
import torch
from scipy import stats

from latentstitch import similarity as sim
from latentstitch.similarity.inference._null_kernels import NULL_KERNELS
from latentstitch.similarity.inference._permutation_test import null_distribution
from latentstitch.similarity.inference._resampling import Permutations
from latentstitch.similarity.measures._registry import prepare_pair


def related(n=40, p=5, q=4, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, p)) + 1.0
    y = np.tanh(x @ rng.standard_normal((p, q))) + 0.5 * rng.standard_normal((n, q))
    return x, y


# --- batched nulls equal the loop over the measure ------------------------------------------------------------

BATCHED = [(name, {}) for name in sorted(NULL_KERNELS)] + [
    ("linear_cka", {"debiased": True}),
    ("rbf_cka", {"debiased": True, "bandwidth": 0.5}),
    ("mutual_knn", {"k": 4, "clamp_quantile": 0.9}),
    ("svcca", {"keep": 2}),
    ("gulp", {"ridge": 0.1}),
    ("permutation", {"score": "euclidean"}),
    ("rsa", {"rdm": "correlation", "correlation": "pearson"}),
    ("cknna", {"k": 5, "normalize": False}),
]


@pytest.mark.parametrize(("name", "options"), BATCHED, ids=[f"{n}-{o}" if o else n for n, o in BATCHED])
@pytest.mark.kernels
def test_batched_null_equals_the_loop(name, options, device):
    spec = sim.MEASURES[name]
    x, y = (torch.from_numpy(v).to(device) for v in related())
    xt, yt = prepare_pair(x, y, min_rows=2, measure=name)
    perms = list(Permutations(40, 3, groups=np.arange(40) % 3).batches(7, 3))  # uneven batches, grouped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batched, used = null_distribution(spec, xt, yt, options, perms, batched=True)
        looped, _ = null_distribution(spec, xt, yt, options, perms, batched=False)
    assert used and batched.shape == (7,)
    np.testing.assert_allclose(batched, looped, rtol=1e-9, atol=1e-12)
    assert np.ptp(looped) > 0  # the permutations really changed the value


def test_batched_null_in_float32_matches_the_float64_loop(device):
    x, y = related(n=300, p=20, q=15)
    xt32, yt32 = (torch.from_numpy(v).float().to(device) for v in (x, y))
    perms = list(Permutations(300, 1).batches(5, 5))
    for name in ("linear_cka", "debiased_cka", "mean_cca"):
        batched, _ = null_distribution(sim.MEASURES[name], xt32, yt32, {}, perms, batched=True)
        looped, _ = null_distribution(sim.MEASURES[name], *prepare_pair(x, y, min_rows=2, measure=name), {}, perms)
        np.testing.assert_allclose(batched, looped, atol=2e-5)


@pytest.mark.kernels
def test_batch_size_does_not_change_the_null():
    x, y = related()
    one = sim.permutation_test(x, y, "linear_cka", permutations=20, batch_size=1)
    many = sim.permutation_test(x, y, "linear_cka", permutations=20, batch_size=7)
    np.testing.assert_allclose(one.null, many.null, rtol=1e-12)


# --- what a result says -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["linear_cka", "debiased_cka", "mutual_knn", "cknna", "pnka", "gulp", "permutation"])
def test_related_data_get_the_smallest_p_value(name):
    x, y = related(n=80)
    if name == "permutation":  # it aligns neurons one to one: relate them so (it misses a rotated relation)
        y = x[:, ::-1] + 0.7 * np.random.default_rng(1).standard_normal(x.shape)
    result = sim.permutation_test(x, y, name, permutations=99)
    if result.method == "moments":  # the closed form is not bounded by 1 / (permutations + 1)
        assert result.p_value < 1 / 100
    else:
        assert result.p_value == pytest.approx(1 / 100)
    assert result.z_score > 3
    assert result.value == pytest.approx(float(sim.MEASURES[name](x, y)))
    if np.isfinite(result.calibrated):
        assert 0 < result.calibrated <= 1
    # a distance's null sits above its value, a similarity's below
    sign = 1 if sim.MEASURES[name].kind == "similarity" else -1
    assert sign * (result.value - result.null_mean) > 0


def test_calibrated_score_and_null_summary():
    x, y = related(n=60)
    result = sim.permutation_test(x, y, "linear_cka", permutations=200, seed=4, method="batched")
    assert result.null_mean == pytest.approx(result.null.mean())
    assert result.null_std == pytest.approx(result.null.std(ddof=1))
    assert result.calibrated == pytest.approx((result.value - result.null_mean) / (1 - result.null_mean))
    assert result.permutations == 200 and result.batched and not result.trivial
    assert "p = 0.004975" in str(result)
    identical = sim.permutation_test(x, 3 * x + 1, "linear_cka", permutations=50)
    assert identical.calibrated == pytest.approx(1.0)


def test_seeds_and_options_reach_the_null():
    x, y = related()
    first = sim.permutation_test(x, y, "mutual_knn", permutations=30, seed=1, k=3)
    again = sim.permutation_test(x, y, "mutual_knn", permutations=30, seed=1, k=3)
    other = sim.permutation_test(x, y, "mutual_knn", permutations=30, seed=2, k=3)
    np.testing.assert_array_equal(first.null, again.null)
    assert not np.array_equal(first.null, other.null)
    assert first.value == sim.mutual_knn(x, y, 3)


def test_row_options_stay_with_x():
    x, y = related(n=50)
    confounder = np.random.default_rng(9).standard_normal((50, 3)) + x[:, :3]
    result = sim.permutation_test(x, y, "deconfounded_cka", permutations=10, confounder=confounder)
    perms = next(Permutations(50, 0).batches(10, 10))
    expected = [sim.deconfounded_cka(x, y[p.numpy()], confounder) for p in perms]
    np.testing.assert_allclose(result.null, expected, rtol=1e-10)
    interval = sim.bootstrap_ci(x, y, "deconfounded_cka", n_boot=5, confounder=confounder)
    assert interval.low <= interval.high


def test_errors_name_the_argument():
    x, y = related()
    with pytest.raises(ValueError, match="unknown measure"):
        sim.permutation_test(x, y, "cka")
    with pytest.raises(ValueError, match="permutations: expected an integer >= 1"):
        sim.permutation_test(x, y, permutations=0)
    with pytest.raises(ValueError, match="the measure 'pnka' has no batched"):
        sim.permutation_test(x, y, "pnka", batched=True, permutations=3)
    with pytest.raises(ValueError, match="groups: expected one label per sample"):
        sim.permutation_test(x, y, groups=np.zeros(3), permutations=3)
    with pytest.raises(ValueError, match="no two groups have the same size"):
        sim.permutation_test(x, y, groups=np.r_[np.zeros(10), np.ones(30)], group_mode="whole", permutations=3)
    with pytest.raises(ValueError, match="mutual_knn cannot be bootstrapped"):
        sim.bootstrap_ci(x, y, "mutual_knn")
    with pytest.raises(ValueError, match=r"level: expected a finite number in \(0, 1\)"):
        sim.bootstrap_ci(x, y, level=95)
    with pytest.raises(ValueError, match="interval: expected one of"):
        sim.bootstrap_ci(x, y, interval="student")
    with pytest.raises(TypeError, match=r"permutations= is not an argument of pairwise .* pairwise_test\("):
        sim.pairwise([x, y], permutations=10)
    with pytest.raises(TypeError, match=r"plot= .* heatmap\("):
        sim.pairwise([x, y], plot="cka.png")


# --- groups ------------------------------------------------------------------------------------------------------


def test_within_group_permutations_keep_rows_in_their_group():
    groups = np.repeat(["a", "b", "c", "d"], [3, 5, 2, 6])
    perms = np.concatenate([p.numpy() for p in Permutations(16, 0, groups, "within").batches(50, 16)])
    assert (groups[perms] == groups[None, :]).all()
    assert len({tuple(p) for p in perms}) > 40  # and they do move rows


def test_whole_group_permutations_move_groups_as_blocks():
    groups = np.array([0, 1, 0, 2, 1, 2, 3, 3, 3])  # groups 0, 1, 2 have 2 rows; group 3 has 3 and cannot move
    members = {g: np.flatnonzero(groups == g) for g in range(4)}
    perms = np.concatenate([p.numpy() for p in Permutations(9, 0, groups, "whole").batches(40, 8)])
    seen = set()
    for perm in perms:
        for g, rows in members.items():
            targets = perm[rows]
            source = groups[targets[0]]
            np.testing.assert_array_equal(targets, members[source])  # a whole group, in order
            seen.add((g, source))
    assert {(g, s) for g in range(3) for s in range(3)} <= seen and (3, 3) in seen


@pytest.mark.slow
def test_p_values_are_uniform_when_nothing_is_shared():
    # 150 independent datasets, 99 permutations each: Kolmogorov-Smirnov against the uniform distribution. The
    # batched linear CKA null and the loop over PNKA (no batched form) are both checked; a within-class test on
    # data that share only their class structure too.
    rng = np.random.default_rng(2024)
    p_cka, p_pnka, p_within, p_plain = [], [], [], []
    classes = np.repeat(np.arange(3), 10)
    for seed in range(150):
        x, y = rng.standard_normal((30, 4)), rng.standard_normal((30, 3))
        p_cka.append(sim.permutation_test(x, y, permutations=99, seed=seed).p_value)
        if seed < 60:
            p_pnka.append(sim.permutation_test(x, y, "pnka", permutations=49, seed=seed).p_value)
        # both depend on the class, nothing else: related overall, unrelated within classes
        means_x, means_y = 2 * rng.standard_normal((3, 4)), 2 * rng.standard_normal((3, 3))
        xc, yc = means_x[classes] + x, means_y[classes] + y
        p_within.append(sim.permutation_test(xc, yc, permutations=99, seed=seed, groups=classes).p_value)
        if seed < 20:
            p_plain.append(sim.permutation_test(xc, yc, permutations=99, seed=seed).p_value)
    for p_values in (p_cka, p_pnka, p_within):
        assert stats.kstest(p_values, "uniform").pvalue > 1e-3
    assert np.median(p_plain) < 0.05  # without groups, the shared class structure is (rightly) detected


# --- the correction over pairs ------------------------------------------------------------------------------------


def test_pairwise_test_finds_the_related_layer():
    rng = np.random.default_rng(0)
    a = {f"a{i}": rng.standard_normal((60, 4 + i)) for i in range(3)}
    b = {f"b{j}": rng.standard_normal((60, 5)) for j in range(3)}
    b["b1"] = a["a2"] @ rng.standard_normal((6, 5)) + 0.5 * rng.standard_normal((60, 5))
    test = sim.pairwise_test(a, b, "linear_cka", permutations=99, correction="max", progress=False)
    assert test.values.shape == (3, 3) and test.best == (2, 1)
    assert test.values[2, 1] == pytest.approx(sim.cka(a["a2"], b["b1"]))
    assert test.global_p_value == pytest.approx(0.01)
    assert (test.p_values >= test.p_values_uncorrected - 1e-12).all()  # correcting never helps
    assert test.p_values[0, 0] > 0.05
    assert "a2 ~ b1" in str(test)
    matrix = sim.pairwise(a, "linear_cka", against=b)
    np.testing.assert_allclose(matrix, test.values)


def test_pairwise_test_heatmap_stars_significant_pairs(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 4))
    test = sim.pairwise_test(
        [x, rng.standard_normal((40, 3))], [x @ rng.standard_normal((4, 4))], permutations=19, progress=False
    )
    assert sim.heatmap(test, tmp_path / "grid.png") == tmp_path / "grid.png"
    assert test.p_values.shape == (2, 1) and (tmp_path / "grid.png").stat().st_size > 1000


@pytest.mark.slow
def test_max_correction_gives_uniform_p_values_under_the_global_null():
    rng = np.random.default_rng(7)
    corrected, naive_min = [], []
    for seed in range(100):
        a = [rng.standard_normal((25, 2)), rng.standard_normal((25, 6))]
        b = [rng.standard_normal((25, 3)), rng.standard_normal((25, 5))]
        test = sim.pairwise_test(a, b, "linear_cka", permutations=49, seed=seed, correction="max", progress=False)
        corrected.append(test.global_p_value)
        naive_min.append(test.p_values_uncorrected.min())
    assert stats.kstest(corrected, "uniform").pvalue > 1e-3
    # the uncorrected minimum over 4 pairs is not a p-value: far too many small ones
    assert np.mean(np.array(naive_min) <= 0.1) > 0.2


def test_mean_correction_is_one_omnibus_test():
    rng = np.random.default_rng(3)
    a = [rng.standard_normal((40, 3)) for _ in range(2)]
    test = sim.pairwise_test(
        a,
        [v + 0.3 * rng.standard_normal((40, 3)) for v in a],
        "linear_cka",
        permutations=49,
        correction="mean",
        progress=False,
    )
    assert test.global_p_value == pytest.approx(0.02)
    np.testing.assert_array_equal(test.p_values, test.p_values_uncorrected)


# --- bootstrap ------------------------------------------------------------------------------------------------------


def test_bootstrap_interval_contains_the_value_and_reports_the_spread():
    x, y = related(n=100)
    result = sim.bootstrap_ci(x, y, "debiased_cka", n_boot=200, seed=1)
    assert result.low < result.value < result.high
    assert result.std_error == pytest.approx(result.replicates.std(ddof=1))
    assert result.replicates.shape == (200,) and "95% CI" in str(result)
    basic = sim.bootstrap_ci(x, y, "debiased_cka", n_boot=200, seed=1, interval="basic")
    assert basic.low == pytest.approx(2 * result.value - result.high)  # same draws, reflected
    wider = sim.bootstrap_ci(x, y, "debiased_cka", n_boot=200, seed=1, level=0.99)
    assert wider.low <= result.low and wider.high >= result.high


def test_cluster_bootstrap_draws_whole_groups():
    x, y = related(n=60)
    groups = np.repeat(np.arange(12), 5)
    seen = []

    def measure(a, b):
        seen.append(len(a))
        return sim.cka(a, b)

    spec = sim.MEASURES["linear_cka"]
    sim.MEASURES["_counting"] = type(spec)(**{**spec.__dict__, "name": "_counting", "function": measure, "options": {}})
    try:
        sim.bootstrap_ci(x, y, "_counting", n_boot=20, groups=groups)
    finally:
        del sim.MEASURES["_counting"]
    assert set(seen) == {60}  # 12 groups of 5 drawn each time


@pytest.mark.slow
def test_bootstrap_intervals_cover_a_known_population_value():
    # y = x A + noise with x ~ N(0, I): population linear CKA = ||A||_F^2 / (||I|| ||A^T A + s^2 I||), which debiased
    # CKA estimates without the small-sample bias (half-sampling: no row twice). 60 datasets of n = 100 (coverage
    # standard error ~0.03); measured over 120 datasets: 95% percentile 0.95, BCa 0.96, 50% percentile 0.53.
    a = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.2, 0.0, 0.5]])
    noise = 1.5
    population = np.linalg.norm(a) ** 2 / (np.linalg.norm(np.eye(3)) * np.linalg.norm(a.T @ a + noise**2 * np.eye(3)))
    hits = {"percentile": [], "bca": [], "half": []}
    for seed in range(60):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((100, 3))
        y = x @ a + noise * rng.standard_normal((100, 3))
        bca = sim.bootstrap_ci(
            x,
            y,
            "debiased_cka",
            n_boot=100,
            seed=seed,
            interval="bca",
            jackknife=20,
            method="gram",  # faster at n=100
        )
        low, high = np.quantile(bca.replicates, [0.025, 0.975])
        hits["percentile"].append(low <= population <= high)
        hits["bca"].append(bca.low <= population <= bca.high)
        half_low, half_high = np.quantile(bca.replicates, [0.25, 0.75])
        hits["half"].append(half_low <= population <= half_high)
    assert np.mean(hits["percentile"]) >= 0.86 and np.mean(hits["bca"]) >= 0.86  # 95% nominal, 3 SE margin
    assert 0.3 <= np.mean(hits["half"]) <= 0.7  # a 50% interval covers about half the time: calibrated, not wide


@pytest.mark.parametrize(
    ("measure", "make", "scheme"),
    [
        ("linear_cka", lambda: sim.StreamingCKA(), "poisson"),
        ("debiased_cka", lambda: sim.StreamingCKA(debiased=True), "half"),  # auto: no row twice
        ("gulp", lambda: sim.StreamingGULP(), "poisson"),
    ],
)
def test_streaming_bootstrap_equals_in_memory_with_the_same_weights(measure, make, scheme):
    x, y = related(n=90, p=6, q=5)
    stream = sim.StreamingBootstrap(make(), replicates=12, seed=5)
    for start, stop in ((0, 17), (17, 18), (18, 60), (60, 90)):
        stream.update(x[start:stop], y[start:stop])
    streamed = stream.compute()
    in_memory = sim.bootstrap_ci(x, y, measure, n_boot=12, seed=5, scheme=scheme)
    assert streamed.scheme == in_memory.scheme == scheme
    np.testing.assert_allclose(streamed.replicates, in_memory.replicates, rtol=1e-10)
    assert streamed.value == pytest.approx(in_memory.value) and streamed.samples == 90
    # two accumulators fed disjoint rows with their global offsets merge into the same result
    left = sim.StreamingBootstrap(make(), replicates=12, seed=5).update(x[:40], y[:40])
    right = sim.StreamingBootstrap(make(), replicates=12, seed=5)
    right.update(x[40:], y[40:], start=40)
    np.testing.assert_allclose(left.merge(right).replicate_values(), in_memory.replicates, rtol=1e-10)


def test_self_pair_free_estimators_are_never_given_a_row_twice():
    x, y = related(n=60)
    with pytest.raises(ValueError, match="scheme: debiased_cka leaves out pairs of a sample with itself"):
        sim.bootstrap_ci(x, y, "debiased_cka", scheme="multinomial")
    with pytest.raises(ValueError, match="leaves out pairs"):
        sim.bootstrap_ci(x, y, "linear_cka", scheme="poisson", debiased=True)
    with pytest.raises(ValueError, match="scheme: this stream's estimator leaves out pairs"):
        sim.StreamingBootstrap(sim.StreamingCKA(debiased=True), scheme="poisson")
    half = sim.bootstrap_ci(x, y, "debiased_cka", n_boot=50)
    assert half.scheme == "half" and half.low < half.value < half.high


@pytest.mark.kernels
def test_streaming_bootstrap_on_dask_equals_in_memory():
    da = pytest.importorskip("dask.array")
    x, y = related(n=80, p=5, q=4)
    stream = sim.StreamingBootstrap(sim.StreamingR2(), replicates=6, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stream.update(da.from_array(x, chunks=(23, -1)), da.from_array(y, chunks=(23, -1)))
    in_memory = sim.bootstrap_ci(x, y, "r2_linear", n_boot=6, seed=2, scheme="poisson")
    assert stream.compute().scheme == "poisson"
    np.testing.assert_allclose(stream.replicate_values(), in_memory.replicates, rtol=1e-10)


@pytest.mark.kernels
def test_row_weights_do_not_depend_on_chunks():
    for scheme, (mean, variance) in (("poisson", (1.0, 1.0)), ("half", (0.5, 0.25))):
        whole = sim.row_weights(3, 0, 20_000, 7, scheme)
        parts = [sim.row_weights(3, a, b, 7, scheme) for a, b in ((0, 1), (1, 333), (333, 20_000))]
        np.testing.assert_array_equal(whole, np.concatenate(parts))
        # Poisson(1): mean and variance 1; Bernoulli(1/2): 1/2 and 1/4 (standard errors ~0.003)
        assert abs(whole.mean() - mean) < 0.02 and abs(whole.var() - variance) < 0.03
    assert not np.array_equal(sim.row_weights(3, 0, 100, 2), sim.row_weights(4, 0, 100, 2))


# --- small samples ------------------------------------------------------------------------------------------------


def test_small_samples_are_flagged_at_the_callers_line():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((12, 30)), rng.standard_normal((12, 20))
    with pytest.warns(sim.SmallSampleWarning, match="mean_cca, r2_cca") as record:
        values = sim.compare(x, y, measures=["linear_cka", "mean_cca", "r2_cca"])
    assert values.trivial == ("mean_cca", "r2_cca") and values.samples == 12 and values.widths == (30, 20)
    assert values["mean_cca"] == pytest.approx(1.0)  # what "trivial" means: identical, whatever the data
    assert {w.filename for w in record if w.category is sim.SmallSampleWarning} == {__file__}
    with pytest.warns(sim.SmallSampleWarning) as record:
        result = sim.permutation_test(x, y, "r2_linear", permutations=5)
    small = [w for w in record if w.category is sim.SmallSampleWarning]
    assert result.trivial and len(small) == 1 and small[0].filename == __file__
    with pytest.warns(sim.SmallSampleWarning) as record:
        assert sim.r2_linear(x, y) == pytest.approx(1.0)
    assert [w.filename for w in record if w.category is sim.SmallSampleWarning] == [__file__]
    assert not sim.is_trivial("r2_linear", 12, 5, 30)  # r2_linear fits x only: a wide y is no problem
    assert sim.is_trivial("r2_linear", 12, 11, 3) and not sim.is_trivial("linear_cka", 12, 30, 30)
    assert sim.is_trivial("gulp", 12, 30, 30) and not sim.is_trivial("gulp", 12, 30, 30, {"ridge": 0.1})  # regularised


def test_compare_without_trivial_measures_stays_quiet():
    x, y = related(n=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sim.SmallSampleWarning)
        values = sim.compare(x, y)
    assert values.trivial == () and isinstance(values, Mapping) and values.to_dict() == dict(values)


def test_compare_leaves_out_what_cannot_be_computed_and_says_why_when_asked():
    x, _ = related(n=40)
    constant = np.ones_like(x)
    asked = ["linear_cka", "matched_cosine", "procrustes_distance"]
    with pytest.raises(ValueError):  # by default an undefined measure raises, as the measure itself does
        sim.compare(x, constant, asked)
    result = sim.compare(x[:, :-1], constant, asked, skip_undefined=True)
    assert result.measures == tuple(asked) and set(result) | set(result.skipped) == set(asked)
    assert result.skipped["matched_cosine"].startswith("compares rows in one space; the widths differ")
    assert result.skipped["linear_cka"].startswith("undefined here: ")  # a constant side: CKA is 0 / 0
    assert all(name not in result for name in result.skipped)


def test_compare_adds_each_measures_permutation_test_and_subsamples_the_quadratic_ones():
    x, y = related(n=60)
    result = sim.compare(x, y, ["linear_cka", "mutual_knn"], permutations=19, seed=3, max_rows=45)
    assert len(result.subset) == 45 and np.all(np.diff(result.subset) > 0)
    assert result.subsampled("mutual_knn") and not result.subsampled("linear_cka")
    alone = sim.permutation_test(x, y, "linear_cka", permutations=19, seed=3)
    assert result.tests["linear_cka"].p_value == alone.p_value and result["linear_cka"] == alone.value
    subset = sim.permutation_test(x[result.subset], y[result.subset], "mutual_knn", permutations=19, seed=3)
    assert result.tests["mutual_knn"].p_value == subset.p_value and result["mutual_knn"] == subset.value
    plain = sim.compare(x, y, ["linear_cka", "mutual_knn"])  # no options: every row, no tests (as before)
    assert plain.subset is None and plain.tests == {} and plain["linear_cka"] == pytest.approx(result["linear_cka"])
    rng = np.random.default_rng(0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        small = sim.compare(rng.standard_normal((12, 30)), rng.standard_normal((12, 20)), ["mean_cca"], permutations=9)
    assert small.trivial == ("mean_cca",) and small.tests == {}  # a trivial value is not tested
    assert [w.category for w in record] == [sim.SmallSampleWarning]  # said once, not again by CCA's rank warnings


# --- results as types ---------------------------------------------------------------------------------------------


def test_results_are_dataclasses_with_json_ready_dicts():
    import json

    x, y = related()
    test = sim.permutation_test(x, y, permutations=9)
    record = test.to_dict()
    assert record["p_value"] == test.p_value and record["calibrated"] == test.calibrated
    assert record["null"] == test.null.tolist()
    interval = sim.bootstrap_ci(x, y, n_boot=5).to_dict()
    assert {"low", "high", "level", "replicates", "trivial"} <= set(interval)
    grid = sim.pairwise_test([x], [y, x], permutations=9, progress=False).to_dict()
    assert grid["best"] == [0, 1] and grid["labels_against"] == ["0", "1"]
    values = sim.compare(x, y, measures=["linear_cka"])
    assert values.to_dict() == {"linear_cka": values["linear_cka"]} and str(values) == str(values.to_dict())
    json.dumps([record, interval, grid, values.to_dict()])
