"""The graph: Planetoid Cora when its raw files are found under ``$LATENTSTITCH_PLANETOID_ROOT``, otherwise the BBC
News k-NN document graph (real articles, the shape of Cora); its tensors."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import torch

from latentstitch.data import knn_document_graph, load_planetoid
from latentstitch.models import normalized_adjacency

PLANETOID_ENV = "LATENTSTITCH_PLANETOID_ROOT"


def load_graph(seed: int = 0):
    """Cora from ``$LATENTSTITCH_PLANETOID_ROOT`` if set, else the BBC News k-NN graph; row-normalised features
    (PyG's NormalizeFeatures) and a random node split: 80% train, 10% validation, 10% test."""
    root = os.environ.get(PLANETOID_ENV)
    graph = load_planetoid(root, "cora") if root else knn_document_graph(seed=seed)
    labelled = np.flatnonzero(graph.y >= 0)
    order = np.random.default_rng(seed).permutation(labelled)
    n_val = n_test = len(order) // 10
    masks = [np.zeros(graph.num_nodes, dtype=bool) for _ in range(3)]
    masks[1][order[:n_val]] = True
    masks[2][order[n_val : n_val + n_test]] = True
    masks[0][order[n_val + n_test :]] = True
    sums = graph.x.sum(axis=1, keepdims=True)
    x = (graph.x / np.where(sums > 0, sums, 1)).astype(np.float32)
    return replace(graph, x=x, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2])


class GraphTensors:
    """Features, labels, the normalised adjacency and the split masks as tensors."""

    def __init__(self, graph):
        self.x = torch.from_numpy(graph.x)
        self.y = torch.from_numpy(graph.y)
        self.adjacency = normalized_adjacency(torch.from_numpy(graph.edge_index), graph.num_nodes)
        self.masks = {name: torch.from_numpy(getattr(graph, f"{name}_mask")) for name in ("train", "val", "test")}
