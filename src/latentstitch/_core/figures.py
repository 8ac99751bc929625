"""Figures: matplotlib with the non-interactive Agg backend, and a PNG writer. Imported lazily (matplotlib costs
start-up time), so modules that draw import this one inside the function that draws."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot():
    """matplotlib.pyplot with the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure: Any, path: Path, dpi: int = 100) -> str:
    """Save a matplotlib figure as PNG (creating the folder), close it, return the path as a string."""
    plt = pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return str(path)
