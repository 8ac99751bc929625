"""Inputs are sacred: every command refuses an output that is one of its inputs (the same path, a symlink, a hard
link) or another of its outputs, in one line with exit code 2, and leaves the input byte for byte; folder formats
read only inside their folder (issue 27)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from latentstitch.cli import main
from latentstitch.embeddings import EmbeddingFileError, open_embeddings, write_embeddings

pa = pytest.importorskip("pyarrow", reason="needs pip install 'latentstitch[files]'")


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    source = rng.standard_normal((60, 6)).astype(np.float32)
    write_embeddings(tmp_path / "src.safetensors", source)
    write_embeddings(tmp_path / "tgt.npy", source @ rng.standard_normal((6, 4)).astype(np.float32))
    write_embeddings(tmp_path / "new.npy", rng.standard_normal((10, 6)).astype(np.float32))
    from latentstitch.bridge import Bridge

    Bridge(routes=["ridge"], budget=None).fit(source, np.load(tmp_path / "tgt.npy")).save(tmp_path / "b.safetensors")
    return tmp_path


def _refused(argv: list[str], option: str, kept: list[Path], capsys) -> str:
    """Run the command: exit 2, one line naming ``option``, every file in ``kept`` unchanged."""
    before = {path: path.read_bytes() for path in kept}
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and f"error: {option}: " in error, error
    for path, content in before.items():
        assert path.read_bytes() == content, f"{path} was changed"
    return error


def test_compare_json_equal_to_an_input_is_refused(files, capsys):
    a, b = files / "src.safetensors", files / "tgt.npy"
    (files / "link.npy").symlink_to(b)
    os.link(a, files / "hard.safetensors")
    for output in (a, b, files / "link.npy", files / "hard.safetensors", files / "." / "tgt.npy"):
        error = _refused(["compare", str(a), str(b), "--json", str(output)], "--json", [a, b], capsys)
        assert "the input A" in error or "the input B" in error


def test_bridge_fit_outputs_equal_to_an_input_or_to_each_other_are_refused(files, capsys):
    source, target = files / "src.safetensors", files / "tgt.npy"
    fit = ["bridge", "fit", str(source), str(target), "--quiet", "--no-budget"]
    kept = [source, target]
    assert "input SOURCE" in _refused([*fit, "-o", str(source)], "--output", kept, capsys)
    assert "input TARGET" in _refused(
        [*fit, "-o", str(files / "b2.safetensors"), "--json", str(target)], "--json", kept, capsys
    )
    error = _refused(
        [*fit, "-o", str(files / "b.safetensors"), "--json", str(files / "b.safetensors")],
        "--json",
        [*kept, files / "b.safetensors"],
        capsys,
    )
    assert "is also --output" in error
    os.link(source, files / "hard.safetensors")
    _refused([*fit, "-o", str(files / "hard.safetensors")], "--output", kept, capsys)


def test_bridge_apply_output_equal_to_an_input_is_refused(files, capsys):
    bridge, new = files / "b.safetensors", files / "new.npy"
    apply = ["bridge", "apply", str(bridge), str(new), "--quiet", "-o"]
    assert "input BRIDGE" in _refused([*apply, str(bridge)], "--output", [bridge, new], capsys)
    assert "input NEW" in _refused([*apply, str(new)], "--output", [bridge, new], capsys)
    os.link(new, files / "hard.npy")
    (files / "link.npy").symlink_to(new)
    for output in ("hard.npy", "link.npy"):
        assert "input NEW" in _refused([*apply, str(files / output)], "--output", [bridge, new], capsys)
    assert main([*apply, str(files / "bridged.npy")]) == 0  # another path is fine


def test_no_output_is_written_into_an_input_folder(files, capsys):
    folder = files / "hf"
    folder.mkdir()
    table = pa.table({"embedding": pa.array(np.load(files / "tgt.npy").tolist(), pa.list_(pa.float32()))})
    _save_to_disk(folder, table)
    argv = ["compare", str(files / "src.safetensors"), str(folder), "--json", str(folder / "state.json")]
    _refused(argv, "--json", [folder / "state.json"], capsys)


def test_report_output_equal_to_a_result_it_reads_is_refused(files, capsys):
    results = files / "results" / "run"
    results.mkdir(parents=True)
    (results / "r.json").write_text(json.dumps({"kind": "compare", "title": "t", "tables": []}))
    os.link(results / "r.json", files / "page.html")
    _refused(
        ["report", str(files / "results"), "-o", str(files / "page.html")], "--output", [results / "r.json"], capsys
    )
    from latentstitch.report import write_report

    with pytest.raises(ValueError, match="output: .* is the same file as the input RESULTS_DIR"):
        write_report(files / "results", files / "page.html")
    assert json.loads((results / "r.json").read_text())["kind"] == "compare"


def _save_to_disk(folder: Path, table, name: str = "data-00000-of-00001.arrow", listed: str | None = None) -> None:
    """A ``Dataset.save_to_disk`` folder: Arrow stream + state.json (naming ``listed``, default the file written)."""
    folder.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(folder / name), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": listed or name}]}))
    (folder / "dataset_info.json").write_text(json.dumps({"features": {}}))


def test_a_save_to_disk_manifest_may_not_name_files_outside_its_folder(tmp_path, capsys):
    from latentstitch.data import read_hf_saved

    table = pa.table({"embedding": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32()))})
    _save_to_disk(tmp_path / "outside", table)
    _save_to_disk(tmp_path / "data", table, name="unused.arrow", listed="../outside/data-00000-of-00001.arrow")
    with pytest.raises(ValueError, match=r"state.json.*the entry '../outside/data-00000-of-00001.arrow' leads outside"):
        read_hf_saved(tmp_path / "data")
    with pytest.raises(EmbeddingFileError, match="leads outside the folder"):
        open_embeddings(tmp_path / "data")
    error = _refused_read(["compare", str(tmp_path / "data"), str(tmp_path / "data")], capsys)
    assert "leads outside the folder" in error and "../outside" in error
    (tmp_path / "splits").mkdir()
    (tmp_path / "splits" / "dataset_dict.json").write_text(json.dumps({"splits": ["../outside"]}))
    with pytest.raises(ValueError, match=r"dataset_dict.json.*the entry '../outside' leads outside"):
        read_hf_saved(tmp_path / "splits")
    (tmp_path / "splits" / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}))
    _save_to_disk(tmp_path / "splits" / "train", table)
    assert read_hf_saved(tmp_path / "splits")["train"][0]["embedding"] == [
        [1.0, 2.0],
        [3.0, 4.0],
    ]  # a split inside is read


def _refused_read(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    return error


def test_an_activation_store_index_may_not_name_chunks_outside_its_folder(tmp_path):
    import torch

    from latentstitch.stitching import ActivationStore, get_activations

    model = torch.nn.Sequential(torch.nn.Linear(3, 2))
    get_activations(model, torch.randn(8, 3), "0", store=tmp_path / "store", chunk_size=4)
    assert len(ActivationStore(tmp_path / "store")) == 8
    (tmp_path / "outside").mkdir()
    chunk = next((tmp_path / "store").glob("chunk-*.safetensors"))
    chunk.rename(tmp_path / "outside" / chunk.name)
    index = json.loads((tmp_path / "store" / "index.json").read_text())
    index["files"][0] = f"../outside/{chunk.name}"
    (tmp_path / "store" / "index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match=rf"index.json.*the entry '../outside/{chunk.name}' leads outside the folder"):
        ActivationStore(tmp_path / "store")
