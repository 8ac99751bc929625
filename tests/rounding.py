"""How closely two code paths must agree when they compute the same sums in a different order.

Two paths that feed the same numbers through different kernels (a Dask chunk of 7 rows against the whole array in
one product, a batch of 10 against a batch of 24, one thread against two, OpenBLAS's AMD Zen kernels against its
Intel ones) add each dot product's terms in a different order, so their results may differ in the last bits: on an
AMD EPYC host a bridge's Dask transform differed from the eager one in 9 of 240 entries by up to 8.9e-16 (issue
41). The tests promise byte-equality only where the same data go through the same kernel (a save/load round trip,
the same call twice, the same chunks one by one) and assert ``assert_close_to_rounding`` across kernels.
``.ci/run`` runs the tests marked ``kernels`` once more on other kernels to catch a new exact comparison of two
paths.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# A sum of `terms` products, added in any order, is within (terms - 1) * u * sum(|products|) of the exact sum
# (u = eps / 2; Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 3.5), so two orders are within
# terms * eps * sum(|products|) of each other. SLACK covers the few roundings around the product (centring,
# scaling, a second product of the same size) and a sum of |products| larger than the largest output.
SLACK = 8


def rounding_tolerance(terms: int, scale: float, dtype: Any = np.float64) -> float:
    """The largest absolute difference allowed between two summation orders of ``terms`` products each, on outputs
    of magnitude ``scale``, in ``dtype``'s precision."""
    return SLACK * terms * float(np.finfo(dtype).eps) * float(scale)


def assert_close_to_rounding(actual: Any, desired: Any, terms: int, scale: float | None = None) -> None:
    """``actual`` equals ``desired`` up to the order in which sums of ``terms`` products were added
    (``rounding_tolerance``, in the coarser precision of the two arrays; ``scale`` defaults to the largest
    |desired|)."""
    actual, desired = _numpy(actual), _numpy(desired)
    assert actual.shape == desired.shape, (actual.shape, desired.shape)
    if scale is None:
        scale = float(np.abs(desired).max()) if desired.size else 0.0
    floats = [a.dtype for a in (actual, desired) if np.issubdtype(a.dtype, np.floating)]
    dtype = max(floats, key=lambda d: np.finfo(d).eps, default=np.float64)
    np.testing.assert_allclose(actual, desired, rtol=0, atol=rounding_tolerance(terms, scale, dtype))


def _numpy(array: Any) -> np.ndarray:
    if hasattr(array, "detach"):  # a torch tensor
        array = array.detach().cpu().numpy()
    return np.asarray(array)
