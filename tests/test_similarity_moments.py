"""Closed-form permutation tests (``permutation_test(method="moments")``) against the permutations themselves, and the
batched null against the loop at tiny N (issue 27)."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

from latentstitch import similarity as sim
from latentstitch.cli import main
from latentstitch.similarity.inference import _closed_form
from latentstitch.similarity.inference._closed_form import closed_form_test
from latentstitch.similarity.inference._null_kernels import NULL_KERNELS
from latentstitch.similarity.measures._cka import center_gram, gram_rbf
from latentstitch.similarity.measures._registry import get_measure

CLOSED = [("linear_cka", {}), ("debiased_cka", {}), ("rbf_cka", {}), ("rbf_cka", {"debiased": True})]


def _pair(n: int, seed: int, strength: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3)) ** 3  # skewed rows: the diagonal terms of the moments matter
    y = rng.standard_normal((n, 2)) + strength * x[:, :2]
    return x, y


def _enumerated(name: str, options: dict, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The measure under every permutation of y's rows, from its definition: the centred (U-centred) Gram matrices,
    y's permuted by fancy indexing, the normalised Frobenius products at once; tied to the measure at a few."""
    perms = np.array(list(itertools.permutations(range(x.shape[0]))))
    debiased = name == "debiased_cka" or options.get("debiased", False)
    grams = []
    for t in (torch.from_numpy(x), torch.from_numpy(y)):
        gram = gram_rbf(t) if name == "rbf_cka" else (t @ t.T)
        grams.append(center_gram(gram.to(torch.float64), debiased).numpy())
    k, m = grams
    values = (k[None] * m[perms[:, :, None], perms[:, None, :]]).sum(axis=(1, 2)) / np.sqrt(
        (k * k).sum() * (m * m).sum()
    )
    spec = get_measure(name)
    for i in range(0, len(perms), max(1, len(perms) // 4)):
        assert float(spec(x, y[perms[i]], **options)) == pytest.approx(values[i], rel=1e-9, abs=1e-12)
    return values


@pytest.mark.parametrize("name, options, n", [(*case, n) for case in CLOSED for n in (5, 6)] + [("linear_cka", {}, 7)])
def test_moments_equal_the_enumeration_of_every_permutation(name, options, n):
    x, y = _pair(n, seed=n)
    values = _enumerated(name, options, x, y)
    closed = closed_form_test(get_measure(name), torch.from_numpy(x), torch.from_numpy(y), options)
    assert closed.mean == pytest.approx(values.mean(), rel=1e-9, abs=1e-12)
    assert closed.std == pytest.approx(values.std(), rel=1e-9)
    if n >= 6:  # the third moment's formula needs n >= 6
        skewness = ((values - values.mean()) ** 3).mean() / values.std() ** 3
        assert closed.skewness == pytest.approx(skewness, rel=1e-7, abs=1e-9)
        assert closed.exact


def test_sampled_skewness_estimates_the_exact_one(monkeypatch):
    x, y = _pair(600, seed=3)
    spec = get_measure("linear_cka")
    exact = closed_form_test(spec, torch.from_numpy(x), torch.from_numpy(y), {})
    monkeypatch.setattr(_closed_form, "EXACT_ROWS", 100)
    sampled = [closed_form_test(spec, torch.from_numpy(x), torch.from_numpy(y), {}, seed=s) for s in range(4)]
    assert all(not s.exact and s.rows == 128 for s in sampled)
    assert all(s.mean == exact.mean and s.std == exact.std for s in sampled)  # never sampled
    spread = np.std([s.skewness for s in sampled])
    assert abs(np.mean([s.skewness for s in sampled]) - exact.skewness) < 4 * spread + 0.05 * abs(exact.skewness)


def _agrees_in_the_tail(x, y, name, permutations=1000):
    closed = sim.permutation_test(x, y, name, method="moments")
    drawn = sim.permutation_test(x, y, name, method="batched", permutations=permutations, seed=1)
    p = drawn.p_value
    # Monte Carlo error of log(p_drawn): sqrt((1 - p) / (p K)); 4 of them, plus 25% for the three-moment fit
    tolerance = 4 * math.sqrt((1 - p) / (p * permutations)) + math.log(1.25)
    assert abs(math.log(closed.p_value) - math.log(p)) < tolerance, (closed.p_value, p, tolerance)
    assert closed.null_mean == pytest.approx(drawn.null_mean, abs=4 * drawn.null_std / math.sqrt(permutations))


def test_closed_form_p_values_agree_with_drawn_permutations_on_digits():
    from sklearn.datasets import load_digits

    digits = load_digits().data[:200].astype(np.float32)
    rng = np.random.default_rng(0)
    transformed = np.tanh(digits @ rng.standard_normal((64, 16)).astype(np.float32) / 30)
    noisy = transformed + 5.0 * transformed.std() * rng.standard_normal(transformed.shape).astype(np.float32)
    _agrees_in_the_tail(digits, noisy, "linear_cka")


@pytest.mark.parametrize("name", ["linear_cka", "debiased_cka"])
def test_closed_form_p_values_agree_with_drawn_permutations_on_synthetic_data(name):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((200, 12))
    y = 0.12 * x[:, :6] + rng.standard_normal((200, 6))
    _agrees_in_the_tail(x, y, name)


def test_closed_form_is_calibrated_on_independent_pairs():
    rng = np.random.default_rng(11)
    p_values = []
    for _ in range(60):
        x, y = rng.standard_normal((30, 4)), rng.exponential(size=(30, 3))
        p_values.append(sim.permutation_test(x, y, "linear_cka", method="moments").p_value)
    rejections = int(np.sum(np.array(p_values) < 0.05))
    assert rejections <= stats.binom.ppf(0.999, 60, 0.05)
    assert stats.kstest(p_values, "uniform").pvalue > 1e-3


def test_auto_uses_the_closed_form_only_where_it_exists():
    x, y = _pair(40, seed=1)
    assert sim.permutation_test(x, y, "linear_cka").method == "moments"
    assert sim.permutation_test(x, y, "mutual_knn", k=3, permutations=9).method == "batched"
    assert sim.permutation_test(x, y, "linear_cka", groups=np.arange(40) % 2, permutations=9).method == "batched"
    assert sim.permutation_test(x[:12], y[:12], "linear_cka", permutations=9).method == "batched"
    with pytest.raises(ValueError, match="method: no closed-form permutation null for the measure 'mean_cca'"):
        sim.permutation_test(x, y, "mean_cca", method="moments")
    test = sim.permutation_test(x[:6], y[:6], "linear_cka")
    assert test.method == "exact" and test.permutations == 720 and "all 720 permutations" in str(test)


# --- issue 27: batched = loop at every N, tiny N says so, seeds checked -------------------------------------------


def _small_cases():
    for name, spec in sim.MEASURES.items():
        if name in NULL_KERNELS:
            for n in (2, 3, 5):
                if n >= spec.min_samples:
                    yield name, n


@pytest.mark.parametrize("name, n", list(_small_cases()))
@pytest.mark.kernels
def test_batched_null_equals_the_loop_at_tiny_n(name, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 3)).astype(np.float32)
    y = (x @ rng.standard_normal((3, 3)) + rng.standard_normal((n, 3))).astype(np.float32)
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in ("batched", "loop"):
            try:
                results[method] = sim.permutation_test(x, y, name, permutations=10, method=method)
            except ValueError as error:  # undefined at this N (the same for both)
                results[method] = type(error)
    if isinstance(results["loop"], type):
        assert results["batched"] is results["loop"]
        return
    batched, loop = results["batched"], results["loop"]
    np.testing.assert_allclose(batched.null, loop.null, rtol=2e-5, atol=2e-5)
    assert batched.p_value == loop.p_value


def test_two_float32_rows_give_p_one_and_say_so():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
    for method in ("batched", "loop", "auto"):
        with pytest.warns(sim.SmallSampleWarning, match="2 samples have only 2 orders"):
            assert sim.permutation_test(x, y, permutations=50, method=method).p_value == 1.0


@pytest.mark.parametrize("seed", [-1, 2**40, 1.5, "3"])
def test_seeds_are_checked_by_the_shared_rule(seed):
    x, y = _pair(20, seed=0)
    with pytest.raises((ValueError, TypeError), match="seed"):
        sim.permutation_test(x, y, seed=seed)
    with pytest.raises((ValueError, TypeError), match="seed"):
        sim.pairwise_test([x], [y], seed=seed)
    with pytest.raises(TypeError, match="seed= is not an argument of pairwise"):
        sim.pairwise([x, y], seed=seed)


def test_pairwise_names_its_own_argument_for_one_array():
    x, _ = _pair(20, seed=0)
    with pytest.raises(ValueError, match=r"representations: expected a list .* got one array of shape \(20, 3\)"):
        sim.pairwise(x)
    with pytest.raises(ValueError, match="against: expected a list"):
        sim.pairwise([x], against=x)


def test_pairwise_test_uses_holm_over_closed_form_p_values():
    rng = np.random.default_rng(2)
    a = [rng.standard_normal((50, 4)) for _ in range(2)]
    b = [a[1] @ rng.standard_normal((4, 3)) + rng.standard_normal((50, 3)), rng.standard_normal((50, 2))]
    test = sim.pairwise_test(a, b, progress=False)
    assert test.correction == "holm" and test.method == "moments" and test.permutations == 0
    assert test.best == (1, 0) and test.global_p_value < 1e-4
    assert (test.p_values >= test.p_values_uncorrected - 1e-15).all()
    order = np.sort(test.p_values_uncorrected.ravel())
    assert test.p_values.min() == pytest.approx(min(1.0, 4 * order[0]))
    with pytest.raises(ValueError, match="needs the joint null of all pairs"):
        sim.pairwise_test(a, b, correction="max", method="moments")


def test_compare_says_when_rows_look_unpaired(tmp_path, capsys):
    from sklearn.datasets import load_digits

    digits = load_digits().data[:400].astype(np.float32)
    transformed = np.tanh(digits @ np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32) / 30)
    np.save(tmp_path / "a.npy", digits)
    np.save(tmp_path / "paired.npy", transformed)
    np.save(tmp_path / "shuffled.npy", transformed[np.random.default_rng(1).permutation(400)])
    common = ["--measures", "linear_cka", "--quiet"]
    assert main(["compare", str(tmp_path / "a.npy"), str(tmp_path / "paired.npy"), *common]) == 0
    assert "look unpaired" not in capsys.readouterr().out
    assert main(["compare", str(tmp_path / "a.npy"), str(tmp_path / "shuffled.npy"), *common]) == 0
    out = capsys.readouterr().out
    assert out.count("the rows look unpaired") == 1 and "--id-column" in out
