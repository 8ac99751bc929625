"""Several indices at once: ``compare(x, y)`` computes every default (or every named) measure between two
representations, and says which of them are trivial at this sample size; optionally each with its permutation test,
the O(n^2) measures on a random subset of rows, and the measures undefined on this data left out with the reason
(what ``latentstitch compare`` prints)."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latentstitch._core.arrays import ArrayLike, take_rows
from latentstitch._core.callsite import warn_at_caller
from latentstitch._core.params import (
    check_bool,
    check_int,
    check_kwargs,
    check_optional_positive_int,
    check_seed,
)
from latentstitch._core.progress import progress_bar
from latentstitch.similarity.inference._permutation_test import PermutationTest, permutation_test
from latentstitch.similarity.measures._catalog import DEFAULT_MEASURES, SAME_SPACE_MEASURES
from latentstitch.similarity.measures._registry import MeasureSpec, as_rows, get_measure
from latentstitch.similarity.measures._sample_size import SmallSampleWarning, is_trivial, trivial_message

#: The measures that need O(n^2) time (RBF CKA and RSA also O(n^2) memory): with ``max_rows`` they run on a random
#: subset of the rows.
QUADRATIC = ("rbf_cka", "rsa", "mutual_knn")


@dataclass(frozen=True, eq=False)
class Comparison(Mapping[str, float]):
    """``compare``'s result: a read-only mapping ``{name: value}`` (``result["linear_cka"]``, ``list(result)``,
    ``dict(result)``; equal to a dict with the same items), with what a reader needs to trust it: ``samples`` (n),
    ``widths`` (p, q) and ``trivial``, the names of the measures that reach "identical" on any data at this sample
    size (``is_trivial``; their values say nothing). ``measures``: every measure asked for, in order (with a value or
    skipped). ``skipped``: ``{name: why}`` for the measures left out
    (``skip_undefined=True``). ``tests``: ``{name: PermutationTest}`` (``permutations > 0``; not for the trivial
    ones). ``subset``: the rows the ``QUADRATIC`` measures ran on (``max_rows``), None when all rows were used.
    ``to_dict()``: ``{name: value}``, for JSON."""

    scores: dict[str, float]
    samples: int
    widths: tuple[int, int]
    trivial: tuple[str, ...] = ()
    measures: tuple[str, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)
    tests: dict[str, PermutationTest] = field(default_factory=dict)
    subset: np.ndarray | None = None

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

    def subsampled(self, name: str) -> bool:
        """Whether measure ``name`` ran on the random ``subset`` of the rows rather than on all of them."""
        return self.subset is not None and name in QUADRATIC and name in self.scores


def compare(
    x: ArrayLike,
    y: ArrayLike,
    measures: Sequence[str] | Mapping[str, Mapping[str, Any]] | None = None,
    *,
    skip_undefined: bool = False,
    permutations: int = 0,
    seed: int = 0,
    max_rows: int | None = None,
    progress: Any = False,
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
        many thousands of samples, name the measures you want or set ``max_rows``.
    skip_undefined : False (default): a measure that cannot be computed on this data raises its error. True: it is
        left out of the values, the reason in ``result.skipped[name]`` (a same-space measure on two widths, fewer
        samples than it needs, an undefined value such as a constant side).
    permutations : K > 0 adds, per measure that is not trivial, ``permutation_test(x, y, name, permutations=K,
        seed=seed)`` in ``result.tests[name]`` (p-value and calibrated value; closed-form moments where the measure
        has them); its value is the test's. 0 (default): no test.
    seed : seeds the permutations and the subset of ``max_rows``.
    max_rows : the ``QUADRATIC`` measures run on a seeded random subset of this many rows when there are more
        (``result.subset``); None (default): all rows.
    progress : a progress bar over the measures (True), the caller's rich ``Progress``, or none (False).

    Each value follows its measure's conventions (``MEASURES[name]``: kind, range, centring, invariances). For the
    fitted measures (``MEASURES[name].trivial_when_n_le_d``: R^2, the CCA family, GULP...) check
    ``result.trivial``: with no more samples than features + 1 they read "identical" whatever the data.
    """
    skip_undefined = check_bool(skip_undefined, "skip_undefined")
    permutations = check_int(permutations, "permutations", minimum=0)
    seed = check_seed(seed, "seed")
    max_rows = check_optional_positive_int(max_rows, "max_rows")
    xt, yt = as_rows(x, "x"), as_rows(y, "y")
    n, p, q = xt.shape[0], xt.shape[1], yt.shape[1]
    if measures is None:
        measures = DEFAULT_MEASURES + (SAME_SPACE_MEASURES if p == q else ())
    options = measure_options(measures)
    specs = {name: get_measure(name) for name in options}
    skipped = {name: why for name, spec in specs.items() if (why := _cannot_compute(spec, n, p, q)) and skip_undefined}
    trivial = tuple(
        name for name, spec in specs.items() if name not in skipped and is_trivial(spec, n, p, q, dict(options[name]))
    )
    if trivial:
        warn_at_caller(trivial_message(list(trivial), n, p, q), SmallSampleWarning)
    subset = None
    if max_rows is not None and n > max_rows and any(name in QUADRATIC and name not in skipped for name in options):
        subset = np.sort(np.random.default_rng(seed).choice(n, max_rows, replace=False))
    scores, tests = {}, {}
    with progress_bar(progress) as bar, warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)  # said once above, for all of them
        task = None if bar is None else bar.add_task("compare", total=len(options))
        for name, kwargs in options.items():
            if bar is not None:
                bar.update(task, description=f"compare: {name}")
            rows = (x, y) if subset is None or name not in QUADRATIC else (take_rows(x, subset), take_rows(y, subset))
            try:
                if name in skipped:
                    pass
                elif name in trivial:  # the warning above says it all: not the measure's own (rank) warnings too
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        scores[name] = float(specs[name](*rows, **kwargs))
                elif permutations:
                    tests[name] = permutation_test(
                        *rows, name, permutations=permutations, seed=seed, progress=bar, **kwargs
                    )
                    scores[name] = tests[name].value
                else:
                    scores[name] = float(specs[name](*rows, **kwargs))
            except ValueError as error:  # e.g. a constant representation: undefined for this measure
                if not skip_undefined:
                    raise
                skipped[name] = "undefined here: " + " ".join(str(error).split())
            if bar is not None:
                bar.advance(task)
    return Comparison(scores, n, (p, q), trivial, measures=tuple(options), skipped=skipped, tests=tests, subset=subset)


def _cannot_compute(spec: MeasureSpec, n: int, p: int, q: int) -> str:
    """Why ``spec`` has no value for n samples of widths p and q before it runs ("" when it may have one)."""
    if spec.same_space and p != q:
        return f"compares rows in one space; the widths differ ({p} vs {q})"
    if n < spec.min_samples:
        return f"needs at least {spec.min_samples} items, got {n}"
    return ""


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
