"""What every reproduction's ``run`` looks like (``Reproduction``) and the settings it runs with (``chosen``).

``latentstitch reproduce NAME`` calls ``registry.load(NAME).run(quick=..., out_dir=..., progress=...)``, adding
``resume=`` for the reproductions in ``registry.RESUMABLE`` and ``device=`` for those in ``registry.ON_DEVICE``
(tests/test_reproductions.py checks every registered reproduction's ``run`` against this signature).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from latentstitch.experiments._report import Report

Settings = TypeVar("Settings")


class Reproduction(Protocol):
    """A reproduction's package: ``HELP`` (one line for ``reproduce --list``), ``PAPER`` (the citation) and ``run``.

    ``run`` takes keyword arguments only: ``quick`` (the small setting, judging only the headline patterns),
    ``out_dir`` (where results.json, results.md and the figures go), ``progress`` (progress bars) and ``config``
    (every setting; None: ``chosen(quick, None, QUICK, FULL)``); a reproduction in ``registry.RESUMABLE`` also takes
    ``resume: bool = False`` (go on from OUT/checkpoint), one in ``registry.ON_DEVICE`` also ``device: str = "cpu"``.
    """

    HELP: str
    PAPER: str

    def run(self, *, quick: bool, out_dir: Path, progress: bool, config: Any = None) -> Report: ...


def chosen(quick: bool, config: Settings | None, quick_config: Settings, full_config: Settings) -> Settings:
    """The settings a run uses: ``config`` when given, else the reproduction's ``QUICK`` or ``FULL``."""
    if config is not None:
        return config
    return quick_config if quick else full_config
