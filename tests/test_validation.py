"""The shared validation layer: what each check accepts, what it refuses, and that every refusal names the argument."""

import math

import numpy as np
import pytest
import torch

from latentstitch import LeastSquares, relative_projection
from latentstitch._core.arrays import as_float_tensor, wrap_like
from latentstitch._core.params import (
    check_choice,
    check_float_dtype,
    check_int,
    check_kwargs,
    check_number,
    check_probability,
    check_seed,
)


def test_lists_are_read_as_float64_arrays_and_give_numpy_back():
    t = as_float_tensor([[1, 2], [3, 4]], "x")
    assert t.dtype == torch.float64 and t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert isinstance(wrap_like(t * 2, [[1, 2]]), np.ndarray)
    x = np.random.default_rng(0).normal(size=(20, 3))
    np.testing.assert_array_equal(relative_projection(x.tolist(), x[:4].tolist()), relative_projection(x, x[:4]))
    np.testing.assert_allclose(LeastSquares().fit(x.tolist(), (2 * x).tolist()).coef_, 2 * np.eye(3), atol=1e-12)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (np.arange(4).reshape(2, 2), TypeError, r"x: expected a floating-point array, got dtype int64"),
        (torch.ones(2, 2, dtype=torch.uint8), TypeError, "x: expected a floating-point tensor"),
        ([[1.0, 2.0], [3.0]], ValueError, "x: could not be read as a numeric array"),
        ([["a", "b"]], TypeError, "x: expected numbers"),
        ("1 2 3", TypeError, "x: expected an array"),
        (None, TypeError, "x: expected an array"),
    ],
)
def test_arrays_of_the_wrong_kind_are_refused_naming_the_argument(value, error, message):
    with pytest.raises(error, match=message):
        as_float_tensor(value, "x")


def test_numbers_are_checked_against_their_interval():
    assert check_number(0.5, "p", low=0, high=1) == 0.5
    assert check_probability(1.0, "momentum") == 1.0
    for bad in (math.nan, math.inf, -0.1, 1.1):
        with pytest.raises(ValueError, match=r"p: expected a finite number in \[0, 1\]"):
            check_probability(bad, "p")
    with pytest.raises(ValueError, match=r"lr: expected a finite number > 0, got 0"):
        check_number(0, "lr", low=0, low_open=True)
    for bad in ("0.5", True, None):
        with pytest.raises(TypeError, match="p: expected a number"):
            check_number(bad, "p")


def test_integers_seeds_and_choices():
    assert check_int(np.int64(3), "n", minimum=1) == 3
    for bad in (2.0, True, "3"):
        with pytest.raises(TypeError, match="n: expected an integer"):
            check_int(bad, "n")
    assert check_seed(2**32 - 1) == 2**32 - 1 and check_seed(None, allow_none=True) is None
    for bad in (-1, 2**32):
        with pytest.raises(ValueError, match="seed: expected an integer"):
            check_seed(bad)
    with pytest.raises(TypeError, match="seed: expected an integer"):
        check_seed(None)
    for bad in ("cos", 1, None, np.array(["cosine", "dot"])):
        with pytest.raises(ValueError, match="similarity: expected one of 'cosine', 'dot'"):
            check_choice(bad, "similarity", ("cosine", "dot"))


def test_unknown_keyword_arguments_and_dtypes():
    with pytest.raises(TypeError, match="epss: unexpected keyword argument for the 'cosine' similarity"):
        check_kwargs({"epss": 1e-8}, ["eps"], "the 'cosine' similarity")
    assert check_float_dtype(torch.float16) is torch.float16
    for bad in (torch.int64, "float32", np.float32):
        with pytest.raises(TypeError, match="dtype: expected a floating-point torch dtype"):
            check_float_dtype(bad)
