"""The one rich progress bar of latentstitch (description, bar, done / total, elapsed time, time remaining).

On a terminal rich redraws the bar in place. Off a terminal (output redirected to a file or a pipe, a batch job's
log) rich draws nothing until the end, so the bar writes a plain line instead, at most one every
``PLAIN_INTERVAL`` seconds: ``layer pairs: 42% (420/1000), 0:01:10 elapsed, about 0:01:37 left``. The first line
comes after one interval, so a run shorter than that prints nothing; a disabled bar (``--quiet``) never prints.
"""

from __future__ import annotations

import functools
from contextlib import nullcontext
from typing import Any

#: Seconds between two plain progress lines when the bar's console is not a terminal.
PLAIN_INTERVAL = 5.0


def new_progress(*columns: Any, **options: Any) -> Any:
    """A rich ``Progress`` with latentstitch's columns (or the ``columns`` given), which writes plain lines when its
    console is not a terminal; ``options`` go to ``Progress`` (``disable``, ``transient``, ``console``)."""
    if not columns:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        description = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        columns = (*description, TextColumn("ETA"), TimeRemainingColumn())
    return _progress_class()(*columns, **options)


def progress_bar(progress: Any) -> Any:
    """A context giving a rich ``Progress`` or None: a new one for ``True``, the caller's own ``Progress`` left
    running (not stopped on exit), None for ``False`` / ``None``."""
    if progress is True:
        return new_progress()
    return nullcontext(progress or None)


@functools.cache
def _progress_class() -> type:
    """rich's ``Progress`` with plain lines off a terminal (built on first use: importing rich is not free)."""
    from rich.progress import Progress

    class PlainWhenRedirected(Progress):
        def __init__(self, *columns: Any, **options: Any) -> None:
            super().__init__(*columns, **options)
            self._last_line = self.get_time()

        def advance(self, task_id: Any, advance: float = 1) -> None:
            super().advance(task_id, advance)
            self._plain_line()

        def update(self, task_id: Any, **changes: Any) -> None:
            super().update(task_id, **changes)
            self._plain_line()

        def _plain_line(self) -> None:
            console = self.console
            if self.disable or console.is_terminal or console.is_jupyter:
                return
            now = self.get_time()
            if now - self._last_line < PLAIN_INTERVAL:
                return
            self._last_line = now
            lines = [plain_line(task) for task in self.tasks if task.visible and task.started and not task.finished]
            if lines:
                console.file.write("; ".join(lines) + "\n")
                console.file.flush()

    return PlainWhenRedirected


def plain_line(task: Any) -> str:
    """One task's progress in words: ``description: 42% (420/1000), 0:01:10 elapsed, about 0:01:37 left``."""
    elapsed = _clock(task.elapsed or 0.0)
    if task.total is None or not task.total:
        return f"{task.description}: {task.completed:g} done, {elapsed} elapsed"
    left = task.time_remaining
    remaining = "" if left is None else f", about {_clock(left)} left"
    counts = f"{task.completed:g}/{task.total:g}"
    return f"{task.description}: {task.percentage:.0f}% ({counts}), {elapsed} elapsed{remaining}"


def _clock(seconds: float) -> str:
    """``h:mm:ss``, as rich's time columns write it."""
    whole = int(max(seconds, 0.0) + 0.5)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"
