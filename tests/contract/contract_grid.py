"""The generated grid of the contract suite: numerical entry points (similarity measures, streaming accumulators,
the relative projection, anchor selection, estimators, torch modules and losses).

Every family is built from *axes* (containers, dtypes, shapes, NaN/inf placements, magnitudes, hyperparameters).
``*_case(...)`` builds one case from one value per axis; the grid (``numeric_cases``) varies one axis at a time
around a clean base input, and the hypothesis strategies of the tests draw combinations of axes. Expected
outcomes follow from the axes: an input that must be refused names the argument at fault; any other gives a
finite result equal to a float64 reference (computed on the clean float64 data) within the dtype's tolerance.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from contract_cases import SCALE_SAFETY, Case, all_of, as_array, close_to, finite_in
from contract_registry import (
    ESTIMATORS,
    FIXED_BATCH,
    INPUT_NAMES,
    MEASURES,
    MODULES,
    PROPAGATE_NAN,
    REQUIRED_ROW_OPTIONS,
    SCALE_SAFETY_ESTIMATORS,
    SIMILARITIES,
    STREAMING,
)

CONTAINERS = ("numpy", "torch", "list")
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "uint8", "bool")
FLOATS = ("float64", "float32", "float16", "bfloat16")
SHAPES = ("base", "n0", "n1", "n_min", "n_below_min", "one_d", "zero_d", "three_d", "rows_mismatch", "width_mismatch")
VALUES = ("clean", "nan_x", "inf_y", "neg_inf_x_last", "constant_x", "zero_row_x", "duplicate_rows")
# Magnitudes: isotropic rescalings of every input, near the ends of each dtype's range.
SCALES = {
    "float64": (1.0, 1e-200, 1e-30, 1e30, 1e200),
    "float32": (1.0, 1e-30, 1e-20, 1e20, 1e30),
    "bfloat16": (1.0, 1e-30, 1e30),
    "float16": (1.0,),
    "int64": (1.0,),
    "uint8": (1.0,),
    "bool": (1.0,),
}
SCALE_WORDS = ("overflow", "overflows", "underflow", "underflows", "rescale", "scale", "magnitude")
# The similarity indices computed on the moments / Gram matrices of issue 21's kernels.
SCALE_SAFETY_MEASURES = {
    "linear_cka",
    "debiased_cka",
    "rbf_cka",
    "minibatch_cka",
    "r2_linear",
    "mean_cca",
    "r2_cca",
    "svcca",
    "pwcca",
    "procrustes_distance",
    "shape_metric_angular",
}
NEIGHBOUR_MEASURES = {"mutual_knn", "jaccard_at_k", "mrr", "matched_cosine"}
DISCRETE_MEASURES = {"mutual_knn", "jaccard_at_k", "mrr"}

_TORCH_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
#: A folder of this process (removed at exit) for cases that write files.
SCRATCH = Path(tempfile.mkdtemp(prefix="latentstitch-contract-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)

_TOLERANCE = {"float64": 1e-7, "float32": 2e-4, "float16": 0.05, "bfloat16": 0.08}


def data_pair(n: int = 40, p: int = 6, q: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two related float64 representations of the same n samples."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, p))
    y = x @ rng.standard_normal((p, q)) + 0.5 * rng.standard_normal((n, q))
    return x, y


def convert(a: np.ndarray, container: str, dtype: str) -> Any:
    """``a`` (float64) as the container and dtype of the case (a list keeps Python floats)."""
    if container == "list":
        return a.tolist()
    if dtype in ("int64", "uint8", "bool"):
        values = np.abs(np.round(a * 3)) if dtype == "uint8" else np.round(a * 3)
        values = values != 0 if dtype == "bool" else values
        a = values
    if container == "torch":
        return torch.tensor(a, dtype=_TORCH_DTYPES[dtype])
    if dtype == "bfloat16":  # numpy has no bfloat16
        return torch.tensor(a, dtype=torch.bfloat16)
    return np.asarray(a, dtype=dtype)


def tolerance(container: str, dtype: str) -> float:
    return _TOLERANCE.get("float64" if container == "list" else dtype, 1e-7)


def is_float(container: str, dtype: str) -> bool:
    return container == "list" or dtype in FLOATS


# --- similarity measures -----------------------------------------------------------------------------------------


def measure_case(
    name: str,
    *,
    container: str = "numpy",
    dtype: str = "float64",
    shape: str = "base",
    value: str = "clean",
    scale: float = 1.0,
    option: tuple[str, Any] | None = None,
) -> Case:
    """One call of ``MEASURES[name](x, y, **option)`` on inputs built from the axes."""
    from latentstitch.similarity import MEASURES as REGISTERED

    spec = REGISTERED[name]
    minimum = spec.min_samples
    p = 6
    q = p if spec.same_space else 5
    n = {"n0": 0, "n1": 1, "n_min": minimum, "n_below_min": minimum - 1}.get(shape, 40)
    x, y = data_pair(n, p, q)
    if shape == "width_mismatch":
        y = np.concatenate([y, y[:, :1] + 0.3], axis=1)
    if value == "constant_x":
        x = np.ones_like(x) * 0.5
    elif value == "zero_row_x" and n > 2:
        x[2] = 0.0
    elif value == "duplicate_rows" and n > 1:
        x[1], y[1] = x[0], y[0]
    clean_x, clean_y = x.copy(), y.copy()
    if value == "nan_x" and n > 3:
        x[3, 1] = np.nan
    elif value == "inf_y" and n > 3:
        y[3, 0] = np.inf
    elif value == "neg_inf_x_last" and n > 0:
        x[-1, -1] = -np.inf
    if shape == "three_d":
        x = x.reshape(n, 2, 3)
    elif shape == "one_d":
        x = x[:, 0]
    elif shape == "zero_d":
        x = x[0, 0]
    elif shape == "rows_mismatch":
        y = y[:-1]
    xs, ys = x * scale, y * scale
    if shape == "zero_d":
        inputs = (np.float64(xs) if container != "torch" else torch.tensor(xs), convert(ys, container, dtype))
    else:
        inputs = (convert(xs, container, dtype), convert(ys, container, dtype))
    options = dict([option]) if option is not None else {}
    # row options the measure needs: a third representation of the same samples (rows follow x's), in the
    # container and dtype of x; the reference gets the same rows in float64
    reference_options: dict[str, Any] = {}
    for row_option in REQUIRED_ROW_OPTIONS.get(name, ()):
        rows = data_pair(max(n, 1), 3, 3, seed=7)[0][:n]
        reference_options[row_option] = rows
        options.setdefault(row_option, convert(rows, container, dtype))

    label = ",".join(
        part
        for part in (
            container,
            dtype if container != "list" else "",
            shape if shape != "base" else "",
            value if value != "clean" else "",
            f"x{scale:g}" if scale != 1 else "",
            f"{option[0]}={option[1]!r}" if option else "",
        )
        if part
    )
    names: list[str] = ["x", "y", "x, y"]
    invalid = False
    if not is_float(container, dtype):
        invalid = True
    if shape in ("n0", "one_d", "zero_d", "rows_mismatch") or (shape == "n_below_min" and minimum > 1):
        invalid = True
    if n == 0 or (shape == "n1" and minimum > 1):
        invalid = True
    if shape == "width_mismatch" and spec.same_space:
        invalid = True
    if value in ("nan_x", "inf_y", "neg_inf_x_last") and n > 3:
        invalid = True
    if value == "zero_row_x" and n > 2 and name in NEIGHBOUR_MEASURES:
        invalid = True
    if option is not None:
        # a bad option; any other fault of the same input (constant x included) may be the one reported
        names = [option[0], *names] if invalid or value == "constant_x" else [option[0]]
        invalid = True
    owner = SCALE_SAFETY if (scale != 1 and name in SCALE_SAFETY_MEASURES) else None
    if scale != 1 and not invalid:
        names = list(SCALE_WORDS)  # an error must name the cause (the magnitude), not blame the data
    reference_x = clean_x.reshape(n, -1) if n else clean_x
    tol = tolerance(container, dtype)
    if name in DISCRETE_MEASURES and tol > 1e-3:
        tol = 0.15  # neighbour ranks of float16 vectors may swap near-ties
    low, high = spec.value_range
    if value == "constant_x":
        check = finite_in(low, high)  # a value in range, or a clear error (zero variance)
    else:
        check = all_of(
            finite_in(low, high),
            close_to(lambda: float(spec(reference_x, clean_y, **reference_options)), rtol=0, atol=max(tol, 1e-9)),
        )
    return Case(
        "measure",
        name,
        label or "clean",
        functools.partial(_call_measure, spec, inputs, options),
        names=tuple(names),
        valid=not invalid,
        check=check,
        owner=owner,
    )


def _call_measure(spec: Any, inputs: tuple, options: dict) -> float:
    value = spec(*inputs, **options)
    return float(value)


def measure_cases(name: str) -> list[Case]:
    cases = [measure_case(name)]
    for container in CONTAINERS:
        for dtype in DTYPES if container != "list" else ("float64",):
            if (container, dtype) != ("numpy", "float64"):
                cases.append(measure_case(name, container=container, dtype=dtype))
    cases += [measure_case(name, shape=shape) for shape in SHAPES[1:]]
    cases += [measure_case(name, value=value) for value in VALUES[1:]]
    for dtype in ("float32", "float64", "bfloat16"):
        cases += [measure_case(name, dtype=dtype, scale=s, container="torch") for s in SCALES[dtype][1:]]
    for option, bad in MEASURES.get(name, {}).items():
        cases += [measure_case(name, option=(option, value)) for value in bad]
    cases.append(measure_case(name, option=("foo", 1)))
    return cases


# --- streaming accumulators -------------------------------------------------------------------------------------


def _stream(name: str, **options: Any) -> Any:
    from latentstitch import similarity

    base_options, _, _ = STREAMING[name]
    options = {**base_options, **options}
    if isinstance(options.get("stream"), str) and options["stream"].startswith("Streaming"):
        options["stream"] = _stream(options["stream"])  # a bootstrap's template: a fresh stream of that name
    return getattr(similarity, name.split("(")[0])(**options)


def _run_stream(name: str, chunks: list[tuple[Any, Any]], options: dict) -> float:
    from latentstitch.similarity import BootstrapCI

    stream = _stream(name, **options)
    for x, y in chunks:
        stream.update(x, y)
    result = stream.compute()
    if isinstance(result, BootstrapCI):
        # the bootstrap's value is the stream's, and its interval a finite, ordered one
        if not (math.isfinite(result.low) and math.isfinite(result.high) and result.low <= result.high):
            return math.nan  # fails the check
        return result.value
    return result


def streaming_cases(name: str) -> list[Case]:
    from latentstitch.similarity import MEASURES as REGISTERED

    _, measure, bad = STREAMING[name]
    spec = REGISTERED[measure]
    x, y = data_pair(48, 6, 5)
    starts = [0, 16, 32, 48]
    pieces = [(x[a:b], y[a:b]) for a, b in itertools.pairwise(starts)]
    if name == "StreamingMinibatchCKA":
        reference = functools.partial(spec, x, y, batch_size=16)
    else:
        reference = functools.partial(spec, x, y)
    ok = close_to(lambda: float(reference()), rtol=0, atol=1e-9)
    run = functools.partial(_run_stream, name)
    cases = [
        Case("streaming", name, "three chunks", functools.partial(run, pieces, {}), check=ok),
        Case(
            "streaming",
            name,
            "list chunks",
            functools.partial(run, [(a.tolist(), b.tolist()) for a, b in pieces], {}),
            check=ok,
        ),
        Case(
            "streaming",
            name,
            "torch float32 chunks",
            functools.partial(
                run,
                [(torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)) for a, b in pieces],
                {},
            ),
            check=close_to(lambda: float(reference()), rtol=0, atol=2e-4),
        ),
        Case(
            "streaming",
            name,
            "compute before update",
            functools.partial(run, [], {}),
            names=("compute", "update"),
            valid=False,
        ),
        Case(
            "streaming",
            name,
            "NaN in a chunk",
            functools.partial(
                run, [pieces[0], (np.where(np.eye(16, 6) > 0, np.nan, pieces[1][0]), pieces[1][1]), pieces[2]], {}
            ),
            names=("x",),
            valid=False,
        ),
        Case(
            "streaming",
            name,
            "chunk widths differ",
            functools.partial(run, [pieces[0], (pieces[1][0][:, :4], pieces[1][1]), pieces[2]], {}),
            names=("x", "y", "a", "b", "a, b"),
            valid=False,
        ),
        Case(
            "streaming",
            name,
            "one-dimensional chunk",
            functools.partial(run, [(pieces[0][0][:, 0], pieces[0][1])], {}),
            names=("x",),
            valid=False,
        ),
    ]
    if name != "StreamingMinibatchCKA":  # a minibatch of 0 rows is not a minibatch
        empty = (np.empty((0, 6)), np.empty((0, 5)))
        cases.append(
            Case("streaming", name, "empty first chunk", functools.partial(run, [empty, *pieces], {}), check=ok)
        )
        cases.append(
            Case(
                "streaming",
                name,
                "empty chunk in the middle",
                functools.partial(run, [pieces[0], empty, pieces[1], pieces[2]], {}),
                check=ok,
            )
        )
    else:
        cases.append(
            Case(
                "streaming",
                name,
                "minibatch of 3 rows",
                functools.partial(run, [(x[:3], y[:3])], {}),
                names=("x", "x, y"),
                valid=False,
            )
        )
    for option, values in bad.items():
        for value in values:
            cases.append(
                Case(
                    "streaming",
                    name,
                    f"{option}={value!r}",
                    functools.partial(run, pieces, {option: value}),
                    names=(option,),
                    valid=False,
                )
            )
    return cases


# --- the relative projection ---------------------------------------------------------------------------------------


def reference_projection(
    x: np.ndarray,
    anchors: np.ndarray,
    similarity: str,
    *,
    center: bool = False,
    scaled: bool = False,
    eps: float | None = None,
) -> np.ndarray:
    """An independent float64 numpy implementation of every similarity (the test oracle)."""
    x, anchors = np.asarray(x, np.float64), np.asarray(anchors, np.float64)
    if center:
        shift = anchors.mean(axis=0)
        x, anchors = x - shift, anchors - shift
    if similarity in ("cosine", "angular"):

        def unit(a):
            norms = np.linalg.norm(a, axis=1, keepdims=True)
            return a / (np.maximum(norms, eps) if eps is not None else norms)

        cos = np.clip(unit(x) @ unit(anchors).T, -1, 1)
        return cos if similarity == "cosine" else 1 - np.arccos(cos) / np.pi
    if similarity == "dot":
        out = x @ anchors.T
        return out / np.sqrt(x.shape[1]) if scaled else out
    if similarity == "basis_change":
        return x @ np.linalg.pinv(anchors)
    diff = x[:, None, :] - anchors[None, :, :]
    order = {"euclidean": 2, "l1": 1, "linf": np.inf}[similarity]
    return np.linalg.norm(diff, ord=order, axis=2)


def _call_projection(x: Any, anchors: Any, similarity: Any, options: dict) -> Any:
    from latentstitch.relative import relative_projection

    return relative_projection(x, anchors, similarity, **options)


# How each similarity's output scales when samples and anchors are both scaled by s.
_PROJECTION_SCALING = {"cosine": 0, "angular": 0, "dot": 2, "euclidean": 1, "l1": 1, "linf": 1, "basis_change": 0}


def projection_case(
    similarity: str,
    *,
    container: str = "numpy",
    dtype: str = "float64",
    anchors_container: str | None = None,
    shape: str = "base",
    value: str = "clean",
    scale: float = 1.0,
    option: tuple[str, Any] | None = None,
) -> Case:
    rng = np.random.default_rng(1)
    n = 0 if shape == "x_empty" else 30
    x = rng.standard_normal((n, 6))
    anchors = rng.standard_normal((0 if shape == "anchors_empty" else 8, 6))
    if value == "zero_row_x" and n > 2:
        x[2] = 0
    clean_x, clean_anchors = x.copy(), anchors.copy()
    if value == "nan_x" and n > 4:
        x[4, 1] = np.nan
    elif value == "inf_anchors" and len(anchors) > 3:
        anchors[3, 0] = np.inf
    if shape == "one_d":
        x = x[:, 0]
    elif shape == "three_d":
        x = x.reshape(n, 2, 3)
    elif shape == "width_mismatch":
        anchors = anchors[:, :5]
    options = dict([option]) if option is not None else {}
    inputs = (convert(x * scale, container, dtype), convert(anchors * scale, anchors_container or container, dtype))
    invalid = not is_float(container, dtype)
    names = ["x", "anchors", "x, anchors"]
    if shape in ("anchors_empty", "one_d", "three_d", "width_mismatch"):
        invalid = True
    if (value == "nan_x" and n > 4) or (value == "inf_anchors" and len(anchors) > 3):
        invalid = True
    zero_stays_zero = options.get("center") is not True  # centring moves the zero row away from the origin
    if (
        value == "zero_row_x"
        and n > 2
        and similarity in ("cosine", "angular")
        and "eps" not in options
        and zero_stays_zero
    ):
        invalid = True
    if option is not None and not _valid_projection_option(similarity, *option):
        names = [option[0], *names] if invalid else [option[0]]
        invalid = True
    valid_options = {k: v for k, v in options.items() if k in ("center", "scaled", "eps")} if not invalid else {}
    power = _PROJECTION_SCALING[similarity]
    factor = _power(scale, power)
    clean_reference = reference_projection(clean_x, clean_anchors, similarity, **valid_options)
    expected_magnitude = np.max(np.abs(clean_reference), initial=0) * factor
    output_dtype = "float64" if container == "list" else dtype
    limit = float(torch.finfo(_TORCH_DTYPES[output_dtype]).max) if output_dtype in FLOATS else math.inf
    if scale != 1 and not invalid and expected_magnitude > limit:
        invalid, names = True, list(SCALE_WORDS)  # the true values do not fit the output dtype: must be refused
    elif scale != 1:
        names = list(SCALE_WORDS)
    tol = tolerance(container, dtype)
    if similarity == "basis_change" and dtype in ("float16", "bfloat16"):
        tol = 0.5  # coordinates in an 8-vector basis amplify half-precision rounding
    check = close_to(clean_reference * factor, rtol=tol, atol=tol * max(1.0, factor))
    label = ",".join(
        part
        for part in (
            container + (f"/{anchors_container}" if anchors_container else ""),
            dtype if container != "list" else "",
            shape if shape != "base" else "",
            value if value != "clean" else "",
            f"x{scale:g}" if scale != 1 else "",
            f"{option[0]}={option[1]!r}" if option else "",
        )
        if part
    )
    return Case(
        "projection",
        similarity,
        label,
        functools.partial(_call_projection, *inputs, similarity, options),
        names=tuple(names),
        valid=not invalid,
        check=check,
        owner=SCALE_SAFETY if scale != 1 else None,
    )


def _power(base: float, exponent: int) -> float:
    try:
        return base**exponent
    except OverflowError:
        return math.inf


def _valid_projection_option(similarity: str, option: str, value: Any) -> bool:
    if option == "chunk_size":
        return value is None or (isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1)
    if option == "center":
        return isinstance(value, bool)
    if option == "eps":
        return similarity in ("cosine", "angular") and isinstance(value, float) and math.isfinite(value) and value > 0
    if option == "scaled":
        return similarity == "dot" and isinstance(value, bool)
    return False


PROJECTION_OPTIONS = [
    ("chunk_size", 1),
    ("chunk_size", 7),
    ("chunk_size", np.int64(5)),
    ("chunk_size", 0),
    ("chunk_size", -1),
    ("chunk_size", 2.5),
    ("chunk_size", True),
    ("chunk_size", "8"),
    ("center", True),
    ("center", "yes"),
    ("eps", 1e-8),
    ("eps", 0.0),
    ("eps", -1.0),
    ("eps", math.nan),
    ("eps", math.inf),
    ("eps", "1e-8"),
    ("scaled", True),
    ("scaled", "yes"),
    ("foo", 1),
]


def projection_cases(similarity: str) -> list[Case]:
    cases = [projection_case(similarity)]
    for container in CONTAINERS:
        for dtype in DTYPES if container != "list" else ("float64",):
            if (container, dtype) != ("numpy", "float64"):
                cases.append(projection_case(similarity, container=container, dtype=dtype))
    cases.append(projection_case(similarity, container="torch", dtype="float32", anchors_container="numpy"))
    for shape in ("x_empty", "anchors_empty", "one_d", "three_d", "width_mismatch"):
        cases.append(projection_case(similarity, shape=shape))
    for value in ("nan_x", "inf_anchors", "zero_row_x"):
        cases.append(projection_case(similarity, value=value))
    if similarity in ("cosine", "angular"):
        cases.append(projection_case(similarity, value="zero_row_x", option=("eps", 1e-8)))
    for dtype in ("float32", "float64"):
        cases += [projection_case(similarity, container="torch", dtype=dtype, scale=s) for s in SCALES[dtype][1:]]
    cases += [projection_case(similarity, option=option) for option in PROJECTION_OPTIONS]
    cases.append(
        Case(
            "projection",
            similarity,
            "similarity=None",
            functools.partial(_call_projection, np.ones((3, 2)), np.ones((2, 2)), None, {}),
            names=("similarity",),
            valid=False,
        )
    )
    return cases


def projection_name_cases() -> list[Case]:
    x = np.random.default_rng(0).standard_normal((5, 3))
    return [
        Case(
            "projection",
            "relative_projection",
            "similarity='cos'",
            functools.partial(_call_projection, x, x, "cos", {}),
            names=("similarity",),
            valid=False,
        ),
        Case(
            "projection",
            "relative_projection",
            "similarity=3",
            functools.partial(_call_projection, x, x, 3, {}),
            names=("similarity",),
            valid=False,
        ),
    ]


# --- anchor selection --------------------------------------------------------------------------------------------


def _select(x: Any, n: Any, strategy: Any = "random", **options: Any) -> np.ndarray:
    from latentstitch.relative import select_anchors

    return select_anchors(x, n, strategy, **options)


def anchor_indices(total: int, n: int):
    def check(result: Any) -> str | None:
        got = np.asarray(result)
        if got.shape != (n,) or got.dtype.kind not in "iu":
            return f"expected {n} integer indices, got {got.dtype} of shape {got.shape}"
        if len(set(got.tolist())) != n or got.min() < 0 or got.max() >= total:
            return f"indices repeat or fall outside [0, {total}): {got}"
        return None

    return check


def anchor_cases() -> list[Case]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 4)).astype(np.float32)
    labels = np.arange(50) % 5
    cases = []
    for strategy in ("random", "kmeans", "farthest"):
        cases.append(
            Case("anchors", strategy, "clean", functools.partial(_select, x, 6, strategy), check=anchor_indices(50, 6))
        )
        cases.append(
            Case(
                "anchors",
                strategy,
                "list x",
                functools.partial(_select, x.tolist(), 6, strategy),
                check=anchor_indices(50, 6),
            )
        )
        cases.append(
            Case(
                "anchors",
                strategy,
                "torch x",
                functools.partial(_select, torch.from_numpy(x), 6, strategy),
                check=anchor_indices(50, 6),
            )
        )
        cases.append(
            Case(
                "anchors",
                strategy,
                "labels given",
                functools.partial(_select, x, 6, strategy, labels=labels),
                names=("labels",),
                valid=False,
            )
        )
        for n in (0, -1, 2.5, True, "3", 51):
            cases.append(
                Case(
                    "anchors",
                    strategy,
                    f"n={n!r}",
                    functools.partial(_select, x, n, strategy),
                    names=("n",),
                    valid=False,
                )
            )
        cases.append(
            Case(
                "anchors",
                strategy,
                "n=np.int64(3)",
                functools.partial(_select, x, np.int64(3), strategy),
                check=anchor_indices(50, 3),
            )
        )
        for seed in (-1, 2.5, "0", 2**40):
            cases.append(
                Case(
                    "anchors",
                    strategy,
                    f"seed={seed!r}",
                    functools.partial(_select, x, 6, strategy, seed=seed),
                    names=("seed",),
                    valid=False,
                )
            )
        cases.append(
            Case(
                "anchors",
                strategy,
                "seed=np.int64(3)",
                functools.partial(_select, x, 6, strategy, seed=np.int64(3)),
                check=anchor_indices(50, 6),
            )
        )
        cases.append(
            Case(
                "anchors",
                strategy,
                "int x",
                functools.partial(_select, x.astype(np.int64), 6, strategy),
                names=("x",),
                valid=False,
            )
        )
        nan_x = x.copy()
        nan_x[7, 2] = np.nan
        cases.append(
            Case(
                "anchors",
                strategy,
                "NaN in x",
                functools.partial(_select, nan_x, 6, strategy),
                names=("x",),
                valid=False,
            )
        )
        cases.append(
            Case(
                "anchors",
                strategy,
                "empty x",
                functools.partial(_select, x[:0], 6, strategy),
                names=("x", "n"),
                valid=False,
            )
        )
        cases.append(
            Case(
                "anchors",
                strategy,
                "one-dimensional x",
                functools.partial(_select, x[:, 0], 6, strategy),
                names=("x",),
                valid=False,
            )
        )
    duplicates = np.repeat(x[:3], 10, axis=0)
    cases.append(
        Case(
            "anchors",
            "farthest",
            "3 distinct rows, n=6",
            functools.partial(_select, duplicates, 6, "farthest"),
            names=("x", "n"),
            valid=False,
        )
    )
    cases.append(
        Case(
            "anchors",
            "kmeans",
            "3 distinct rows, n=6",
            functools.partial(_select, duplicates, 6, "kmeans"),
            names=("x", "n"),
            check=anchor_indices(30, 6),
        )
    )
    cases.append(
        Case(
            "anchors",
            "stratified",
            "clean",
            functools.partial(_select, x, 6, "stratified", labels=labels),
            check=anchor_indices(50, 6),
        )
    )
    cases.append(
        Case(
            "anchors",
            "stratified",
            "list labels",
            functools.partial(_select, x, 6, "stratified", labels=labels.tolist()),
            check=anchor_indices(50, 6),
        )
    )
    cases.append(
        Case(
            "anchors",
            "stratified",
            "no labels",
            functools.partial(_select, x, 6, "stratified"),
            names=("labels",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "anchors",
            "stratified",
            "labels too short",
            functools.partial(_select, x, 6, "stratified", labels=labels[:-1]),
            names=("labels",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "anchors",
            "stratified",
            "2-D labels",
            functools.partial(_select, x, 6, "stratified", labels=labels[:, None]),
            names=("labels",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "anchors",
            "select_anchors",
            "strategy='best'",
            functools.partial(_select, x, 6, "best"),
            names=("strategy",),
            valid=False,
        )
    )
    return cases


# --- estimators ----------------------------------------------------------------------------------------------------


def estimator_class(name: str) -> type:
    import latentstitch  # noqa: F401  (registers every class)
    from latentstitch._core.persist import registered_classes

    return registered_classes()[name]


def make_estimator(name: str, **changes: Any) -> Any:
    return estimator_class(name)(**{**ESTIMATORS[name]["params"], **changes})


def _fit(name: str, inputs: tuple, changes: dict) -> Any:
    return make_estimator(name, **changes).fit(*inputs)


def _output(name: str, fitted: Any, x: Any) -> Any:
    """What a fitted estimator gives for ``x``: ``transform`` (or the method its entry names)."""
    return getattr(fitted, ESTIMATORS[name].get("method", "transform"))(x)


def _fit_transform(name: str, inputs: tuple, x: Any, changes: dict) -> Any:
    return _output(name, make_estimator(name, **changes).fit(*inputs), x)


def _estimator_reference(name: str, a: np.ndarray, b: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    inputs = (a, b) if ESTIMATORS[name]["paired"] else (a,)
    return np.asarray(_output(name, make_estimator(name).fit(*inputs), x))


def class_labels(b: np.ndarray) -> np.ndarray:
    """Three classes from a related representation (the argmax of its first three columns), as int64."""
    return np.argmax(b[:, :3], axis=1).astype(np.int64) if b.shape[0] else np.zeros(0, dtype=np.int64)


def _convert_labels(labels: np.ndarray, container: str) -> Any:
    if container == "list":
        return labels.tolist()
    return torch.from_numpy(labels) if container == "torch" else labels


def fit_pair(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Fit data of an estimator test: x (n, 6) and its second argument (b (n, 5), or class labels)."""
    a, b = data_pair(n, 6, 5)
    return (a, class_labels(b)) if ESTIMATORS[name].get("labels") else (a, b)


def estimator_case(
    name: str,
    *,
    container: str = "numpy",
    dtype: str = "float64",
    shape: str = "base",
    value: str = "clean",
    scale: float = 1.0,
    option: tuple[str, Any] | None = None,
) -> Case:
    settings = ESTIMATORS[name]
    paired = settings["paired"]
    n = {"n0": 0, "n1": 1, "n_min": 3}.get(shape, 40)
    a, b = data_pair(n, 6, 5, seed=2)
    labels = settings.get("labels", False)
    if labels:
        b = class_labels(b)  # class labels: no NaN/inf to place, and no rescaling
    a = a * np.linspace(0.5, 2.0, 6) + 1.0
    if value == "constant_x":
        a[:, 1] = 3.0
    clean_a, clean_b = a.copy(), b.copy()
    if value == "nan_x" and n > 3:
        a[3, 1] = np.nan
    elif value == "inf_y" and n > 3 and not labels:
        b[3, 0] = np.inf
    if shape == "one_d":
        a = a[:, 0]
    elif shape == "rows_mismatch":
        b = b[:-1]
    elif shape == "five_d":
        a = a.reshape(n, 1, 1, 2, 3)
    a_in = convert(a * scale, container, dtype)
    b_in = _convert_labels(b, container) if labels else convert(b * scale, container, dtype)
    inputs = (a_in, b_in) if paired else (a_in,)
    names = ["a", "b", "a, b", "a and b", "anchors", "x", *settings.get("arguments", ())]
    invalid = not is_float(container, dtype)
    if shape in ("n0", "one_d", "five_d") or (shape == "rows_mismatch" and paired and settings.get("same_rows", True)):
        invalid = True
    if n > 3 and (value == "nan_x" or (value == "inf_y" and paired and not labels)):
        invalid = True
    changes: dict = {}
    if option is not None:
        changes = dict([option])
        names = [option[0], *names] if invalid else [option[0]]
        invalid = True
    power = settings["scale"]
    if scale != 1:
        names = list(SCALE_WORDS)
    tol = tolerance(container, dtype)
    if shape == "n1" or shape == "n_min" or value == "constant_x":
        check = finite_in()  # any finite map, or a clear error (too few samples, rank deficiency)
    elif (scale != 1 and power is None) or not settings.get("reference", True):
        check = finite_in()
    else:
        factor = scale ** (power or 0)
        expected = _estimator_reference(name, clean_a, clean_b, clean_a) if not invalid else None
        check = close_to(lambda: expected * factor, rtol=tol * 5, atol=tol * 5 * factor)
    owner = SCALE_SAFETY if scale != 1 and name in SCALE_SAFETY_ESTIMATORS else None
    label = ",".join(
        part
        for part in (
            container,
            dtype if container != "list" else "",
            shape if shape != "base" else "",
            value if value != "clean" else "",
            f"x{scale:g}" if scale != 1 else "",
            f"{option[0]}={option[1]!r}" if option else "",
        )
        if part
    )
    return Case(
        "estimator",
        name,
        label,
        functools.partial(_fit_transform, name, inputs, a_in, changes),
        names=tuple(names),
        valid=not invalid,
        check=check,
        owner=owner,
    )


def _transform_unfitted(name: str, x: Any) -> Any:
    return _output(name, make_estimator(name), x)


def _transform_width(name: str) -> Any:
    a, b = fit_pair(name, 20)
    fitted = make_estimator(name).fit(a, b) if ESTIMATORS[name]["paired"] else make_estimator(name).fit(a)
    return _output(name, fitted, a[:, :4])


def _to_torch(name: str, dtype: Any) -> Any:
    a, b = fit_pair(name, 20)
    return make_estimator(name).fit(a, b).to_torch(dtype)


def _save_to_missing_folder(name: str, folder: str) -> Any:
    a, b = fit_pair(name, 20)
    fitted = make_estimator(name).fit(a, b) if ESTIMATORS[name]["paired"] else make_estimator(name).fit(a)
    fitted.save(Path(folder) / "missing" / "model.safetensors")


def estimator_cases(name: str) -> list[Case]:
    settings = ESTIMATORS[name]
    cases = [estimator_case(name)]
    for container in CONTAINERS:
        for dtype in DTYPES if container != "list" else ("float64",):
            if (container, dtype) != ("numpy", "float64"):
                cases.append(estimator_case(name, container=container, dtype=dtype))
    for shape in ("n0", "n1", "n_min", "one_d", "rows_mismatch", "five_d"):
        cases.append(estimator_case(name, shape=shape))
    for value in ("nan_x", "inf_y", "constant_x"):
        cases.append(estimator_case(name, value=value))
    for dtype in ("float32", "float64"):
        cases += [estimator_case(name, container="torch", dtype=dtype, scale=s) for s in SCALES[dtype][1:]]
    for option, values in settings["bad"].items():
        cases += [estimator_case(name, option=(option, value)) for value in values]
    x = data_pair(20, 6, 5)[0]
    cases.append(
        Case(
            "estimator",
            name,
            "transform before fit",
            functools.partial(_transform_unfitted, name, x),
            names=("fit",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "estimator",
            name,
            "transform of the wrong width",
            functools.partial(_transform_width, name),
            names=("x", *settings.get("arguments", ())),
            valid=False,
        )
    )
    folder = SCRATCH  # exists; SCRATCH / "missing" never does
    missing = str(folder / "missing")
    cases.append(
        Case(
            "estimator",
            name,
            "save into a missing folder",
            functools.partial(_save_to_missing_folder, name, folder),
            names=(missing,),
            valid=False,
        )
    )
    if settings["maps"]:
        for dtype in (torch.int64, "float32", np.float32):
            cases.append(
                Case(
                    "estimator",
                    name,
                    f"to_torch({dtype!r})",
                    functools.partial(_to_torch, name, dtype),
                    names=("dtype",),
                    valid=False,
                )
            )
    return cases


# --- torch modules and losses -----------------------------------------------------------------------------------


def _tensor(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def build_module(name: str, **changes: Any) -> Any:
    """A small instance of the module ``name`` with good arguments, changed by ``changes``."""
    from latentstitch import losses, models, relative, stitching

    anchors = _tensor(8, 6, seed=1)
    if name == "RelativeProjection":
        options = {"anchors": anchors, **changes}
        similarity = options.pop("similarity", "cosine")
        return relative.RelativeProjection(similarity, **options)
    if name == "RobustRelativeProjection":
        options = {"num_features": 6, "anchors": anchors, **changes}
        return relative.RobustRelativeProjection(options.pop("num_features"), **options)
    if name == "BatchInstanceNorm":
        return models.BatchInstanceNorm(**changes)
    if name == "LowRankStitch":
        options = {"in_features": 6, "out_features": 5, "rank": 2, **changes}
        return stitching.LowRankStitch(options["in_features"], options["out_features"], options["rank"])
    if name == "TopologicalDensificationLoss":
        options = {"beta": 1.0, **changes}
        return losses.TopologicalDensificationLoss(options.pop("beta"), **options)
    if name == "LatentClassifier":
        options = {"latent_dim": 4, "num_classes": 3, "anchor_inputs": _tensor(5, 6, seed=2), **changes}
        encoder = models.mlp_encoder(6, 8, 4)
        return models.LatentClassifier(encoder, options.pop("latent_dim"), options.pop("num_classes"), **options)
    if name == "ConvAutoencoder":
        options = {"image_shape": (1, 8, 8), "channels": (2, 4), "latent_dim": 4, **changes}
        return models.ConvAutoencoder(options.pop("image_shape"), **options)
    if name == "GCNClassifier":
        options = {"in_features": 6, "num_classes": 3, "hidden": 4, **changes}
        return models.GCNClassifier(options.pop("in_features"), options.pop("num_classes"), **options)
    if name == "RelativeHead":
        options = {"num_classes": 3, **changes}
        return models.RelativeHead(anchors, options.pop("num_classes"), **options)
    if name == "AbsoluteHead":
        options = {"in_features": 6, "num_classes": 3, **changes}
        return models.AbsoluteHead(options.pop("in_features"), options.pop("num_classes"), **options)
    if name == "LearnedAnchors":
        options = {"num_anchors": 4, "pool_size": 16, **changes}
        return relative.LearnedAnchors(options.pop("num_anchors"), options.pop("pool_size"), **options)
    if name == "MultiLayerRelativeProjection":  # two layers: the batch, and a narrower view of it
        options = {"num_layers": 2, "num_anchors": 8, "anchors": [anchors, anchors[:, :4]], **changes}
        return relative.MultiLayerRelativeProjection(options.pop("num_layers"), options.pop("num_anchors"), **options)
    if name == "ProductOfInvariances":
        return relative.ProductOfInvariances(**{"anchors": anchors, **changes})
    if name == "SpaceAggregation":  # two relative spaces of 6 anchors
        options = {"num_anchors": 6, "num_spaces": 2, **changes}
        return relative.SpaceAggregation(options.pop("num_anchors"), options.pop("num_spaces"), **options)
    if name == "RelativeConnector":  # relative to 8 anchors of width 6, decoded to 5 features
        return stitching.RelativeConnector(anchors, _tensor(8, 5, seed=4), _tensor(5, seed=5), **changes)
    raise KeyError(name)


def forward(name: str, module: Any, x: torch.Tensor) -> Any:
    """One forward pass of ``module`` on the batch ``x`` (rows of 6 features; images for the autoencoder)."""
    if name == "TopologicalDensificationLoss":
        return module(x)
    if name == "ConvAutoencoder":
        return module(x).reconstruction
    if name == "GCNClassifier":
        n = x.shape[0]
        edges = torch.stack([torch.arange(n), torch.roll(torch.arange(n), 1)])
        return module(x, edges)
    if name == "MultiLayerRelativeProjection":
        return module([x, x[:, :4]])
    if name == "SpaceAggregation":  # the batch read as a relative space of 6 anchors, and a second one
        return module([x, x.flip(1) * 2])
    return module(x)


def _module_input(name: str, n: int) -> torch.Tensor:
    if name == "ConvAutoencoder":
        return torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(3))
    if name == "LowRankStitch":
        return _tensor(n, 6, seed=3)
    return _tensor(n, 6, seed=3)


def _build_and_forward(name: str, changes: dict, n: int, train: bool, transform: Any = None) -> Any:
    module = build_module(name, **changes)
    module.train(train)
    x = _module_input(name, n)
    if transform is not None:
        x = transform(x)
    with torch.no_grad():
        return forward(name, module, x)


def _finite_output(result: Any) -> str | None:
    return finite_in()(as_array(result))


def module_cases(name: str) -> list[Case]:
    cases = [
        Case(
            "module",
            name,
            "train batch of 16",
            functools.partial(_build_and_forward, name, {}, 16, True),
            check=_finite_output,
        ),
        Case(
            "module",
            name,
            "eval batch of 16",
            functools.partial(_build_and_forward, name, {}, 16, False),
            check=_finite_output,
        ),
    ]
    for option, values in MODULES[name].items():
        for value in values:
            cases.append(
                Case(
                    "module",
                    name,
                    f"{option}={value!r}",
                    functools.partial(_build_and_forward, name, {option: value}, 16, True),
                    names=(option,),
                    valid=False,
                )
            )
    batch_statistics = name in ("RobustRelativeProjection", "BatchInstanceNorm", "RelativeHead", "AbsoluteHead")
    batch_statistics = batch_statistics or name in FIXED_BATCH
    inputs = ("x", "latents", "embeddings", *([INPUT_NAMES[name]] if name in INPUT_NAMES else []))
    cases.append(
        Case(
            "module",
            name,
            "train batch of 1",
            functools.partial(_build_and_forward, name, {}, 1, True),
            names=inputs,
            valid=not batch_statistics,
            check=_finite_output,
        )
    )
    propagates = name in PROPAGATE_NAN
    cases.append(
        Case(
            "module",
            name,
            "NaN input",
            functools.partial(_build_and_forward, name, {}, 16, True, _with_nan),
            names=inputs,
            valid=propagates,
            check=_propagated_nan if propagates else None,
        )
    )
    cases.append(
        Case(
            "module",
            name,
            "int64 input",
            functools.partial(_build_and_forward, name, {}, 16, False, _as_int),
            names=inputs,
            valid=False,
        )
    )
    return cases


def _propagated_nan(result: Any) -> str | None:
    values = as_array(result)
    return None if np.isnan(values).any() else "a NaN input gave a NaN-free output (NaN silently dropped?)"


def _with_nan(x: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x.view(x.shape[0], -1)[3, 1] = math.nan
    return x


def _as_int(x: torch.Tensor) -> torch.Tensor:
    return (x * 3).round().long()


def extra_module_cases() -> list[Case]:
    """Module-specific inputs the generic checks above do not build."""
    from latentstitch import models, relative

    cases = []
    batchnorm = functools.partial(_build_and_forward, "RelativeProjection", {"output_norm": "batchnorm"}, 1, True)
    cases.append(
        Case("module", "RelativeProjection", "batchnorm output, train batch of 1", batchnorm, names=("x",), valid=False)
    )
    empty = functools.partial(_build_and_forward, "RelativeProjection", {}, 0, False)
    cases.append(
        Case(
            "module",
            "RelativeProjection",
            "empty batch",
            empty,
            check=lambda r: None if tuple(r.shape) == (0, 8) else f"shape {tuple(r.shape)}",
        )
    )
    cases.append(
        Case(
            "module",
            "RelativeProjection",
            "int anchors",
            functools.partial(relative.RelativeProjection, anchors=torch.ones(3, 2, dtype=torch.long)),
            names=("anchors",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "module",
            "RelativeProjection",
            "wrong width",
            functools.partial(_build_and_forward, "RelativeProjection", {}, 4, False, lambda x: x[:, :5]),
            names=("x", "anchors", "x, anchors", "x and anchors"),
            valid=False,
        )
    )

    def bn_encoder_one_row():
        encoder = models.cnn_encoder((1, 4, 4), latent_dim=3, channels=(2, 2, 2))
        model = models.LatentClassifier(encoder, 3, 2)
        model.train()
        return model(torch.rand(1, 1, 4, 4))

    cases.append(
        Case(
            "module",
            "LatentClassifier",
            "batch-norm encoder, train batch of 1",
            bn_encoder_one_row,
            names=("x",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "module",
            "mlp_encoder",
            "in_features=0",
            functools.partial(models.mlp_encoder, 0, 8, 4),
            names=("in_features",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "module",
            "mlp_encoder",
            "hidden=-1",
            functools.partial(models.mlp_encoder, 6, -1, 4),
            names=("hidden",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "module",
            "cnn_encoder",
            "latent_dim=0",
            functools.partial(models.cnn_encoder, (1, 8, 8), 0),
            names=("latent_dim",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "module",
            "cnn_encoder",
            "channels=(0,)",
            functools.partial(models.cnn_encoder, (1, 8, 8), 4, channels=(0,)),
            names=("channels",),
            valid=False,
        )
    )
    cases.append(
        Case("module", "tiny10", "width=0", functools.partial(models.tiny10, 0.0), names=("width",), valid=False)
    )
    cases.append(
        Case("module", "tiny10", "width=nan", functools.partial(models.tiny10, math.nan), names=("width",), valid=False)
    )
    cases.append(
        Case(
            "module",
            "tiny_resnet",
            "blocks=()",
            functools.partial(models.tiny_resnet, blocks=()),
            names=("blocks",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "module",
            "stitching_head",
            "width=0",
            functools.partial(models.stitching_head, 0, 3),
            names=("width",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "module",
            "normalized_adjacency",
            "num_nodes=0",
            functools.partial(models.normalized_adjacency, torch.zeros(2, 0, dtype=torch.long), 0),
            names=("num_nodes",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "module",
            "normalized_adjacency",
            "float edges",
            functools.partial(models.normalized_adjacency, torch.zeros(2, 3), 4),
            names=("edge_index",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "module",
            "ZeroShotStitched",
            "not a model",
            functools.partial(models.ZeroShotStitched, object(), object()),
            names=("encoder_side",),
            valid=False,
        )
    )
    return cases


def _death_times(points: Any) -> Any:
    from latentstitch.losses import death_times

    return death_times(points)


def loss_cases() -> list[Case]:
    from latentstitch import losses

    rng = np.random.default_rng(5)
    cloud = rng.standard_normal((12, 3))
    reference = np.sort(np.asarray(_death_times(cloud)))
    cases = [
        Case("loss", "death_times", "clean", functools.partial(_death_times, cloud), check=close_to(reference)),
        Case("loss", "death_times", "list", functools.partial(_death_times, cloud.tolist()), check=close_to(reference)),
        Case(
            "loss",
            "death_times",
            "one point",
            functools.partial(_death_times, cloud[:1]),
            check=lambda r: None if len(r) == 0 else "expected no death time",
        ),
        Case(
            "loss",
            "death_times",
            "no point",
            functools.partial(_death_times, cloud[:0]),
            names=("points",),
            valid=False,
        ),
        Case(
            "loss",
            "death_times",
            "NaN",
            functools.partial(_death_times, np.where(np.eye(12, 3) > 0, np.nan, cloud)),
            names=("points",),
            valid=False,
        ),
        Case(
            "loss",
            "death_times",
            "int",
            functools.partial(_death_times, cloud.astype(np.int64)),
            names=("points",),
            valid=False,
        ),
    ]
    for dtype in ("float32", "float64"):
        for scale in SCALES[dtype][1:]:
            cases.append(
                Case(
                    "loss",
                    "death_times",
                    f"torch,{dtype},x{scale:g}",
                    functools.partial(_death_times, convert(cloud * scale, "torch", dtype)),
                    names=SCALE_WORDS,
                    check=close_to(reference * scale, rtol=1e-4, atol=0),
                    owner=SCALE_SAFETY,
                )
            )
    loss = losses.TopologicalDensificationLoss(1.0)
    latents = torch.tensor(cloud, dtype=torch.float32)
    cases.append(
        Case(
            "loss",
            "TopologicalDensificationLoss",
            "empty latents",
            functools.partial(loss, latents[:0]),
            names=("latents",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "loss",
            "TopologicalDensificationLoss",
            "group_size=0",
            functools.partial(loss, latents, group_size=0),
            names=("group_size",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "loss",
            "TopologicalDensificationLoss",
            "float labels",
            functools.partial(loss, latents, torch.ones(12)),
            names=("labels",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "loss",
            "calibrated_reconstruction_loss",
            "empty",
            functools.partial(losses.calibrated_reconstruction_loss, torch.ones(0, 3), torch.ones(0, 3)),
            names=("reconstruction", "target"),
            valid=False,
        )
    )
    cases.append(
        Case(
            "loss",
            "calibrated_reconstruction_loss",
            "shapes differ",
            functools.partial(losses.calibrated_reconstruction_loss, torch.ones(2, 3), torch.ones(3, 3)),
            names=("reconstruction", "target", "reconstruction and target"),
            valid=False,
        )
    )
    cases.append(
        Case(
            "loss",
            "gaussian_kl",
            "shapes differ",
            functools.partial(losses.gaussian_kl, torch.ones(2, 3), torch.ones(2, 4)),
            names=("mu", "logvar", "mu and logvar"),
            valid=False,
        )
    )
    return cases


# --- invariance ------------------------------------------------------------------------------------------------


def invariance_cases() -> list[Case]:
    from latentstitch import invariance

    cases = []
    for dim in (0, -1, 2.5, "3"):
        cases.append(
            Case(
                "invariance",
                "random_transform",
                f"dim={dim!r}",
                functools.partial(invariance.random_transform, "orthogonal", dim),
                names=("dim",),
                valid=False,
            )
        )
    for seed in (-1, 2.5, "0"):
        cases.append(
            Case(
                "invariance",
                "random_transform",
                f"seed={seed!r}",
                functools.partial(invariance.random_transform, "orthogonal", 3, seed),
                names=("seed",),
                valid=False,
            )
        )
    cases.append(
        Case(
            "invariance",
            "random_transform",
            "kind='shear'",
            functools.partial(invariance.random_transform, "shear", 3),
            names=("kind",),
            valid=False,
        )
    )
    transform = invariance.random_transform("orthogonal", 3)
    x = np.random.default_rng(0).standard_normal((5, 3))
    cases.append(
        Case(
            "invariance",
            "Transform",
            "x of the wrong width",
            functools.partial(transform, x[:, :2]),
            names=("x",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "invariance",
            "Transform",
            "list x",
            functools.partial(transform, x.tolist()),
            check=close_to(x @ transform.matrix),
        )
    )
    return cases


def numeric_cases() -> list[Case]:
    cases: list[Case] = []
    for name in MEASURES:
        cases += measure_cases(name)
    for name in STREAMING:
        cases += streaming_cases(name)
    for similarity in SIMILARITIES:
        cases += projection_cases(similarity)
    cases += projection_name_cases()
    cases += anchor_cases()
    for name in ESTIMATORS:
        cases += estimator_cases(name)
    for name in MODULES:
        cases += module_cases(name)
    cases += extra_module_cases()
    cases += loss_cases()
    cases += invariance_cases()
    return cases
