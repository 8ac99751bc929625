"""The finished stages of a long reproduction, kept on disk so that an interrupted run goes on where it stopped
(``latentstitch reproduce NAME --resume``) instead of starting hours of training again.

A checkpoint is a folder (``OUT/checkpoint``) holding ``settings.json`` (the run's settings: a checkpoint of other
settings is refused, never mixed in) and one file per finished stage: numbers as JSON, tensors (trained networks,
stitching layers) as safetensors; nothing is pickled. Every stage is seeded, so a resumed run gives the numbers an
uninterrupted one gives. A stage's numbers pass through JSON in both cases, so the code after it sees the same
values either way. The folder is removed when the run has written its results.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from latentstitch._core.atomic import atomic_path, write_text
from latentstitch._core.persist import read_json, read_safetensors
from latentstitch.experiments._report import jsonable

FOLDER = "checkpoint"
_SETTINGS = "settings.json"
_ELAPSED = "elapsed.json"  # seconds spent on the finished stages by earlier, interrupted runs


class Checkpoint:
    """Stages of one run in ``folder`` (``None``: nothing kept, every stage computed).

    ``resume=False`` starts over (an earlier checkpoint in ``folder`` is removed, and ``log`` says so);
    ``resume=True`` reuses the stages a run of the same ``settings`` finished there.
    """

    def __init__(
        self, folder: Path | None, settings: dict[str, Any], *, resume: bool, log: Callable[[str], None] = print
    ):
        self.folder = None if folder is None else Path(folder)
        self.log = log
        self.resumed: list[str] = []
        self._tensors: dict[str, dict[str, torch.Tensor]] = {}
        self._started = time.perf_counter()
        self._before = 0.0
        if self.folder is None:
            return
        wanted = _plain(settings)
        marker = self.folder / _SETTINGS
        if resume and marker.is_file():
            saved = read_json(marker, "resume")
            if saved != wanted:
                changed = sorted(k for k in set(saved) | set(wanted) if saved.get(k) != wanted.get(k))
                raise ValueError(
                    f"resume: the checkpoint in {str(self.folder)!r} was made with other settings "
                    f"({', '.join(changed)} differ); start over without resume="
                )
            stages = [  # a hidden file is the temporary file of a write that was cut off
                p
                for p in self.folder.iterdir()
                if p.name not in (_SETTINGS, _ELAPSED) and p.suffix in _SUFFIXES and not p.name.startswith(".")
            ]
            if (self.folder / _ELAPSED).is_file():
                before = read_json(self.folder / _ELAPSED, "resume")
                if not isinstance(before, (int, float)) or not before >= 0:
                    raise ValueError(f"resume: {str(self.folder / _ELAPSED)!r} holds no number of seconds")
                self._before = float(before)
            log(f"resuming from {self.folder}: {len(stages)} finished stage(s), {self._before:.0f} s of work")
            return
        if resume:
            log(f"--resume: no checkpoint in {self.folder}; starting from the beginning")
        elif self.folder.exists():
            log(f"starting over: the checkpoint of an earlier run in {self.folder} is removed (--resume continues it)")
        if self.folder.exists():
            shutil.rmtree(self.folder)
        self.folder.mkdir(parents=True)
        _write_text(marker, json.dumps(wanted, indent=1))

    def _numbers_path(self, name: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{name}.json"

    def has(self, name: str) -> bool:
        """Whether stage ``name``'s numbers are in the checkpoint already."""
        path = self._numbers_path(name)
        return path is not None and path.is_file()

    def numbers(self, name: str, compute: Callable[[], Any]) -> Any:
        """The JSON value of stage ``name``: from the checkpoint, or ``compute()`` and kept."""
        path = self._numbers_path(name)
        if self.has(name):
            self.resumed.append(name)
            self.log(f"{name}: from the checkpoint")
            return read_json(path, "resume")
        text = json.dumps(compute(), default=jsonable, allow_nan=True)
        if path is not None:
            _write_text(path, text)
            self._kept()
        return json.loads(text)

    def tensors(self, name: str, compute: Callable[[], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """The tensors of stage ``name`` (CPU copies): from this run or the checkpoint, or ``compute()`` and kept."""
        if name not in self._tensors:
            path = None if self.folder is None else self.folder / f"{name}.safetensors"
            if path is not None and path.is_file():
                self.resumed.append(name)
                self._tensors[name] = read_safetensors(path, "resume")[1]
            else:
                tensors = {key: value.detach().cpu().contiguous().clone() for key, value in compute().items()}
                if path is not None:
                    from safetensors.torch import save_file

                    with atomic_path(path, option="resume") as temporary:
                        save_file(tensors, str(temporary))
                    self._kept()
                self._tensors[name] = tensors
        return self._tensors[name]

    def kept_tensors(self, name: str) -> dict[str, torch.Tensor]:
        """The tensors a finished stage kept alongside its numbers (an error naming ``resume`` if they are gone)."""

        def missing() -> dict[str, torch.Tensor]:
            raise ValueError(
                f"resume: the checkpoint in {str(self.folder)!r} lacks {name}, which a finished stage kept; "
                "start over without resume="
            )

        return self.tensors(name, missing)

    def seconds(self) -> float:
        """Wall-clock seconds of the whole run: this one's, plus the finished stages' of the runs it resumes."""
        return self._before + time.perf_counter() - self._started

    def _kept(self) -> None:
        _write_text(self.folder / _ELAPSED, json.dumps(round(self.seconds(), 3)))

    def finish(self) -> None:
        """Remove the checkpoint (the run's results are written)."""
        if self.folder is not None and self.folder.exists():
            shutil.rmtree(self.folder)


_SUFFIXES = (".json", ".safetensors")


def _plain(settings: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(settings, default=jsonable, sort_keys=True))


def _write_text(path: Path, text: str) -> None:
    """An interrupted write leaves no half-written stage (``_core.atomic``)."""
    write_text(path, text + "\n", option="resume")


def run_settings(reproduction: str, quick: bool, config: Any, device: str = "cpu") -> dict[str, Any]:
    """The settings a resumed run must share with the interrupted one: the reproduction, quick or full, its
    ``config`` (a dataclass), the torch thread count and the device (off the CPU only, so CPU checkpoints made before
    the device was recorded stay valid): float sums in another order would change the numbers."""
    return {
        "reproduction": reproduction,
        "quick": quick,
        "threads": torch.get_num_threads(),
        **({} if device == "cpu" else {"device": device}),
        **asdict(config),
    }


def console_log(text: str) -> None:
    """A timestamped line on stderr (rich), as the runs' progress lines."""
    from rich.console import Console

    Console(stderr=True).log(text)
