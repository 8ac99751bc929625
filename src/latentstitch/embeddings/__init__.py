"""Users' own embedding files: read them (by format, chunk by chunk), pair the rows of two files, write results.

- ``open_embeddings(path, key=..., id_column=..., vector_column=...)``: an ``EmbeddingFile`` (shape, ids, ``chunks()``
  for streaming, ``read()``) for ``.npy`` (memory-mapped), ``.npz``, ``.safetensors``, ``.pt`` (tensors only,
  ``weights_only=True``), ``.parquet`` (row groups), ``.csv``/``.tsv`` and Hugging Face ``save_to_disk`` folders.
- ``read_embeddings(path, ...)``: the whole file as ``Embeddings(vectors, ids, path)``.
- ``pair_rows(a, b, by_ids=...)``: parallel rows of two files, by order or matched by ids.
- ``write_embeddings(path, vectors, ids=...)`` / ``EmbeddingWriter``: the same formats (streamed where possible).

Every bad input (missing file, unknown key or column, ragged rows, NaN, mismatched ids) is one
``EmbeddingFileError`` (a ValueError) naming the file and the option that pointed at it.
"""

from latentstitch.embeddings._base import EmbeddingFile, EmbeddingFileError
from latentstitch.embeddings._open import (
    READERS,
    Embeddings,
    match_ids,
    open_embeddings,
    pair_rows,
    read_embeddings,
)
from latentstitch.embeddings._write import WRITABLE, EmbeddingWriter, write_embeddings

__all__ = [
    "READERS",
    "WRITABLE",
    "EmbeddingFile",
    "EmbeddingFileError",
    "EmbeddingWriter",
    "Embeddings",
    "match_ids",
    "open_embeddings",
    "pair_rows",
    "read_embeddings",
    "write_embeddings",
]
