"""The one rich progress bar of latentstitch (description, bar, done / total, elapsed time, estimated time left)."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any


def new_progress(**options: Any) -> Any:
    """A rich ``Progress`` with latentstitch's columns; ``options`` go to ``Progress`` (``disable``, ``transient``)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, TextColumn("eta"), TimeRemainingColumn(), **options)


def progress_bar(progress: Any) -> Any:
    """A context giving a rich ``Progress`` or None: a new one for ``True``, the caller's own ``Progress`` left
    running (not stopped on exit), None for ``False`` / ``None``."""
    if progress is True:
        return new_progress()
    return nullcontext(progress or None)
