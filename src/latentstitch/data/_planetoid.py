"""Planetoid raw files (Cora, CiteSeer, PubMed) users keep locally, read with the restricted unpickler. Nothing is
downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch.data._datasets import class_names
from latentstitch.data._graphs import Graph, coalesce_edges
from latentstitch.data._unpickle import (
    as_dense,
    container_classes,
    numpy_reconstructors,
    restricted_load,
    sparse_classes,
)


def load_planetoid(root: str | os.PathLike, name: str = "cora") -> Graph:
    """Cora, CiteSeer or PubMed from the Planetoid raw files (Yang et al. 2016), the standard split.

    ``root`` holds ``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}``, directly or as PyTorch Geometric keeps
    them (``root/<Name>/raw/``). Assembled as PyG's ``Planetoid`` does: features (raw bag-of-words, not
    row-normalised) and labels are ``allx``/``ally`` then ``tx``/``ty`` put in test-index order; train = the
    first ``len(y)`` nodes, validation the next 500 (within ``allx``), test the nodes in ``test.index``; edges
    from the adjacency dict with self-loops and duplicates removed. CiteSeer's isolated test nodes (missing from
    ``tx``) get zero features and label -1 (PyG gives them label 0). The pickles are read with a restricted
    unpickler (numpy arrays, scipy sparse matrices, dict of lists only). The files store no class names:
    ``classes`` are the label indices.
    """
    key = name.lower()
    folder = Path(root)
    for candidate in (folder / name / "raw", folder / key / "raw", folder / key.capitalize() / "raw"):
        if candidate.is_dir():
            folder = candidate
            break
    allowed = {**numpy_reconstructors(), **sparse_classes(), **container_classes()}

    def item(part: str) -> Any:
        path = folder / f"ind.{key}.{part}"
        if not path.exists():
            raise FileNotFoundError(f"{path} not found (Planetoid raw files: ind.{key}.x, .tx, .allx, ...)")
        return restricted_load(path, allowed)

    x, tx, allx = (as_dense(item(p), folder / f"ind.{key}.{p}") for p in ("x", "tx", "allx"))
    y, ty, ally = (as_dense(item(p), folder / f"ind.{key}.{p}") for p in ("y", "ty", "ally"))
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{folder}: ind.{key}.x has {x.shape[0]} rows but ind.{key}.y has {y.shape[0]}")
    graph = item("graph")
    index_path = folder / f"ind.{key}.test.index"
    try:
        test_index = np.loadtxt(index_path, dtype=np.int64, ndmin=1)
    except (OSError, ValueError) as error:
        raise ValueError(f"path: {str(index_path)!r} is not a list of node ids ({error})") from None
    if not isinstance(graph, Mapping):
        raise ValueError(f"path: {str(folder / f'ind.{key}.graph')!r} is not an adjacency dict")
    sorted_test = np.sort(test_index)
    ty_labels = _labels_from_onehot(ty)
    span = int(sorted_test[-1] - sorted_test[0]) + 1
    if span != len(sorted_test):  # CiteSeer: test ids with gaps (isolated nodes absent from tx)
        tx_full = np.zeros((span, tx.shape[1]), dtype=tx.dtype)
        tx_full[sorted_test - sorted_test[0]] = tx
        ty_full = np.full(span, -1, dtype=np.int64)
        ty_full[sorted_test - sorted_test[0]] = ty_labels
        tx, ty_labels = tx_full, ty_full
    features = np.concatenate([allx, tx]).astype(np.float32)
    labels = np.concatenate([_labels_from_onehot(ally), ty_labels])
    features[test_index] = features[sorted_test]
    labels[test_index] = labels[sorted_test]
    n = features.shape[0]
    rows = np.asarray([node for node, neighbours in graph.items() for _ in neighbours], dtype=np.int64)
    cols = np.asarray([m for neighbours in graph.values() for m in neighbours], dtype=np.int64)
    inside = (rows < n) & (cols < n)
    edge_index = coalesce_edges(rows[inside], cols[inside], n, symmetric=False)
    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    masks[0][: len(y)] = True
    masks[1][len(y) : min(len(y) + 500, allx.shape[0])] = True  # the clip only matters for tiny graphs
    masks[2][test_index] = True
    classes = class_names(range(ally.shape[1]))  # the files store no class names
    return Graph(key, features, edge_index, labels, *masks, classes)


def _labels_from_onehot(onehot: np.ndarray) -> np.ndarray:
    labels = onehot.argmax(axis=1).astype(np.int64)
    labels[onehot.sum(axis=1) == 0] = -1
    return labels
