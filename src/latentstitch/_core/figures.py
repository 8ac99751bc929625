"""Figures: matplotlib with the non-interactive Agg backend, and the one figure writer (atomic, ``_core.atomic``).
Cheap to import: matplotlib (which costs start-up time) is imported only when ``pyplot()`` is called."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from latentstitch._core.atomic import atomic_path


def pyplot():
    """matplotlib.pyplot with the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure: Any, path: Path, dpi: int = 100) -> str:
    """Save a matplotlib figure as PNG (creating the folder; written atomically), close it, return the path as a
    string."""
    plt = pyplot()
    write_figure(figure, path, dpi=dpi)
    plt.close(figure)
    return str(path)


def write_figure(figure: Any, path: str | os.PathLike, dpi: int = 100) -> Path:
    """Write ``figure`` to ``path`` (its format from the suffix, PNG by default), creating the folder: into a
    temporary file renamed onto ``path`` (``_core.atomic``), so an interrupted run never leaves half an image."""
    target = Path(os.fspath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as temporary:
        figure.savefig(temporary, dpi=dpi, format=target.suffix.lstrip(".").lower() or "png")
    return target
