"""Users' embedding files: every format reads back what was written (whole and chunk by chunk), rows pair by order
or by ids, and every bad input is one error naming the file and the option."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import numpy as np
import pytest
import torch

from latentstitch.embeddings import (
    EmbeddingFileError,
    EmbeddingWriter,
    open_embeddings,
    pair_rows,
    read_embeddings,
    write_embeddings,
)

SUFFIXES = [".npy", ".npz", ".safetensors", ".pt", ".parquet", ".csv", ".tsv"]


@pytest.fixture
def vectors(rng):
    return rng.normal(size=(23, 5)).astype(np.float32)


def _needs_pyarrow(suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow", reason="needs pip install 'latentstitch[files]'")


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_every_format_reads_back_what_was_written_whole_and_in_chunks(tmp_path, vectors, suffix):
    _needs_pyarrow(suffix)
    ids = np.array([f"item-{i}" for i in range(23)]) if suffix not in (".npy", ".safetensors") else None
    path = write_embeddings(tmp_path / f"e{suffix}", vectors, ids=ids)
    id_column = None if ids is None else "id"
    opened = open_embeddings(path, id_column=id_column)
    assert (opened.n_rows, opened.n_features) == (23, 5)
    np.testing.assert_array_equal(opened.read(), vectors)
    chunks = list(opened.chunks(rows=7))
    assert [start for start, _ in chunks] == [0, 7, 14, 21]
    np.testing.assert_array_equal(np.concatenate([block for _, block in chunks]), vectors)
    if ids is not None:
        assert opened.ids.astype(str).tolist() == ids.tolist()


def test_integer_ids_survive_safetensors_and_npy_is_memory_mapped(tmp_path, vectors):
    path = write_embeddings(tmp_path / "e.safetensors", vectors, ids=np.arange(100, 123))
    assert open_embeddings(path, id_column="id").ids.tolist() == list(range(100, 123))
    np.save(tmp_path / "big.npy", vectors)
    assert isinstance(open_embeddings(tmp_path / "big.npy").array, np.memmap)


def test_keys_pick_one_array_and_the_default_is_explained(tmp_path, vectors):
    np.savez(tmp_path / "two.npz", vectors=vectors, labels=np.arange(23))
    np.testing.assert_array_equal(read_embeddings(tmp_path / "two.npz").vectors, vectors)  # 'vectors' is a known name
    np.savez(tmp_path / "odd.npz", a=vectors, b=vectors * 2)
    np.testing.assert_array_equal(read_embeddings(tmp_path / "odd.npz", key="b").vectors, vectors * 2)
    with pytest.raises(EmbeddingFileError, match=r"holds 2 arrays \(a, b\); say which holds the vectors with key="):
        open_embeddings(tmp_path / "odd.npz")
    with pytest.raises(EmbeddingFileError, match=r"has no array 'c' \(given by key=\); its arrays are: a, b"):
        open_embeddings(tmp_path / "odd.npz", key="c", option="SOURCE")
    with pytest.raises(EmbeddingFileError, match="holds int64 values in array 'labels', not floating-point vectors"):
        open_embeddings(tmp_path / "two.npz", key="labels")


def test_torch_files_are_read_with_weights_only(tmp_path, vectors):
    torch.save(torch.from_numpy(vectors).to(torch.bfloat16), tmp_path / "one.pt")
    np.testing.assert_allclose(read_embeddings(tmp_path / "one.pt").vectors, vectors, rtol=1e-2)

    # a pickled object of an arbitrary class: torch.load(weights_only=True) must refuse to rebuild it
    torch.save({"embeddings": torch.from_numpy(vectors), "extra": Fraction(1, 3)}, tmp_path / "code.pt")
    with pytest.raises(EmbeddingFileError, match="torch.load\\(weights_only=True\\) refuses"):
        open_embeddings(tmp_path / "code.pt", option="NEW")
    torch.save({"embeddings": [1.0, 2.0]}, tmp_path / "list.pt")
    with pytest.raises(EmbeddingFileError, match="entry 'embeddings' is a list, not a tensor"):
        open_embeddings(tmp_path / "list.pt")


def test_tables_read_a_list_column_or_numbered_columns(tmp_path, vectors):
    pa = pytest.importorskip("pyarrow", reason="needs pip install 'latentstitch[files]'")
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "text": [f"t{i}" for i in range(23)],
            "vec": pa.array(vectors.tolist(), type=pa.list_(pa.float32())),
            "key": np.arange(23),
        }
    )
    pq.write_table(table, tmp_path / "lists.parquet", row_group_size=5)
    opened = open_embeddings(tmp_path / "lists.parquet", id_column="key")
    np.testing.assert_array_equal(opened.read(), vectors)
    assert [start for start, _ in opened.chunks(rows=10)] == [0, 10, 20]
    numbered = {f"dim_{j}": vectors[:, j] for j in (3, 0, 4, 1, 2)}  # any column order: sorted by number
    pq.write_table(pa.table({"name": list("abcdefghijklmnopqrstuvw"), **numbered}), tmp_path / "numbered.parquet")
    np.testing.assert_array_equal(read_embeddings(tmp_path / "numbered.parquet").vectors, vectors)
    rows = ["id,vector"] + [f'{i},"[{", ".join(map(repr, v.tolist()))}]"' for i, v in enumerate(vectors)]
    (tmp_path / "lists.csv").write_text("\n".join(rows) + "\n")
    found = read_embeddings(tmp_path / "lists.csv", id_column="id")
    np.testing.assert_array_equal(found.vectors, vectors)
    assert found.ids.tolist() == [str(i) for i in range(23)]


def _save_to_disk(folder, table):
    """A Hugging Face ``Dataset.save_to_disk`` folder as the datasets library writes it: Arrow stream + state.json."""
    import pyarrow as pa

    folder.mkdir(parents=True)
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    (folder / "dataset_info.json").write_text(json.dumps({"features": {}}))


def test_hugging_face_save_to_disk_folders(tmp_path, vectors):
    pa = pytest.importorskip("pyarrow", reason="needs pip install 'latentstitch[files]'")
    table = pa.table(
        {"id": [f"x{i}" for i in range(23)], "embedding": pa.array(vectors.tolist(), pa.list_(pa.float32()))}
    )
    _save_to_disk(tmp_path / "single", table)
    found = read_embeddings(tmp_path / "single", id_column="id")
    np.testing.assert_array_equal(found.vectors, vectors)
    _save_to_disk(tmp_path / "splits" / "train", table)
    _save_to_disk(tmp_path / "splits" / "test", table.slice(0, 4))
    (tmp_path / "splits" / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    assert read_embeddings(tmp_path / "splits", key="test").vectors.shape == (4, 5)
    with pytest.raises(EmbeddingFileError, match="holds the splits train, test; say which with key="):
        open_embeddings(tmp_path / "splits")
    (tmp_path / "plain").mkdir()
    with pytest.raises(EmbeddingFileError, match="is a folder but not a Hugging Face save_to_disk folder"):
        open_embeddings(tmp_path / "plain")


def test_rows_pair_by_order_or_by_ids(tmp_path, vectors, rng):
    order = rng.permutation(23)
    ids = np.array([f"w{i}" for i in range(23)])
    write_embeddings(tmp_path / "a.npz", vectors, ids=ids)
    write_embeddings(tmp_path / "b.npz", 2 * vectors[order], ids=ids[order])
    a = read_embeddings(tmp_path / "a.npz", id_column="id")
    b = read_embeddings(tmp_path / "b.npz", id_column="id")
    first, second, paired_ids = pair_rows(a, b, by_ids=True)
    np.testing.assert_array_equal(second, 2 * first)
    assert paired_ids.tolist() == ids.tolist()
    write_embeddings(tmp_path / "c.npz", vectors[1:], ids=ids[1:])
    with pytest.raises(
        EmbeddingFileError, match=r"the ids do not match: 1 ids of a.npz are not in c.npz \(e.g. 'w0'\)"
    ):
        pair_rows(a, read_embeddings(tmp_path / "c.npz", id_column="id"), by_ids=True)
    with pytest.raises(EmbeddingFileError, match="rows are paired by order"):
        pair_rows(a, read_embeddings(tmp_path / "c.npz"), names=("SOURCE", "TARGET"))
    repeated = ids.copy()
    repeated[5] = repeated[6]
    write_embeddings(tmp_path / "d.npz", vectors, ids=repeated)
    with pytest.raises(EmbeddingFileError, match=r"d.npz has 1 repeated ids \(e.g. 'w6'\)"):
        pair_rows(a, read_embeddings(tmp_path / "d.npz", id_column="id"), by_ids=True)


@pytest.mark.parametrize(
    ("write", "match"),
    [
        (lambda p: None, "no such file"),
        (lambda p: p.write_bytes(b""), "is empty"),
        (lambda p: p.write_bytes(b"not numpy at all, just text"), "is not a readable .npy file"),
        (lambda p: np.save(p, np.arange(6.0)), r"holds an array of shape \(6,\); expected \(rows, features\)"),
        (lambda p: np.save(p, np.array([{"a": 1}], dtype=object)), "cannot be read without pickle"),
        (lambda p: np.save(p, np.zeros((3, 0), np.float32)), r"holds an array of shape \(3, 0\): no vectors"),
    ],
)
def test_bad_npy_files_are_one_error_naming_file_and_option(tmp_path, write, match):
    path = tmp_path / "bad.npy"
    write(path)
    with pytest.raises(EmbeddingFileError, match=rf"^SOURCE: '.*bad.npy' {match}|^SOURCE: no such file"):
        open_embeddings(path, option="SOURCE").read()
    if "no such" in match:
        with pytest.raises(EmbeddingFileError, match="SOURCE: no such file"):
            open_embeddings(path, option="SOURCE")


def test_nan_rows_ragged_rows_and_bad_numbers_are_named(tmp_path, vectors):
    bad = vectors.copy()
    bad[17, 2] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    with pytest.raises(EmbeddingFileError, match=r"nan.npy' holds NaN or inf in row 17"):
        open_embeddings(tmp_path / "nan.npy", option="TARGET").read()
    (tmp_path / "ragged.csv").write_text("id,dim_0,dim_1\n1,0.5,0.25\n2,0.5\n")
    with pytest.raises(
        EmbeddingFileError, match=r"has ragged rows: row 1 \(line 3\) has 2 fields but the header has 3"
    ):
        open_embeddings(tmp_path / "ragged.csv")
    (tmp_path / "word.csv").write_text("dim_0,dim_1\n0.5,0.25\n0.5,abc\n")
    with pytest.raises(EmbeddingFileError, match=r"row 1 \(line 3\), column 'dim_1': 'abc' is not a number"):
        open_embeddings(tmp_path / "word.csv")
    (tmp_path / "lists.csv").write_text('v\n"[1, 2, 3]"\n"[1, 2]"\n')
    with pytest.raises(
        EmbeddingFileError, match=r"has ragged vectors: row 1 \(line 3\) has 2 values where row 0 has 3"
    ):
        open_embeddings(tmp_path / "lists.csv")
    (tmp_path / "x.txt").write_text("1 2 3")
    with pytest.raises(EmbeddingFileError, match="has the unknown suffix '.txt'"):
        open_embeddings(tmp_path / "x.txt")


def test_ragged_and_missing_parquet_vectors_are_named(tmp_path):
    pa = pytest.importorskip("pyarrow", reason="needs pip install 'latentstitch[files]'")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"v": [[1.0, 2.0], [3.0, 4.0], [5.0]]}), tmp_path / "ragged.parquet")
    with pytest.raises(EmbeddingFileError, match="has ragged vectors: row 2 has 1 values where row 0 has 2"):
        open_embeddings(tmp_path / "ragged.parquet").read()
    pq.write_table(pa.table({"v": [[1.0, 2.0], None]}), tmp_path / "null.parquet")
    with pytest.raises(EmbeddingFileError, match=r"has no vector in row 1 \(column 'v' is null there\)"):
        open_embeddings(tmp_path / "null.parquet").read()
    pq.write_table(pa.table({"a": [[1.0]], "b": [[2.0]]}), tmp_path / "two.parquet")
    with pytest.raises(EmbeddingFileError, match=r"has several list columns \(a, b\); say which .* vector_column="):
        open_embeddings(tmp_path / "two.parquet")
    with pytest.raises(EmbeddingFileError, match="has no column 'c' \\(given by vector_column=\\)"):
        open_embeddings(tmp_path / "two.parquet", vector_column="c")
    with pytest.raises(EmbeddingFileError, match="has no column 'id' \\(given by id_column=\\)"):
        open_embeddings(tmp_path / "two.parquet", vector_column="a", id_column="id")


def test_the_writer_streams_and_checks_its_rows(tmp_path, vectors):
    with EmbeddingWriter(tmp_path / "out.npy", 23, 5) as writer:
        writer.write(vectors[:10])
        writer.write(vectors[10:])
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), vectors)
    writer = EmbeddingWriter(tmp_path / "short.npy", 23, 5)
    writer.write(vectors[:3])
    with pytest.raises(ValueError, match="wrote 3 of 23 rows"):
        writer.close()
    with pytest.raises(EmbeddingFileError, match="--output: cannot write '.txt'"):
        EmbeddingWriter(tmp_path / "out.txt", 1, 1, option="--output")


def test_parquet_reading_gives_torch_a_writable_array(tmp_path):
    """torch warns "The given NumPy array is not writable" on a read-only array; the reader never hands one out."""
    import warnings

    import numpy as np
    import torch

    from latentstitch.embeddings import open_embeddings, write_embeddings

    pytest.importorskip("pyarrow")
    path = write_embeddings(tmp_path / "e.parquet", np.ones((5, 3), dtype=np.float32))
    for _, block in open_embeddings(path).chunks():
        assert block.flags.writeable
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.from_numpy(block)


def test_csv_vectors_are_float32_unless_a_value_needs_float64(tmp_path, monkeypatch):
    """CSV holds text, not a dtype: float32, unless float32 would overflow or flush a value to zero."""
    pytest.importorskip("pyarrow", reason="needs pip install 'latentstitch[files]'")
    from latentstitch.embeddings._csv import CsvFile

    monkeypatch.setattr(CsvFile, "_read_with_csv_module", None)  # pyarrow reads these files: no fallback
    (tmp_path / "plain.csv").write_text("dim_0,dim_1\n0.1,2\n3e5,-4.5\n")
    plain = open_embeddings(tmp_path / "plain.csv")
    assert plain.dtype == np.float32 and plain.read().dtype == np.float32
    np.testing.assert_array_equal(plain.read(), np.array([[0.1, 2], [3e5, -4.5]], dtype=np.float32))
    (tmp_path / "big.csv").write_text("dim_0,dim_1\n1e300,2\n3,4\n")
    assert open_embeddings(tmp_path / "big.csv").read()[0, 0] == 1e300
    (tmp_path / "tiny.csv").write_text('v\n"[1e-60, 1]"\n"[2, 3]"\n')
    assert open_embeddings(tmp_path / "tiny.csv").dtype == np.float64


@pytest.mark.parametrize(
    "text",
    [
        'id,v\na,"[1, 2.5, 3]"\nb,"[ 4,5 ,6 ]"\n\nc,"7;8;9"\n',  # brackets, blanks, semicolons, a blank line
        "id,v\na,1 2 3\nb,4\t5 6\nc,[[7 8 9]]\n",
        "id,dim_1,dim_0\na,2,1\nb,5,4\nc, 8,7\n",  # numbered columns in any order, a blank before a number
        "id,dim_0,dim_1\na,1_0,1\nb,2,2\nc,nan,3\n",  # what Python's float reads and pyarrow does not (1_0)
        'id,v\na,"[1, 2]"\nb,"[1, 2, 3]"\n',  # ragged
        "id,dim_0,dim_1\na,1,x\nb,2,2\n",  # not a number
        "id,dim_0\na,1\nb\n",  # ragged rows
        "id,dim_0\n",  # no rows
    ],
)
def test_csv_reads_as_the_csv_module_would(tmp_path, text):
    """pyarrow reads CSV files fast; the csv module's reading (the fallback) gives the same vectors and errors."""
    pytest.importorskip("pyarrow", reason="needs pip install 'latentstitch[files]'")
    from latentstitch.embeddings._csv import CsvFile

    path = tmp_path / "e.csv"
    path.write_text(text)

    def read(fast: bool):
        original = CsvFile._read_arrow
        try:
            if not fast:
                CsvFile._read_arrow = lambda *args: None
            opened = open_embeddings(path, id_column="id", option="A")
            return opened.read(), opened.ids.tolist(), opened.dtype
        except EmbeddingFileError as error:
            return str(error)
        finally:
            CsvFile._read_arrow = original

    fast, slow = read(True), read(False)
    if isinstance(slow, str):
        assert fast == slow
    else:
        np.testing.assert_array_equal(fast[0], slow[0])
        assert fast[1:] == slow[1:]


def test_bridge_apply_writes_float32_for_float32_files(tmp_path, rng):
    """The output dtype is the input file's stored dtype, read back through any format."""
    pa = pytest.importorskip("pyarrow", reason="needs pip install 'latentstitch[files]'")
    import pyarrow.parquet as pq

    from latentstitch.cli import main

    source = rng.normal(size=(60, 6)).astype(np.float32)
    target = source @ rng.normal(size=(6, 5)).astype(np.float32)
    np.save(tmp_path / "s.npy", source)
    np.save(tmp_path / "t.npy", target)
    bridge = str(tmp_path / "b.safetensors")
    assert main(["bridge", "fit", str(tmp_path / "s.npy"), str(tmp_path / "t.npy"), "-o", bridge, "--quiet"]) == 0
    columns = {f"dim_{j}": source[:, j] for j in range(6)}  # float32 columns
    pq.write_table(pa.table(columns), tmp_path / "new.parquet")
    pq.write_table(pa.table({"v": pa.array(source.tolist(), pa.list_(pa.float32()))}), tmp_path / "lists.parquet")
    write_embeddings(tmp_path / "new.csv", source.astype(np.float64))  # CSV text of float64 values
    for name in ("new.parquet", "lists.parquet", "new.csv"):
        out = tmp_path / f"out-{name}.npy"
        assert main(["bridge", "apply", bridge, str(tmp_path / name), "-o", str(out), "--quiet"]) == 0
        assert np.load(out).dtype == np.float32, name


# --- damaged .npy files and ids with nowhere to go (issue 27) -------------------------------------------------------


def _npy_with_header(path, shape, data: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, {"descr": "<f4", "fortran_order": False, "shape": shape})
        handle.write(data.astype("<f4").tobytes())


def test_a_truncated_npy_says_it_is_truncated(tmp_path):
    rows = np.random.default_rng(0).normal(size=(30, 8))
    _npy_with_header(tmp_path / "cut.npy", (60, 8), rows)  # the header promises 60 rows; 30 were written
    with pytest.raises(EmbeddingFileError, match=r"'.*cut\.npy' is truncated: .*shape \(60, 8\).* only 30 of the 60"):
        open_embeddings(tmp_path / "cut.npy")


def test_an_impossible_npy_shape_is_said_as_such(tmp_path):
    _npy_with_header(tmp_path / "huge.npy", (10**12, 8), np.zeros((60, 8)))
    with pytest.raises(EmbeddingFileError, match=r"claims shape \(1000000000000, 8\).*impossible.*header is damaged"):
        open_embeddings(tmp_path / "huge.npy")


def test_an_object_npy_still_asks_for_floats(tmp_path):
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(EmbeddingFileError, match=r"cannot be read without pickle: it holds Python objects"):
        open_embeddings(tmp_path / "objects.npy")


@pytest.mark.parametrize(
    "suffix, ids, message",
    [
        (".npy", np.arange(4), r"a \.npy file holds one array and no ids"),
        (".safetensors", np.array(["a", "b", "c", "d"]), r"a \.safetensors file holds numeric tensors only"),
    ],
)
def test_ids_are_never_dropped_in_silence(tmp_path, suffix, ids, message):
    target = tmp_path / f"out{suffix}"
    with pytest.raises(EmbeddingFileError, match=rf"^path: {message}.*leave out ids="):
        write_embeddings(target, np.ones((4, 3), dtype=np.float32), ids=ids)
    assert not target.exists()


def test_integer_ids_still_go_into_safetensors(tmp_path):
    write_embeddings(tmp_path / "out.safetensors", np.ones((4, 3), dtype=np.float32), ids=np.arange(4))
    assert list(open_embeddings(tmp_path / "out.safetensors", id_column="id").ids) == [0, 1, 2, 3]


def _wrong_calls(tmp_path, vectors):
    """Calls of the library that each fail on one argument, with the Python name the error must use."""
    np.savez(tmp_path / "two.npz", a=vectors, b=vectors)
    np.save(tmp_path / "one.npy", vectors)
    write_embeddings(tmp_path / "table.csv", vectors)
    yield "key=", lambda: open_embeddings(tmp_path / "two.npz")
    yield "key=", lambda: open_embeddings(tmp_path / "two.npz", key="c")
    yield "id_column=", lambda: open_embeddings(tmp_path / "two.npz", key="a", id_column="c")
    yield "key=", lambda: open_embeddings(tmp_path / "one.npy", key="a")
    yield "vector_column=", lambda: open_embeddings(tmp_path / "one.npy", vector_column="v")
    yield "vector_column=", lambda: open_embeddings(tmp_path / "table.csv", key="a")
    yield "id_column=", lambda: open_embeddings(tmp_path / "table.csv", id_column="nope")
    yield "ids=", lambda: write_embeddings(tmp_path / "out.npy", vectors, ids=np.arange(len(vectors)))
    first = read_embeddings(tmp_path / "one.npy")
    shorter = type(first)(first.vectors[:3], None, first.path)
    yield "by_ids=", lambda: pair_rows(first, shorter)


def test_library_errors_name_the_python_arguments_not_the_command_line_options(tmp_path, vectors):
    for argument, call in _wrong_calls(tmp_path, vectors):
        with pytest.raises(EmbeddingFileError) as raised:
            call()
        message = str(raised.value)
        assert argument in message and "--" not in message, message


def test_the_command_line_names_its_options_for_the_same_errors(tmp_path, vectors, capsys):
    from latentstitch.cli import main

    np.savez(tmp_path / "two.npz", a=vectors, b=vectors)
    write_embeddings(tmp_path / "table.csv", vectors)
    runs = [
        (["two.npz", "table.csv"], "A: .*two.npz' holds 2 arrays \\(a, b\\); say which holds the vectors with --key$"),
        (["two.npz", "table.csv", "--a-key", "c"], "has no array 'c' \\(given by --a-key\\); its arrays are: a, b$"),
        (["table.csv", "table.csv", "--key", "a"], "A: .* name the vector column with --vector-column, not --key$"),
        (["two.npz", "two.npz", "--key", "a", "--id-column", "c"], "has no array 'c' \\(given by --id-column\\)"),
    ]
    for files, expected in runs:
        arguments = ["compare", *(str(tmp_path / name) for name in files[:2]), *files[2:], "--quiet"]
        assert main(arguments) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("latentstitch compare: error: "), lines
        message = lines[0].removeprefix("latentstitch compare: error: ").removesuffix(" (--debug shows the traceback)")
        assert re.search(expected, message), message
        assert not re.search(r"(?<![\w-])(key|id_column|vector_column)=", message), message
