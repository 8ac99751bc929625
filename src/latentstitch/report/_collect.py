"""Finding and reading result files: what counts as a result, its normalised shape, and what a folder holds that
the page cannot show (listed at its end with the reason, never skipped in silence).

A folder is shown as one of:
- a JSON result: a reproduction's ``results.json`` (``"kind": "reproduction"``), a ``bridge``, ``compare`` or
  ``layers`` output;
- a measurement: a folder whose markdown (``results.md``, ``table.md``) reports it, with its images (the folder's
  ``results.json`` of another shape holds the numbers; it is named, not drawn);
- images only: a folder of figures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from latentstitch.experiments import registry
from latentstitch.report._html import is_image
from latentstitch.report._markdown import title_and_body

#: The kinds of result JSON file the report renders.
KINDS = ("reproduction", "demo", "bridge", "compare", "layers", "migration")
#: The kind of a folder reported by its markdown (no result JSON file).
MEASUREMENT = "measurement"
CHECKPOINT = "checkpoint"  # experiments' folder of the finished stages of an interrupted run


@dataclass
class ResultFile:
    """One result, normalised: ``kind``, ``name`` (unique on the page), ``title``, ``tables`` (dicts with
    ``title``, ``columns``, ``rows``, ``note``, ``digits``), ``notes``, ``figures`` (caption -> image path, next to
    the file), and for a measurement its ``markdown`` files."""

    path: Path
    kind: str
    name: str
    title: str
    data: dict[str, Any]
    tables: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: dict[str, Path] = field(default_factory=dict)
    markdown: list[Path] = field(default_factory=list)

    @property
    def quick(self) -> bool:
        return bool(self.data.get("quick", False))

    @property
    def settings(self) -> str | None:
        """For a reproduction: "current" when it ran with the settings its code has now, "changed" when they changed
        since (the result predates them), "not recorded" when the run kept no digest; None for other results."""
        name = self.data.get("name")
        if self.kind != "reproduction" or not isinstance(name, str) or name not in registry.REPRODUCTIONS:
            return None
        recorded = self.data.get("settings_digest")
        if not isinstance(recorded, str):
            return "not recorded"
        return "current" if recorded == registry.settings_digest(name, self.quick) else "changed"

    @property
    def smoke(self) -> bool:
        return bool(self.data.get("smoke", False))

    @property
    def seconds(self) -> float | None:
        """The run's seconds; a measurement's per-part seconds are added up."""
        seconds = self.data.get("seconds")
        if isinstance(seconds, dict):
            parts = [v for v in seconds.values() if isinstance(v, (int, float))]
            return float(sum(parts)) if parts else None
        return float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None

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
            if isinstance(e, dict)
        ]


@dataclass
class Unreadable:
    """A file or folder the page does not show, and why."""

    path: Path
    reason: str


@dataclass
class Collection:
    """What a results folder holds: the results the page shows and what it cannot show."""

    results: list[ResultFile] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)

    def files(self) -> dict[str, Path]:
        """Every file the page reads (result files, markdown, figures), keyed ``RESULTS_DIR (path)``: the inputs an
        output may not overwrite."""
        read = [path for result in self.results for path in (result.path, *result.markdown, *result.figures.values())]
        return {f"RESULTS_DIR ({path})": path for path in read if path.is_file()}


def _read(path: Path) -> tuple[Any, str]:
    """The JSON in ``path`` and "" or None and why it could not be read."""
    try:
        return json.loads(path.read_text(encoding="utf-8")), ""
    except (OSError, UnicodeDecodeError) as error:
        return None, f"cannot be read: {error}"
    except ValueError as error:
        return None, f"not valid JSON: {error}"


def _json_kind(data: Any) -> str | None:
    """The kind of a result JSON object; None when it is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("tables", []), list):
        return None
    kind = data.get("kind")
    if kind is None:
        return "reproduction" if "tables" in data and "title" in data else None
    return str(kind)


def find_results(root: str | Path) -> list[Path]:
    """Every result under ``root`` (or ``root`` itself when it is a file), by path: result JSON files, and the
    markdown file (or the folder, for images only) of each measurement folder."""
    base = Path(root)
    if base.is_file():
        return [base] if _json_kind(_read(base)[0]) in KINDS or base.suffix == ".md" else []
    return [result.path for result in collect(base).results]


def collect(root: str | Path) -> Collection:
    """Read every folder under ``root``: the results, sorted by path, and what could not be shown."""
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"RESULTS_DIR: no such folder: {str(base)!r}")
    collection = Collection()
    folders = [base, *sorted(p for p in base.rglob("*") if p.is_dir() and not _hidden(p, base))]
    for folder in folders:
        if any(part == CHECKPOINT for part in folder.relative_to(base).parts[:-1]):
            continue  # reported with its checkpoint folder
        if folder.name == CHECKPOINT and (folder / "settings.json").is_file():
            collection.unreadable.append(
                Unreadable(
                    folder,
                    "the finished stages of an interrupted run: go on with `latentstitch reproduce "
                    "NAME --resume --out FOLDER`, then the run writes its results.json",
                )
            )
            continue
        _collect_folder(folder, collection)
    collection.results.sort(key=lambda r: str(r.path))
    return collection


def _hidden(path: Path, base: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(base).parts)


def _collect_folder(folder: Path, collection: Collection) -> None:
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if not any(folder.iterdir()):
        collection.unreadable.append(Unreadable(folder, "an empty folder"))
    used: set[str] = set()
    other_json: list[Path] = []
    owned = False  # a reproduction's folder: its figures and results.md belong to it
    for path in (p for p in files if p.suffix.lower() == ".json"):
        data, why = _read(path)
        kind = _json_kind(data)
        if data is None:
            collection.unreadable.append(Unreadable(path, why))
        elif kind is None:
            other_json.append(path)
        elif kind not in KINDS:
            collection.unreadable.append(Unreadable(path, f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}"))
        else:
            try:
                result = load_result(path)
            except ValueError as error:
                collection.unreadable.append(Unreadable(path, str(error).removeprefix(f"{path}: ")))
                continue
            collection.results.append(result)
            used.add(path.name)
            used.update(p.name for p in result.figures.values())
            used.update(_named_files(result.data))
            if result.kind in ("reproduction", "demo"):
                owned = True
                used.update({"results.md"})
    markdown = [p for p in files if p.suffix.lower() == ".md" and p.name not in used]
    images = [p for p in files if is_image(p) and p.name not in used]
    if not owned and (markdown or images):
        result = load_result(markdown[0] if markdown else folder)
        collection.results.append(result)
        used.update(p.name for p in (*result.markdown, *result.figures.values()))
        used.update(p.name for p in other_json if markdown)  # the numbers the markdown reports
    for path in other_json:
        if path.name not in used:
            collection.unreadable.append(
                Unreadable(
                    path,
                    'not a result: a JSON file without "kind" or "title" and "tables", and no results.md beside it',
                )
            )
    rest = [p.name for p in files if p.name not in used and p.suffix.lower() not in (".json",)]
    if rest:
        shown = ", ".join(rest[:8]) + (f" and {len(rest) - 8} more" if len(rest) > 8 else "")
        collection.unreadable.append(Unreadable(folder, f"{len(rest)} file(s) that are not results: {shown}"))


def _named_files(data: dict[str, Any]) -> set[str]:
    """The files a bridge / compare output names (its inputs, the saved bridge): not results, but accounted for."""
    names = [data.get(key) for key in ("source", "target", "bridge_file", "a", "b", "index", "migration", "sample")]
    names += list(data.get("models") or []) if data.get("kind") == "layers" else []
    names += [str(line).split(":")[0] for line in data.get("files", []) or []]
    return {Path(str(name)).name for name in names if name}


def load_result(path: str | Path) -> ResultFile:
    """Read one result: a result JSON file, a measurement's markdown file or a folder of images; raises
    ``ValueError`` naming the file when it is none of them."""
    source = Path(path)
    if source.is_dir() or source.suffix.lower() == ".md":
        return _load_measurement(source)
    data, why = _read(source)
    if not isinstance(data, dict):
        raise ValueError(f"{source}: {why or 'not a JSON object'} (expected a results.json or a bridge/compare output)")
    kind = data.get("kind") or ("demo" if data.get("name") == "demo" else "reproduction")
    if kind not in KINDS:
        raise ValueError(f"{source}: unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    tables = data.get("tables") or []
    if not isinstance(tables, list):
        raise ValueError(f"{source}: tables must be a list of tables, got {type(tables).__name__}")
    tables = [_table(source, index, table) for index, table in enumerate(tables)]
    for field_name in ("files", "differences"):  # lists of lines the sections show as bullets
        if field_name in data:
            data[field_name] = lines(data[field_name], field_name, source)
    figures = {}
    for caption, figure in _figures(data.get("figures"), source).items():
        # New files store the file name; older ones a path relative to where the run started: the image is always
        # next to the JSON file.
        figures[str(caption)] = source.parent / Path(str(figure)).name
    if kind in ("reproduction", "demo"):  # the folder's other images too, under their file names
        captioned = {p.name for p in figures.values()}
        for image in sorted(p for p in source.parent.iterdir() if is_image(p) and p.name not in captioned):
            figures[image.name] = image
    fallback = source.parent.name if kind in ("reproduction", "demo") else source.stem
    name = str(data.get("name") or fallback or source.stem)
    notes = lines(data.get("notes"), "notes", source)
    return ResultFile(
        path=source,
        kind=kind,
        name=name,
        title=str(data.get("title") or name),
        data=data,
        tables=tables,
        notes=notes,
        figures=figures,
    )


def lines(value: Any, name: str, source: Path) -> list[str]:
    """A field holding lines of text: a list (each item one line), or one string (one line, never split into its
    characters); nothing is no lines; anything else an error naming the file and the field."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(item) for item in value]
    raise ValueError(f"{source}: {name} must be a list of strings (or one string), got {type(value).__name__}")


def _figures(value: Any, source: Path) -> dict[str, str]:
    """``figures``: caption -> image file, or a list of image files (each captioned by its file name)."""
    if value is None:
        return {}
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return {Path(item).name: item for item in value}
    if isinstance(value, dict) and all(isinstance(item, str) for item in value.values()):
        return value
    raise ValueError(
        f"{source}: figures must map captions to image file names (or list image file names), got {value!r:.80}"
    )


def _table(source: Path, index: int, table: Any) -> dict[str, Any]:
    if not isinstance(table, dict) or not isinstance(table.get("rows", []), list):
        raise ValueError(f"{source}: tables[{index}] must be an object with columns and rows")
    digits = table.get("digits", 3)
    if isinstance(digits, bool) or not isinstance(digits, int) or not 0 <= digits <= 15:
        raise ValueError(f"{source}: tables[{index}].digits must be a whole number from 0 to 15, got {digits!r}")
    if not isinstance(table.get("columns", []), list):
        raise ValueError(f"{source}: tables[{index}].columns must be a list of column names")
    return {
        "title": str(table.get("title", "")),
        "columns": [str(c) for c in table.get("columns", [])],
        "rows": table.get("rows", []),
        "note": str(table.get("note", "") or ""),
        "digits": digits,
    }


def _load_measurement(source: Path) -> ResultFile:
    """A folder reported by its markdown files (``results.md`` first) and images; ``results.json`` beside them, of
    any shape, gives the run's seconds."""
    folder = source if source.is_dir() else source.parent
    if not folder.is_dir():
        raise ValueError(f"{source}: no such file or folder")
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    markdown = sorted((p for p in files if p.suffix.lower() == ".md"), key=lambda p: (p.name != "results.md", p.name))
    images = {p.name: p for p in files if is_image(p)}
    if not markdown and not images:
        raise ValueError(f"{source}: no markdown file and no image to show")
    title = None
    if markdown:
        title, _ = title_and_body(markdown[0].read_text(encoding="utf-8", errors="replace"))
    data, _ = _read(folder / "results.json")
    return ResultFile(
        path=markdown[0] if markdown else folder,
        kind=MEASUREMENT,
        name=folder.name,
        title=title or (f"{folder.name}" if markdown else f"Images in {folder.name}"),
        data=data if isinstance(data, dict) else {},
        figures=images,
        markdown=markdown,
    )
