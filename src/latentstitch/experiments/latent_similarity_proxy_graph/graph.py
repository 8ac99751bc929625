"""The graph: Planetoid Cora when its raw files are found under ``$LATENTSTITCH_PLANETOID_ROOT``, otherwise the BBC
News k-NN document graph (real articles, the shape of Cora); its tensors.

No registry package ships Cora, CiteSeer or PubMed (searched again for this run: PyPI's graph-dataset packages
graphsets, graph-datasets, big-graph-dataset, nodeclass, gcn, gnn, ura-gcn, gnn-augment, ephris, tf-geometric hold
loaders that download, no Planetoid files; Debian and npm have none either).
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import torch

from latentstitch._core.params import check_choice
from latentstitch.data import knn_document_graph, load_planetoid
from latentstitch.experiments.latent_similarity_proxy_graph.config import FEATURES
from latentstitch.models import normalized_adjacency

PLANETOID_ENV = "LATENTSTITCH_PLANETOID_ROOT"


def load_graph(seed: int = 0, features: str = "binary"):
    """Cora from ``$LATENTSTITCH_PLANETOID_ROOT`` if set, else the BBC News k-NN graph; its features as they are
    (``features="binary"``) or row-normalised (``"row-sum"``, PyG's NormalizeFeatures), and a random node split:
    80% train, 10% validation, 10% test."""
    check_choice(features, "features", FEATURES)
    root = os.environ.get(PLANETOID_ENV)
    graph = load_planetoid(root, "cora") if root else knn_document_graph(seed=seed)
    labelled = np.flatnonzero(graph.y >= 0)
    order = np.random.default_rng(seed).permutation(labelled)
    n_val = n_test = len(order) // 10
    masks = [np.zeros(graph.num_nodes, dtype=bool) for _ in range(3)]
    masks[1][order[:n_val]] = True
    masks[2][order[n_val : n_val + n_test]] = True
    masks[0][order[n_val + n_test :]] = True
    x = graph.x.astype(np.float32)
    if features == "row-sum":
        sums = x.sum(axis=1, keepdims=True)
        x = x / np.where(sums > 0, sums, 1)
    return replace(graph, x=x, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2])


class GraphTensors:
    """Features (a sparse tensor: bag-of-words rows are ~95% zeros, and the GCN's first layer then multiplies and drops
    out only the stored entries), labels, the normalised adjacency and the split masks as tensors."""

    def __init__(self, graph):
        self.x = torch.from_numpy(graph.x).to_sparse()
        self.y = torch.from_numpy(graph.y)
        self.adjacency = normalized_adjacency(torch.from_numpy(graph.edge_index), graph.num_nodes)
        self.masks = {name: torch.from_numpy(getattr(graph, f"{name}_mask")) for name in ("train", "val", "test")}
