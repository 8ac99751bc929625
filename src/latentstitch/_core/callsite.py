"""Warnings that point at the user's line, not at library internals.

``warnings.warn(..., stacklevel=k)`` needs the depth of the call stack between the warning and the user's code,
which changes with every wrapper (``compare`` calls a ``MeasureSpec`` that calls the measure...). ``warn_at_caller``
walks the stack instead and attributes the warning to the first frame outside the latentstitch package.
"""

from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # latentstitch/, above _core/


def caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` call in the calling function point at the first frame
    outside latentstitch (the user's code)."""
    frame = sys._getframe(1)  # the function that will call warnings.warn: stacklevel 1
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    return level


def warn_at_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the user's line (see the module docstring)."""
    warnings.warn(message, category, stacklevel=caller_stacklevel())
