"""Drawing a result: ``heatmap`` writes the matrix of ``pairwise`` or the grid of a ``pairwise_test`` (significant
pairs starred) as a labelled PNG. Computing never draws; drawing takes what was computed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from latentstitch._core.figures import write_figure
from latentstitch.similarity.inference._pairwise_test import PairwiseTest
from latentstitch.similarity.measures._registry import get_measure


def heatmap(
    result: np.ndarray | PairwiseTest,
    path: str | Path,
    *,
    labels: Sequence[str] | None = None,
    column_labels: Sequence[str] | None = None,
    measure: str | None = None,
    title: str | None = None,
    kind: str | None = None,
    value_range: tuple[float, float] | None = None,
    marks: np.ndarray | None = None,
    axis_labels: tuple[str, str] | None = None,
) -> Path:
    """Write a matrix of similarities as a labelled heatmap PNG (rows: first argument, columns: second).

    Parameters
    ----------
    result : the (m, k) matrix of ``pairwise``, or a ``PairwiseTest`` (its values, labels and measure; pairs with
        a corrected p < 0.05 are starred).
    path : the PNG file to write (its folder is created).
    labels, column_labels : row and column names (default: the test's labels, else 0, 1, ...; the columns are the
        rows' names for a square matrix). For ``pairwise`` of a mapping, ``labels=list(mapping)``.
    measure : the registered measure's name, for the colour scale's direction and range and the default title.
    title : the title (default: the measure's name).
    kind, value_range : ``"similarity"`` or ``"distance"`` and the colour scale's range (default: the measure's,
        else similarity in [0, 1]).
    marks : a boolean matrix of cells to star (default for a test: ``p_values < 0.05``).
    axis_labels : the rows' and the columns' axis titles (default: "representation (first argument)", "(second
        argument)"), e.g. the two models' names.

    Returns
    -------
    The path written.
    """
    if isinstance(result, PairwiseTest):
        matrix = result.values
        labels = result.labels if labels is None else labels
        column_labels = result.labels_against if column_labels is None else column_labels
        measure = result.measure if measure is None else measure
        marks = result.p_values < 0.05 if marks is None else marks
        if title is None:
            title = f"{measure} ({result.correction}-corrected, * p < 0.05)"
    else:
        matrix = np.asarray(result, dtype=float)
        if matrix.ndim != 2:
            raise ValueError(f"result: expected a (m, k) matrix or a PairwiseTest, got shape {matrix.shape}")
    spec = None if measure is None else get_measure(measure)
    title = (spec.name if spec is not None else "") if title is None else title
    kind = (spec.kind if spec is not None else "similarity") if kind is None else kind
    value_range = (spec.value_range if spec is not None else (0.0, 1.0)) if value_range is None else value_range
    from matplotlib.figure import Figure  # no pyplot: no global backend or state is touched

    m, k = matrix.shape
    labels = [str(i) for i in range(m)] if labels is None else list(labels)
    column_labels = (labels if m == k else [str(j) for j in range(k)]) if column_labels is None else column_labels
    column_labels = list(column_labels)
    size = min(3.0 + 0.45 * max(m, k), 16.0)
    figure = Figure(figsize=(size + 1.5, size))
    axes = figure.add_subplot()
    finite = [v for v in value_range if math.isfinite(v)]
    low = finite[0] if len(finite) == 2 else np.nanmin(matrix)
    high = finite[-1] if len(finite) == 2 else np.nanmax(matrix)
    image = axes.imshow(matrix, cmap="viridis" if kind == "similarity" else "viridis_r", vmin=low, vmax=high)
    # Long or many column names would overlap side by side: slant them, anchored at their right end.
    slanted = k > 6 or max(len(str(label)) for label in column_labels) * k > 40
    axes.set_xticks(range(k), column_labels, rotation=45 if slanted else 0, ha="right" if slanted else "center")
    axes.set_yticks(range(m), labels)
    row_title, column_title = axis_labels or ("representation (first argument)", "representation (second argument)")
    axes.set_xlabel(column_title)
    axes.set_ylabel(row_title)
    axes.set_title(title)
    if max(m, k) <= 12:
        for i in range(m):
            for j in range(k):
                star = "*" if marks is not None and marks[i, j] else ""
                # Dark text on the colour map's bright end, white on its dark end.
                red, green, blue, _ = image.cmap(image.norm(matrix[i, j]))
                ink = "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"
                axes.text(j, i, f"{matrix[i, j]:.2f}{star}", ha="center", va="center", color=ink, fontsize=8)
    figure.colorbar(image, ax=axes, label=kind)
    figure.tight_layout()
    return write_figure(figure, path, dpi=120)
