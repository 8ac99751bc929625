"""Several indices at once: ``compare(x, y)`` computes every default (or every named) measure between two
representations, and says which of them are trivial at this sample size."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from latentstitch._core.arrays import ArrayLike
from latentstitch._core.callsite import warn_at_caller
from latentstitch._core.params import check_kwargs
from latentstitch.similarity.measures._catalog import DEFAULT_MEASURES, SAME_SPACE_MEASURES
from latentstitch.similarity.measures._registry import MeasureSpec, as_rows, get_measure
from latentstitch.similarity.measures._sample_size import SmallSampleWarning, is_trivial, trivial_message


@dataclass(frozen=True, eq=False)
class Comparison(Mapping[str, float]):
    """``compare``'s result: a read-only mapping ``{name: value}`` (``result["linear_cka"]``, ``list(result)``,
    ``dict(result)``; equal to a dict with the same items), with what a reader needs to trust it: ``samples`` (n),
    ``widths`` (p, q) and ``trivial``, the names of the measures that reach "identical" on any data at this sample
    size (``is_trivial``; their values say nothing). ``to_dict()``: ``{name: value}``, for JSON."""

    scores: dict[str, float]
    samples: int
    widths: tuple[int, int]
    trivial: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> float:
        return self.scores[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.scores)

    def __len__(self) -> int:
        return len(self.scores)

    def __repr__(self) -> str:
        return repr(self.scores)

    def to_dict(self) -> dict[str, float]:
        return dict(self.scores)


def compare(
    x: ArrayLike, y: ArrayLike, measures: Sequence[str] | Mapping[str, Mapping[str, Any]] | None = None
) -> Comparison:
    """Several similarity indices between x and y, as ``{name: value}`` (a ``Comparison``: a mapping of floats
    whose ``trivial`` attribute names the measures that are trivial at this sample size, with a ``SmallSampleWarning``).

    Parameters
    ----------
    x, y : (n, p), (n, q) arrays or tensors of the same samples.
    measures : names of registered measures (``latentstitch.similarity.MEASURES``), or a mapping from names to
        keyword arguments (``{"mutual_knn": {"k": 5}, "linear_cka": {}}``). By default ``DEFAULT_MEASURES``
        (every CKA/CCA/shape/RSA/k-NN index), plus ``jaccard_at_k``, ``mrr`` and ``matched_cosine`` when x and y
        have the same width. RBF CKA, RSA and mutual k-NN need O(n^2) time (and the first two O(n^2) memory): for
        many thousands of samples, name the measures you want.

    Each value follows its measure's conventions (``MEASURES[name]``: kind, range, centring, invariances). For the
    fitted measures (``MEASURES[name].trivial_when_n_le_d``: R^2, the CCA family, GULP...) check
    ``result.trivial``: with no more samples than features + 1 they read "identical" whatever the data.
    """
    xt, yt = as_rows(x, "x"), as_rows(y, "y")
    n, p, q = xt.shape[0], xt.shape[1], yt.shape[1]
    if measures is None:
        measures = DEFAULT_MEASURES + (SAME_SPACE_MEASURES if p == q else ())
    options = measure_options(measures)
    specs = {name: get_measure(name) for name in options}
    trivial = tuple(name for name, spec in specs.items() if is_trivial(spec, n, p, q, dict(options[name])))
    if trivial:
        warn_at_caller(trivial_message(list(trivial), n, p, q), SmallSampleWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)  # said once above, for all of them
        scores = {name: float(specs[name](x, y, **dict(kwargs))) for name, kwargs in options.items()}
    return Comparison(scores, samples=n, widths=(p, q), trivial=trivial)


def measure_options(measures: Sequence[str] | Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{name: keyword arguments}`` from a list of names or a mapping of names to keyword arguments, each checked
    against its measure's signature, so a mistake names the measure and what it accepts."""
    if isinstance(measures, str) or not isinstance(measures, (Mapping, Sequence, tuple)):
        raise TypeError(
            f"measures: expected a list of measure names or a dict {{name: {{keyword: value}}}}, got {measures!r}"
        )
    if not isinstance(measures, Mapping):
        measures = {name: {} for name in measures}
    options = {}
    for name, kwargs in measures.items():
        spec = get_measure(name)
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise TypeError(
                f"measures[{name!r}]: expected a dict of keyword arguments for {name} (e.g. {{}}), got {kwargs!r}"
            )
        accepted = accepted_options(spec)
        if accepted is not None:
            check_kwargs(kwargs, accepted, f"measure {name!r}")
        options[name] = dict(kwargs)
    return options


def accepted_options(spec: MeasureSpec) -> list[str] | None:
    """The keyword arguments ``spec`` accepts beyond x and y (None: any, for a function taking ``**kwargs``)."""
    try:
        parameters = list(inspect.signature(spec.function).parameters.values())[2:]
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return [p.name for p in parameters if p.kind is not inspect.Parameter.VAR_POSITIONAL]
