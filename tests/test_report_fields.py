"""Result files with fields of an unexpected shape (issue 27): each is read as meant (a list of figures, one note
as a string) or refused in one line naming the file and the field, by the library and by ``latentstitch report``."""

from __future__ import annotations

import json

import pytest

from latentstitch.cli import main
from latentstitch.report import load_result

TABLE = {"title": "t", "columns": ["a"], "rows": [[1.0]]}


def _result(folder, **fields):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "results.json"
    path.write_text(json.dumps({"kind": "reproduction", "title": "T", "tables": [TABLE], **fields}))
    return path


def test_a_list_of_figures_is_captioned_by_file_name(tmp_path):
    result = load_result(_result(tmp_path, figures=["runs/a.png", "b.png"]))
    assert {caption: path.name for caption, path in result.figures.items()} == {"a.png": "a.png", "b.png": "b.png"}


@pytest.mark.parametrize("field", ["notes", "files", "differences"])
def test_one_string_is_one_line_not_its_characters(tmp_path, field):
    result = load_result(_result(tmp_path, **{field: "a single line"}))
    lines = result.notes if field == "notes" else result.data[field]
    assert lines == ["a single line"]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"figures": 3}, r"figures must map captions to image file names"),
        ({"figures": {"a": 3}}, r"figures must map captions"),
        ({"notes": {"a": 1}}, r"notes must be a list of strings"),
        ({"tables": [{**TABLE, "digits": "x"}]}, r"tables\[0\]\.digits must be a whole number from 0 to 15, got 'x'"),
        ({"tables": [{**TABLE, "digits": 2.5}]}, r"tables\[0\]\.digits must be a whole number"),
        ({"tables": {"t": TABLE}}, r"tables must be a list of tables"),
    ],
)
def test_a_field_of_the_wrong_shape_names_the_file_and_the_field(tmp_path, capsys, fields, message):
    path = _result(tmp_path / "run", **fields)
    with pytest.raises(ValueError, match=rf"^{path}: {message}"):
        load_result(path)
    assert main(["report", str(tmp_path / "run"), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "results.json" in err[0] and "Traceback" not in err[0], err
