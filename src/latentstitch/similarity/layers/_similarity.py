"""Every layer pair of two models in one pass: ``layer_similarity`` runs both models over a stream of batches with
forward hooks on named layers, pools each layer's output (over the attention mask, the positions, or not at all),
accumulates ``LayerMoments`` and finishes every pair with the moment-based measures (``LAYER_MEASURES``).

Memory: each layer's own d x d moments and the (sum of widths) x (sum of widths) cross moments, in float64, plus one
batch of activations; never N x d. Time: the two forward passes plus, per batch, one product over the concatenated
layers. The result does not depend on the batch size (batches of one row are fine: the statistics are those of all
rows, not averages of per-batch estimates).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from latentstitch._core.hooks import eval_mode
from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import check_bool, check_choice
from latentstitch._core.progress import progress_bar
from latentstitch.similarity.inference._common import Result
from latentstitch.similarity.layers._capture import pooled_layers, resolve_layers, split_batch
from latentstitch.similarity.layers._moments import SAMPLE_ROWS, LayerMoments
from latentstitch.similarity.layers._significance import layer_p_values
from latentstitch.similarity.measures._cca import cca_from_moments, pwcca_from_moments, svcca_from_moments
from latentstitch.similarity.measures._cka_statistics import CKAStatistics, cka_ratio
from latentstitch.similarity.measures._gulp import gulp_from_moments
from latentstitch.similarity.measures._procrustes import angular_from_moments, procrustes_from_moments
from latentstitch.similarity.measures._registry import ZeroVarianceError, get_measure
from latentstitch.similarity.measures._regression import r2_from_moments
from latentstitch.similarity.measures._sample_size import is_trivial
from latentstitch.similarity.measures._subspace import ensd_from_moments

POOLINGS = ("mean", "first", "tokens")


def _linear_cka(m: CrossMoments) -> torch.Tensor:
    statistics = CKAStatistics(debiased=False)
    statistics.moments = m
    return cka_ratio(*statistics.hsic_terms(), measure="linear CKA")


# The registered measures that are functions of a pair's second moments, each finished by the one-shot index's own
# function (activations are float32 or narrower: the CCA family's rank tolerance is float32's).
LAYER_MEASURES: dict[str, Callable[[CrossMoments], torch.Tensor]] = {
    "linear_cka": _linear_cka,
    "r2_linear": r2_from_moments,
    "mean_cca": lambda m: cca_from_moments(m, "mean", None, torch.float32),
    "r2_cca": lambda m: cca_from_moments(m, "r2", None, torch.float32),
    "svcca": lambda m: svcca_from_moments(m, 0.99, None, torch.float32),
    "pwcca": lambda m: pwcca_from_moments(m, None, torch.float32),
    "procrustes_distance": procrustes_from_moments,
    "shape_metric_angular": angular_from_moments,
    "gulp": lambda m: gulp_from_moments(m, 0.0, torch.float32),
    "ensd": ensd_from_moments,
}


@dataclass(frozen=True)
class LayerSimilarity(Result):
    """What ``layer_similarity`` returns.

    ``values[measure][i, j]``: the measure between layer ``layers_a[i]`` of the first model and ``layers_b[j]`` of
    the second, over ``samples`` rows (inputs, or tokens with ``pooling="tokens"``). ``widths_a``, ``widths_b``:
    each layer's number of features after pooling. ``undefined``: per measure, the cells left NaN and why (a layer
    with no variance over the data, e.g. a constant position embedding; a fitted measure, R^2 or the CCA family, with
    no more rows than features + 1, where it matches anything; a measure that failed on that pair, with its error:
    the other cells and measures are kept).

    ``p_values[measure]``: per cell, the closed-form permutation p-value (linear CKA: the exact null mean and
    variance and a Pearson type III tail, ``permutation_test(..., method="moments")``); ``p_corrected[measure]``:
    Holm-corrected over every defined cell (the family-wise error of "some layer pair is related");
    ``skewness_rows``: the rows the null's skewness was computed from (``samples``: exact; fewer: estimated from
    a uniform sample). Empty with ``pooling="tokens"`` (tokens of one input are not exchangeable).
    """

    layers_a: list[str]
    layers_b: list[str]
    values: dict[str, np.ndarray]
    samples: int
    pooling: str
    widths_a: list[int]
    widths_b: list[int]
    undefined: dict[str, list[str]] = field(default_factory=dict)
    p_values: dict[str, np.ndarray] = field(default_factory=dict)
    p_corrected: dict[str, np.ndarray] = field(default_factory=dict)
    skewness_rows: int = 0

    def significant(self, measure: str = "linear_cka", alpha: float = 0.05) -> np.ndarray:
        """The cells whose Holm-corrected p-value is below ``alpha`` (boolean matrix: ``heatmap(..., marks=)``)."""
        if measure not in self.p_corrected:
            raise ValueError(f"measure: no p-values for {measure!r}; they are computed for {list(self.p_corrected)}")
        with np.errstate(invalid="ignore"):
            return self.p_corrected[measure] < alpha

    def best(self, measure: str) -> tuple[str, str, float]:
        """The most alike pair under ``measure`` (largest similarity or smallest distance)."""
        matrix = self.values[measure]
        if np.isnan(matrix).all():
            cells = self.undefined.get(measure)
            why = f", e.g. {cells[0]}" if cells else ""
            raise ValueError(f"measure: {measure} has no value on any layer pair (every cell is NaN{why})")
        sign = 1.0 if get_measure(measure).kind == "similarity" else -1.0
        i, j = np.unravel_index(np.nanargmax(sign * matrix), matrix.shape)
        return self.layers_a[i], self.layers_b[j], float(matrix[i, j])


def check_measures(measures: str | Sequence[str]) -> list[str]:
    names = [measures] if isinstance(measures, str) else list(measures)
    unknown = [m for m in names if m not in LAYER_MEASURES]
    if not names or unknown:
        raise ValueError(
            f"measures: {unknown or 'none given'}; layer_similarity computes the measures that are functions of "
            f"second moments: {', '.join(LAYER_MEASURES)}"
        )
    return names


def layer_similarity_from_moments(
    moments: LayerMoments, measures: str | Sequence[str] = "linear_cka"
) -> LayerSimilarity:
    """Finish every layer pair of ``moments`` with each of ``measures`` (names from ``LAYER_MEASURES``)."""
    names = check_measures(measures)
    if moments.count < 2:
        raise ValueError(f"data: every measure needs at least 2 rows; {moments.count} were seen")
    shape = (len(moments.names["a"]), len(moments.names["b"]))
    values = {name: np.full(shape, np.nan) for name in names}
    undefined: dict[str, list[str]] = {}
    warned: dict[str, list[str]] = {}
    still = {side: {k for k in range(len(moments.names[side])) if constant(moments.layer(side, k))} for side in "ab"}
    for i, j in np.ndindex(*shape):
        layers = (moments.names["a"][i], moments.names["b"][j])
        flat = [layer for layer, k, side in zip(layers, (i, j), "ab", strict=True) if k in still[side]]
        pair = None if flat else moments.pair(i, j)
        widths = (moments.widths["a"][i], moments.widths["b"][j])
        for name in names:
            value, why, caught = _cell(name, pair, flat, layers, widths, moments.count)
            values[name][i, j] = value
            if why:
                undefined.setdefault(name, []).append(f"{layers[0]} ~ {layers[1]}: {why}")
            warned.setdefault(name, []).extend(caught)
    p_values, p_corrected = {}, {}
    if "linear_cka" in names and moments.fourth is not None:
        p_values["linear_cka"], p_corrected["linear_cka"] = layer_p_values(moments, values["linear_cka"])
    total = shape[0] * shape[1]
    for name, cells in undefined.items():
        warnings.warn(f"{name}: {len(cells)} of {total} layer pairs left NaN, e.g. {cells[0]}", RuntimeWarning, 3)
    for name, messages in warned.items():
        if messages:
            warnings.warn(
                f"{name}: {len(messages)} warnings over {total} layer pairs, e.g. {messages[0]}", stacklevel=3
            )
    return LayerSimilarity(
        layers_a=list(moments.names["a"]),
        layers_b=list(moments.names["b"]),
        values=values,
        samples=moments.count,
        pooling="",
        widths_a=list(moments.widths["a"]),
        widths_b=list(moments.widths["b"]),
        undefined=undefined,
        p_values=p_values,
        p_corrected=p_corrected,
        skewness_rows=0 if moments.sample_keys is None else int(moments.sample_keys.shape[0]),
    )


def _cell(
    name: str, pair: CrossMoments | None, flat: list[str], layers: tuple[str, str], widths: tuple[int, int], n: int
) -> tuple[float, str, list[str]]:
    """One measure of one layer pair: ``(value, why it is NaN or "", the warnings it raised)``."""
    if flat:
        return math.nan, f"layer {flat[0]!r} does not vary", []
    if is_trivial(name, n, *widths):
        return math.nan, f"{n} rows for {widths[0]} and {widths[1]} features: a fitted measure matches anything", []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = float(LAYER_MEASURES[name](pair))
        except ZeroVarianceError as error:
            return math.nan, f"layer {layers[0] if error.name == 'x' else layers[1]!r} does not vary", []
        except (ValueError, ArithmeticError, RuntimeError) as error:  # e.g. an eigensolver that did not converge:
            # this cell is NaN and says why; the other measures and layer pairs are kept
            detail = " ".join(str(error).split())[:200]
            return math.nan, f"{name} failed: {detail}", [str(w.message) for w in caught]
    if math.isnan(value):  # never a silent NaN cell
        return value, f"{name} gave NaN", [str(w.message) for w in caught]
    return value, "", [str(w.message) for w in caught]


def constant(moments: CrossMoments) -> bool:
    """Whether a layer's spread over the rows is below float32 rounding of its values (``2^-20`` of their root mean
    square): an exactly constant layer (a bias, a position embedding) whose float32 centring leaves only rounding."""
    n = moments.count
    spread = float(torch.trace(moments.centered_aa())) / n
    mean = moments.mean_a
    return spread <= 2.0**-40 * (float(mean @ mean) + spread)


def layer_similarity(
    model_a: nn.Module,
    model_b: nn.Module,
    data: Iterable[Any],
    *,
    layers_a: str | Sequence[str] | None = None,
    layers_b: str | Sequence[str] | None = None,
    measures: str | Sequence[str] = "linear_cka",
    pooling: str = "mean",
    separate_inputs: bool = False,
    precision: str = "float64",
    progress: bool = False,
    sample_rows: int = SAMPLE_ROWS,
    seed: int = 0,
) -> LayerSimilarity:
    """Every measure between every named layer of ``model_a`` and every named layer of ``model_b``, in one pass.

    Parameters
    ----------
    model_a, model_b : torch modules (Hugging Face models included), run in eval mode without gradient, each on its
        own device; the statistics are accumulated on ``model_a``'s.
    data : an iterable of batches (a ``DataLoader``, a list). A batch is a tensor of inputs, a mapping of keyword
        inputs (a Hugging Face tokenizer's output: ``model(**batch)``; its ``attention_mask`` picks the tokens), or an
        ``(inputs, labels, ...)`` tuple. Both models get the same batch, unless ``separate_inputs``.
    layers_a, layers_b : layer names as ``model.named_modules()`` gives them ("encoder.layer.3"); by default the
        blocks of each model's longest ``nn.ModuleList`` (a transformer's layers). A layer's activation is its
        module's first output in the forward pass (the first item of a tuple output).
    measures : names from ``LAYER_MEASURES``: linear CKA, R^2 of a linear fit, mean CCA and R^2_CCA, SVCCA, PWCCA,
        the Procrustes distance and angular shape metric, GULP, ENSD.
    pooling : per input, ``"mean"`` averages (batch, tokens, d) outputs over the attention mask (all tokens without
        one) and convolutional (batch, channels, ...) maps over positions; ``"first"`` takes the first token (CLS);
        ``"tokens"`` makes every unmasked token (or position) a row, so the models must tokenise alike.
        (batch, d) outputs are taken as they are.
    separate_inputs : each batch is a pair ``(inputs_a, inputs_b)`` of the same samples prepared for each model
        (two tokenizers, two image sizes).
    precision : ``"float64"`` (default): each batch's products in float64, exact for float32 / bfloat16 activations.
        ``"input"``: in float32 (2-3x faster on a CPU), summed in float64: relative error ~1e-6, enough for CKA and
        Procrustes; the CCA family's rank decision on rank-deficient layers wants float64.
    progress : a progress bar over the batches (with an ETA when ``data`` has a length).
    sample_rows, seed : the uniform sample of rows (seeded) from which the skewness of linear CKA's closed-form
        permutation null is estimated beyond ``sample_rows`` rows (exact up to it); 0: normal tail.

    Returns
    -------
    ``LayerSimilarity``: the matrix per measure, the layer names, the number of rows, linear CKA's p-values.
    ``heatmap(result.values[m], path, labels=result.layers_a, column_labels=result.layers_b, measure=m,
    marks=result.significant())`` draws one with the Holm-significant cells starred.
    """
    names = check_measures(measures)
    moments = layer_moments(
        model_a,
        model_b,
        data,
        layers_a=layers_a,
        layers_b=layers_b,
        pooling=pooling,
        separate_inputs=separate_inputs,
        precision=precision,
        progress=progress,
        sample_rows=sample_rows,
        seed=seed,
    )
    result = layer_similarity_from_moments(moments, names)
    if pooling == "tokens":  # tokens of one input are dependent: a permutation of tokens is no null
        result = dataclasses.replace(result, p_values={}, p_corrected={}, skewness_rows=0)
    return dataclasses.replace(result, pooling=pooling)


def layer_moments(
    model_a: nn.Module,
    model_b: nn.Module,
    data: Iterable[Any],
    *,
    layers_a: str | Sequence[str] | None = None,
    layers_b: str | Sequence[str] | None = None,
    pooling: str = "mean",
    separate_inputs: bool = False,
    precision: str = "float64",
    progress: bool = False,
    sample_rows: int = SAMPLE_ROWS,
    seed: int = 0,
) -> LayerMoments:
    """The one pass of ``layer_similarity`` (same arguments), returning its ``LayerMoments``: run it on each
    partition of the data (each machine) and ``merge`` the results, then ``layer_similarity_from_moments``."""
    check_choice(pooling, "pooling", POOLINGS)
    separate_inputs = check_bool(separate_inputs, "separate_inputs")
    models = {"a": model_a, "b": model_b}
    layers = {side: resolve_layers(models[side], given, side) for side, given in (("a", layers_a), ("b", layers_b))}
    moments = LayerMoments(precision=precision, sample_rows=sample_rows, seed=seed)
    total = len(data) if hasattr(data, "__len__") else None
    with progress_bar(progress) as bar, torch.no_grad(), eval_mode(model_a, model_b):
        task = None if bar is None else bar.add_task("layer pairs", total=total)
        for index, batch in enumerate(data):
            inputs = split_batch(batch, separate_inputs, index)
            acts = {
                side: pooled_layers(models[side], inputs[k], layers[side], pooling, f"layers_{side}")
                for k, side in enumerate(("a", "b"))
            }
            moments.update(acts["a"], acts["b"])
            if bar is not None:
                bar.advance(task)
    return moments
