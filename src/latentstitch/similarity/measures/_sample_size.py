"""Small-sample honesty: measures that read "identical" on any data once there are too few samples.

Two rules. With 2 samples, centring leaves one direction per side, so every centred Gram matrix, distance matrix or
neuron correlation is the same up to scale and sign: CKA, Procrustes, distance correlation, PNKA, ENSD and
correlation matching then read "identical" (``MeasureSpec.trivial_samples``). And a least-squares fit (R^2 of a
linear regression, GULP without ridge) or CCA with at least as many features as samples matches any two
representations exactly: after centring, N samples span N - 1 dimensions, so a side with ``d >= N - 1`` features
reproduces everything. ``MeasureSpec.trivial_when_n_le_d`` marks such measures; ``is_trivial`` applies the rule to a
sample size and widths; ``warn_if_trivial`` warns at the user's line.
"""

from __future__ import annotations

from latentstitch._core.callsite import warn_at_caller
from latentstitch.similarity.measures._registry import MeasureSpec, get_measure

# Measures whose fit uses one side only: x predicts y in r2_linear, so only x's width can make it trivial. Every
# other flagged measure (the CCA family, GULP) is trivial when either side is wide enough.
_FITTED_SIDE = {"r2_linear": "x"}


class SmallSampleWarning(UserWarning):
    """A measure was computed with too few samples for its value to say anything about the data."""


def is_trivial(measure: str | MeasureSpec, n: int, p: int, q: int, options: dict | None = None) -> bool:
    """Whether ``measure`` reaches its "identical" end whatever the data, for ``n`` samples of widths ``p`` (x) and
    ``q`` (y): any measure once ``n <= MeasureSpec.trivial_samples``; a measure flagged ``trivial_when_n_le_d`` once its
    fitted side has ``d >= n - 1`` features (N <= d + 1: centring uses one degree of freedom), unless its
    ``options`` regularise the fit (``ridge > 0``). False for every other measure."""
    spec = get_measure(measure) if isinstance(measure, str) else measure
    if n <= spec.trivial_samples:
        return True
    if not spec.trivial_when_n_le_d or (options or {}).get("ridge", 0) > 0:
        return False
    width = p if _FITTED_SIDE.get(spec.name) == "x" else max(p, q)
    return width >= n - 1


def trivial_message(names: list[str], n: int, p: int, q: int) -> str:
    listed, one = ", ".join(names), len(names) == 1
    verb, values = ("reaches", "this value says") if one else ("reach", "these values say")
    if n <= 2:
        return (
            f"x, y: {n} samples: {listed} {verb} 'identical' on any data with so few samples (after centring, "
            f"each side is a single direction), so {values} nothing about the representations. Use more samples."
        )
    return (
        f"x, y: {n} samples for {p} and {q} features: {listed} {verb} 'identical' on any data once the samples are "
        f"no more than the features + 1, so {values} nothing about the representations. Use more samples than "
        "features (or reduce the dimension first, e.g. svcca)."
    )


def warn_if_trivial(measure: str | MeasureSpec, n: int, p: int, q: int, options: dict | None = None) -> bool:
    """``is_trivial``, and if so a ``SmallSampleWarning`` attributed to the user's line; returns the flag. Every
    measure that can be trivial calls it (``compare`` and the tests silence it and warn once themselves)."""
    spec = get_measure(measure) if isinstance(measure, str) else measure
    trivial = is_trivial(spec, n, p, q, options)
    if trivial:
        warn_at_caller(trivial_message([spec.name], n, p, q), SmallSampleWarning)
    return trivial
