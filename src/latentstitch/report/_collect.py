"""Finding and reading result files: what counts as a result, and its normalised shape."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The kinds of result file the report renders.
KINDS = ("reproduction", "demo", "bridge", "compare")


@dataclass
class ResultFile:
    """One result file, normalised: ``kind``, ``name`` (unique on the page), ``title``, ``tables`` (dicts with
    ``title``, ``columns``, ``rows``, ``note``, ``digits``), ``notes``, and for reproductions their ``patterns``,
    ``setting``, ``differences`` and ``figures`` (caption -> image path, resolved next to the JSON file)."""

    path: Path
    kind: str
    name: str
    title: str
    data: dict[str, Any]
    tables: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: dict[str, Path] = field(default_factory=dict)

    @property
    def quick(self) -> bool:
        return bool(self.data.get("quick", False))

    @property
    def smoke(self) -> bool:
        return bool(self.data.get("smoke", False))

    @property
    def patterns(self) -> list[dict[str, Any]]:
        """Verdicts: the declared patterns (new files) or the older ``expectations`` lines."""
        if self.data.get("patterns"):
            return list(self.data["patterns"])
        return [
            {
                "claim": e.get("description", ""),
                "paper": None,
                "measure": None,
                "ours": None,
                "rule": None,
                "holds": bool(e.get("holds")),
                "detail": e.get("detail", ""),
                "headline": False,
            }
            for e in self.data.get("expectations", [])
        ]


def find_results(root: str | Path) -> list[Path]:
    """Every JSON file under ``root`` (or ``root`` itself when it is a file) that is a result, sorted by path."""
    base = Path(root)
    if base.is_file():
        return [base] if _is_result(base) else []
    if not base.is_dir():
        raise FileNotFoundError(f"RESULTS_DIR: no such folder: {str(base)!r}")
    return sorted(path for path in base.rglob("*.json") if _is_result(path))


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _is_result(path: Path) -> bool:
    data = _read(path)
    if not isinstance(data, dict) or not isinstance(data.get("tables", []), list):
        return False
    kind = data.get("kind")
    if kind is None:
        return "tables" in data and "title" in data
    return kind in KINDS


def load_result(path: str | Path) -> ResultFile:
    """Read one result file; raises ``ValueError`` naming the file when it is not one."""
    source = Path(path)
    data = _read(source)
    if not isinstance(data, dict):
        raise ValueError(f"{source}: not a JSON object (expected a results.json or a bridge/compare output)")
    kind = data.get("kind") or ("demo" if data.get("name") == "demo" else "reproduction")
    if kind not in KINDS:
        raise ValueError(f"{source}: unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    tables = []
    for index, table in enumerate(data.get("tables", [])):
        if not isinstance(table, dict) or not isinstance(table.get("rows", []), list):
            raise ValueError(f"{source}: tables[{index}] must be an object with columns and rows")
        tables.append(
            {
                "title": str(table.get("title", "")),
                "columns": [str(c) for c in table.get("columns", [])],
                "rows": table.get("rows", []),
                "note": str(table.get("note", "") or ""),
                "digits": int(table.get("digits", 3)),
            }
        )
    figures = {}
    for caption, figure in (data.get("figures") or {}).items():
        # New files store the file name; older ones a path relative to where the run started: the image is always
        # next to the JSON file.
        figures[str(caption)] = source.parent / Path(str(figure)).name
    fallback = source.parent.name if kind in ("reproduction", "demo") else source.stem
    name = str(data.get("name") or fallback or source.stem)
    return ResultFile(
        path=source,
        kind=kind,
        name=name,
        title=str(data.get("title") or name),
        data=data,
        tables=tables,
        notes=[str(n) for n in data.get("notes", [])],
        figures=figures,
    )
