"""Opening an embedding file by its format, and pairing the rows of two files (by order or by ids)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from latentstitch.embeddings._arrays import NpyFile, NpzFile, SafetensorsFile, TorchFile
from latentstitch.embeddings._base import EmbeddingFile, EmbeddingFileError, TableFile, as_path
from latentstitch.embeddings._columns import HuggingFaceFolder, ParquetFile
from latentstitch.embeddings._csv import CsvFile

READERS: dict[str, type[EmbeddingFile]] = {
    ".npy": NpyFile,
    ".npz": NpzFile,
    ".safetensors": SafetensorsFile,
    ".pt": TorchFile,
    ".pth": TorchFile,
    ".parquet": ParquetFile,
    ".csv": CsvFile,
    ".tsv": CsvFile,
}


def open_embeddings(
    path: str | os.PathLike,
    *,
    key: str | None = None,
    id_column: str | None = None,
    vector_column: str | None = None,
    option: str = "path",
) -> EmbeddingFile:
    """Open an embedding file for reading (nothing but its shape and ids is read yet).

    Formats, by suffix: ``.npy`` (memory-mapped), ``.npz`` and ``.safetensors`` (the array named ``key``; the only
    one, or one named embeddings/embedding/vectors/features/x, by default), ``.pt``/``.pth`` (a tensor, or a dict of
    tensors by ``key``; read with ``torch.load(weights_only=True)``: no pickled code), ``.parquet``, ``.csv``/``.tsv``
    (``vector_column``: a list column, by default the only one; else numbered columns ``0, 1, ...`` or ``dim_0,
    dim_1, ...``), and a Hugging Face ``save_to_disk`` folder (as parquet; ``key`` picks a split).

    ``id_column``: the column (tables) or array (``.npz``, ``.safetensors``, ``.pt``) holding one id per row, to pair
    two files by ids. ``option``: the argument or command-line option to name in errors.

    Every problem is an ``EmbeddingFileError`` (a ValueError) naming ``option``, the file and what is wrong.
    """
    source = as_path(path, option)
    if source.is_dir():
        reader: type[EmbeddingFile] = HuggingFaceFolder
    else:
        suffix = source.suffix.lower()
        if suffix not in READERS:
            raise EmbeddingFileError(
                f"{option}: {str(source)!r} has the unknown suffix {suffix or '(none)'!r}; readable: "
                f"{', '.join(READERS)} and Hugging Face save_to_disk folders"
            )
        if source.stat().st_size == 0:
            raise EmbeddingFileError(f"{option}: {str(source)!r} is empty")
        reader = READERS[suffix]
    if issubclass(reader, TableFile):
        return reader(source, option, key=key, id_key=id_column, vector_column=vector_column)
    if vector_column is not None:
        raise EmbeddingFileError(
            f"{option}: {str(source)!r} is an array file; vector_column= applies to tables (parquet, CSV, "
            "save_to_disk); use key= to pick an array"
        )
    return reader(source, option, key=key, id_key=id_column)


@dataclass(frozen=True)
class Embeddings:
    """Vectors read from a file: ``vectors`` (n, d) float array, ``ids`` (n,) or None, the ``path``."""

    vectors: np.ndarray
    ids: np.ndarray | None
    path: Path


def read_embeddings(path: str | os.PathLike, *, progress: bool = False, **options: str | None) -> Embeddings:
    """Read a whole embedding file (``open_embeddings`` options), chunk by chunk with an optional progress bar."""
    opened = open_embeddings(path, **options)
    return Embeddings(opened.read(progress=progress), opened.ids, opened.path)


def pair_rows(
    first: Embeddings, second: Embeddings, *, by_ids: bool = False, names: tuple[str, str] = ("first", "second")
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The rows of two files as parallel pairs: by order (same number of rows), or by ids (``second`` reordered to
    ``first``'s order; both must hold the same set of ids, each once). Returns ``(first_rows, second_rows, ids)``."""
    if not by_ids:
        if len(first.vectors) != len(second.vectors):
            raise EmbeddingFileError(
                f"{names[0]}, {names[1]}: {first.path.name} has {len(first.vectors)} rows but {second.path.name} has "
                f"{len(second.vectors)}; rows are paired by order, so the files must list the same items in the same "
                "order (or pair them by ids with by_ids=)"
            )
        return first.vectors, second.vectors, None
    for name, side in zip(names, (first, second), strict=True):
        if side.ids is None:
            raise EmbeddingFileError(f"{name}: {side.path.name} has no ids to pair by")
    order = match_ids(first.ids, second.ids, names, (first.path.name, second.path.name))
    return first.vectors, second.vectors[order], first.ids


def match_ids(
    first: object, second: object, names: tuple[str, str] = ("first", "second"), labels: tuple[str, str] | None = None
) -> np.ndarray:
    """The order of ``second``'s rows that lists them as ``first`` does: ``second_rows[order]`` is parallel to
    ``first_rows``. Ids are compared as strings; both sides must hold the same set of ids, each once.
    ``names``: the arguments or options to name in errors; ``labels``: how to call each side (file names)."""
    labels = labels or names
    keys = [np.asarray(ids).astype(str) for ids in (first, second)]
    for name, label, values in zip(names, labels, keys, strict=True):
        if values.ndim != 1:
            raise EmbeddingFileError(f"{name}: expected one id per row (a 1-D sequence), got shape {values.shape}")
        unique, counts = np.unique(values, return_counts=True)
        if (counts > 1).any():
            repeated = unique[counts > 1]
            examples = ", ".join(map(repr, repeated[:3].tolist()))
            raise EmbeddingFileError(
                f"{name}: {label} has {len(repeated)} repeated ids (e.g. {examples}); each item must appear once to "
                "be paired"
            )
    only_first = np.setdiff1d(keys[0], keys[1])
    only_second = np.setdiff1d(keys[1], keys[0])
    if only_first.size or only_second.size:
        first_examples = ", ".join(map(repr, only_first[:3].tolist())) or "none"
        second_examples = ", ".join(map(repr, only_second[:3].tolist())) or "none"
        raise EmbeddingFileError(
            f"{names[0]}, {names[1]}: the ids do not match: {only_first.size} ids of {labels[0]} are not in "
            f"{labels[1]} (e.g. {first_examples}) and {only_second.size} of {labels[1]} are not in {labels[0]} "
            f"(e.g. {second_examples})"
        )
    position = {value: i for i, value in enumerate(keys[1])}
    return np.fromiter((position[value] for value in keys[0]), dtype=np.int64, count=len(keys[0]))
