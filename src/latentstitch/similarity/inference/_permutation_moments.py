"""The permutation distribution of a Mantel statistic in closed form: its exact mean, variance and third moment,
and a Pearson type III p-value from them.

For two symmetric n x n matrices A, B whose rows sum to zero (double-centred or U-centred Gram matrices), the
statistic ``T(pi) = sum_ij A_ij B_pi(i)pi(j)`` over the n! permutations pi has moments that are polynomials in a few
permutation-invariant sums of each matrix (Kazi-Aoual, Hitier, Sabatier & Lebreton 1995, "Refined approximations to
permutation tests for multivariate inference", Comput. Stat. Data Anal. 20; used for the RV coefficient by Josse,
Pages & Husson 2008, "Testing the significance of the RV coefficient", Comput. Stat. Data Anal. 53, and by
FactoMineR's ``coeffRV``). With a = diag(A):

    T = tr A, T2 = tr A^2, T3 = tr A^3, S2 = sum a_i^2, S3 = sum a_i^3, U = sum_ij A_ij^3, B = a^T A a,
    R = sum_i a_i (A^2)_ii.

Mean and variance need T, T2, S2 only; the third moment needs all eight. ``GramInvariants`` holds them,
``mantel_moments`` turns two sets into (mean, variance, third central moment) and ``pearson3_p_value`` gives the
upper-tail p-value of a standardised value with that skewness. The moments are exact; the p-value is an
approximation (a three-moment fit), checked against drawn permutations in the tests and the benchmark.

Numerics: the third raw moment is a difference of terms of order n^6 T^3; computed as is, the skewness of a
statistic whose spread is small next to its mean loses most of its digits to cancellation. Callers therefore give
matrices shifted to trace zero (``A - tr(A) / (n - 1) H``, with H the centring matrix: T changes by a constant, every
central moment is unchanged, the mean becomes 0), so the raw third moment *is* the third central moment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class GramInvariants:
    """The permutation-invariant sums of one symmetric n x n matrix with zero row sums (see the module docstring).
    ``trace3``, ``cubes``, ``diag_form`` and ``diag_square`` are only needed for the third moment (nan: unknown)."""

    n: int
    trace: float
    trace2: float
    diag2: float
    trace3: float = math.nan
    diag3: float = math.nan
    cubes: float = math.nan
    diag_form: float = math.nan
    diag_square: float = math.nan


@dataclass(frozen=True)
class NullMoments:
    """Mean, variance and third central moment of the permutation distribution of T (nan when unknown)."""

    mean: float
    variance: float
    third: float

    @property
    def skewness(self) -> float:
        return self.third / self.variance**1.5 if self.variance > 0 else math.nan


def mantel_mean(a: GramInvariants, b: GramInvariants) -> float:
    return a.trace * b.trace / (a.n - 1)


def mantel_variance(a: GramInvariants, b: GramInvariants) -> float:
    """Exact for n >= 4 (Kazi-Aoual et al. 1995, eq. for var T; Josse et al. 2008 eq. 6 in beta/delta form)."""
    n = a.n
    first = 2 * ((n - 1) * a.trace2 - a.trace**2) * ((n - 1) * b.trace2 - b.trace**2)
    first /= (n - 1) ** 2 * (n + 1) * (n - 2)

    def diagonal_part(m: GramInvariants) -> float:
        return n * (n + 1) * m.diag2 - (n - 1) * (m.trace**2 + 2 * m.trace2)

    second = diagonal_part(a) * diagonal_part(b) / ((n + 1) * n * (n - 1) * (n - 2) * (n - 3))
    return first + second


def _third_raw_moment(a: GramInvariants, b: GramInvariants) -> float:
    """E[T^3] over all permutations, exact for n >= 6 (Kazi-Aoual et al. 1995). Every term pairs a product of
    invariants of A with one of B; ``both(f)`` adds the term with the roles of A and B exchanged."""
    n = a.n

    def both(f) -> float:
        return f(a, b) + f(b, a)

    def trace_power(m: GramInvariants) -> tuple[float, float, float]:  # T^3, T T2, T3
        return m.trace**3, m.trace * m.trace2, m.trace3

    ta3, tat2, t3a = trace_power(a)
    tb3, tbt2, t3b = trace_power(b)
    s2a, s2b = a.trace * a.diag2, b.trace * b.diag2  # T S2
    total = (
        n**2 * (n + 1) * (n**2 + 15 * n - 4) * a.diag3 * b.diag3
        + 4 * (n**4 - 8 * n**3 + 19 * n**2 - 4 * n - 16) * a.cubes * b.cubes
        + 24 * (n**2 - n - 4) * both(lambda u, v: u.cubes * v.diag_form)
        + 6 * (n**4 - 8 * n**3 + 21 * n**2 - 6 * n - 24) * a.diag_form * b.diag_form
        + 12 * (n**4 - n**3 - 8 * n**2 + 36 * n - 48) * a.diag_square * b.diag_square
        + 12 * (n**3 - 2 * n**2 + 9 * n - 12) * (s2a * b.diag_square + a.diag_square * s2b)
        + 3 * (n**4 - 4 * n**3 - 2 * n**2 + 9 * n - 12) * s2a * s2b
        + 24 * (n**3 - 3 * n**2 - 2 * n + 8) * both(lambda u, v: u.diag_square * v.cubes)
        + 24 * (n**3 - 2 * n**2 - 3 * n + 12) * both(lambda u, v: u.diag_square * v.diag_form)
        + 12 * (n**2 - n + 4) * (s2a * b.cubes + a.cubes * s2b)
        + 6 * (2 * n**3 - 7 * n**2 - 3 * n + 12) * (s2a * b.diag_form + a.diag_form * s2b)
        - 2 * n * (n - 1) * (n**2 - n + 4) * both(lambda u, v: (2 * u.cubes + 3 * u.diag_form) * v.diag3)
        - 3 * n * (n - 1) ** 2 * (n + 4) * ((s2a + 4 * a.diag_square) * b.diag3 + (s2b + 4 * b.diag_square) * a.diag3)
        + 2 * n * (n - 1) * (n - 2) * ((ta3 + 6 * tat2 + 8 * t3a) * b.diag3 + (tb3 + 6 * tbt2 + 8 * t3b) * a.diag3)
        + ta3 * ((n**3 - 9 * n**2 + 23 * n - 14) * tb3 + 6 * (n - 4) * tbt2 + 8 * t3b)
        + 6 * tat2 * ((n - 4) * tb3 + (n**3 - 9 * n**2 + 24 * n - 14) * tbt2 + 4 * (n - 3) * t3b)
        + 8 * t3a * (tb3 + 3 * (n - 3) * tbt2 + (n**3 - 9 * n**2 + 26 * n - 22) * t3b)
        - 16 * (ta3 * b.cubes + a.cubes * tb3)
        - 6 * (2 * n**2 - 10 * n + 16) * (tat2 * b.cubes + a.cubes * tbt2)
        - 8 * (3 * n**2 - 15 * n + 16) * (t3a * b.cubes + a.cubes * t3b)
        - (6 * n**2 - 30 * n + 24) * (ta3 * b.diag_form + a.diag_form * tb3)
        - 6 * (4 * n**2 - 20 * n + 24) * (tat2 * b.diag_form + a.diag_form * tbt2)
        - 8 * (3 * n**2 - 15 * n + 24) * (t3a * b.diag_form + a.diag_form * t3b)
        - (n - 2)
        * (
            24 * (ta3 * b.diag_square + a.diag_square * tb3)
            + 6 * (2 * n**2 - 10 * n + 24) * (tat2 * b.diag_square + a.diag_square * tbt2)
            + 8 * (3 * n**2 - 15 * n + 24) * (t3a * b.diag_square + a.diag_square * t3b)
            + (3 * n**2 - 15 * n + 6) * (ta3 * s2b + s2a * tb3)
            + 6 * (n**2 - 5 * n + 6) * (tat2 * s2b + s2a * tbt2)
            + 48 * (t3a * s2b + s2a * t3b)
        )
    )
    return total / (n * (n - 1) * (n - 2) * (n - 3) * (n - 4) * (n - 5))


def mantel_moments(a: GramInvariants, b: GramInvariants) -> NullMoments:
    """The exact permutation mean, variance and third central moment of ``T = sum_ij A_ij B_pi(i)pi(j)`` (n >= 4
    for the variance, n >= 6 and every invariant known for the third moment, else nan)."""
    if a.n != b.n:
        raise ValueError(f"x, y: the two matrices are of {a.n} and {b.n} rows")
    n = a.n
    mean = mantel_mean(a, b)
    variance = mantel_variance(a, b) if n >= 4 else math.nan
    known = all(math.isfinite(v) for m in (a, b) for v in (m.trace3, m.diag3, m.cubes, m.diag_form, m.diag_square))
    third = math.nan
    if n >= 6 and known:
        raw = _third_raw_moment(a, b)
        third = raw - 3 * mean * variance - mean**3
    return NullMoments(mean, variance, third)


def pearson3_p_value(z: float, skewness: float) -> float:
    """``P(Z >= z)`` for a standardised Pearson type III variable of the given skewness (a shifted, scaled gamma:
    shape ``4 / skewness^2``, scale ``skewness / 2``, lower end ``-2 / skewness``; mirrored for a negative skewness;
    the normal tail when the skewness is 0 or unknown)."""
    from scipy import special  # not scipy.stats: a second to import, on every first test of a session

    if not math.isfinite(z):
        return 0.0 if z > 0 else 1.0
    if not math.isfinite(skewness) or abs(skewness) < 1e-6:
        return 0.5 * math.erfc(z / math.sqrt(2.0))
    shape, scale = 4.0 / skewness**2, abs(skewness) / 2.0
    if skewness > 0:  # gamma survival function of z + 2 / skewness
        return float(special.gammaincc(shape, max(z + 2.0 / skewness, 0.0) / scale))
    return float(special.gammainc(shape, max(-z + 2.0 / abs(skewness), 0.0) / scale))
