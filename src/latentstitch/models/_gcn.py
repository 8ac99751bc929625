"""Graph convolutional networks (Kipf & Welling, ICLR 2017) in plain torch, with absolute or relative node
latents (relative to anchor nodes, as in the relreps Cora experiments)."""

from __future__ import annotations

import itertools

import torch
from torch import nn
from torch.nn import functional as F

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.params import check_choice, check_positive_int, check_probability
from latentstitch.models._classifier import PROJECTIONS
from latentstitch.relative import RelativeProjection, RobustRelativeProjection


def normalized_adjacency(
    edge_index: torch.Tensor, num_nodes: int, *, self_loops: bool = True, symmetric: bool = True
) -> torch.Tensor:
    """The GCN propagation matrix ``D^-1/2 (A + I) D^-1/2`` as a sparse (num_nodes, num_nodes) COO tensor.

    Parameters
    ----------
    edge_index : (2, E) int64 tensor
        Directed edges ``source -> target``; duplicates count once.
    num_nodes : int
    self_loops : bool
        Add I (the GCN renormalisation trick). Without it, isolated nodes get an all-zero row.
    symmetric : bool
        Add every reverse edge (undirected graph), so the matrix is symmetric.

    Returns
    -------
    float32 sparse tensor on ``edge_index``'s device; ``adjacency @ x`` averages each node's neighbourhood with
    weights ``1 / sqrt(deg_i deg_j)``.
    """
    num_nodes = check_positive_int(num_nodes, "num_nodes")
    if not isinstance(edge_index, torch.Tensor) or edge_index.dtype != torch.int64 or edge_index.ndim != 2:
        raise TypeError("edge_index: expected a (2, E) int64 tensor of node indices")
    if edge_index.shape[0] != 2:
        raise ValueError(f"edge_index: expected shape (2, E), got {tuple(edge_index.shape)}")
    if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        raise ValueError(
            f"edge_index: node indices must lie in [0, {num_nodes}), got [{edge_index.min()}, {edge_index.max()}]"
        )
    edges = [edge_index]
    if symmetric:
        edges.append(edge_index.flip(0))
    if self_loops:
        loop = torch.arange(num_nodes, device=edge_index.device)
        edges.append(torch.stack([loop, loop]))
    index = torch.cat(edges, dim=1)
    ones = torch.ones(index.shape[1], device=index.device)
    pattern = torch.sparse_coo_tensor(index, ones, (num_nodes, num_nodes), check_invariants=False).coalesce()
    rows, cols = pattern.indices()
    values = torch.ones_like(pattern.values())  # duplicate edges count once
    degree = torch.zeros(num_nodes, device=index.device).index_add_(0, rows, values)
    scale = degree.clamp_min(1).rsqrt()
    return torch.sparse_coo_tensor(
        pattern.indices(), scale[rows] * values * scale[cols], (num_nodes, num_nodes), check_invariants=False
    ).coalesce()


class GCNLayer(nn.Module):
    """``adjacency @ (x W) + b``: one graph convolution with a precomputed ``normalized_adjacency``."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        h = torch.sparse.mm(x, self.linear.weight.t()) if x.is_sparse else self.linear(x)
        return torch.sparse.mm(adjacency, h) + self.bias


def sparse_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """``F.dropout`` that keeps a sparse COO ``x`` sparse: only its stored entries are dropped (and the kept ones
    scaled by ``1 / (1 - p)``), the same in distribution as dropout of the dense tensor, whose zeros stay zero."""
    if not x.is_sparse:
        return F.dropout(x, p, training)
    if not training or p == 0:
        return x
    x = x.coalesce()
    return torch.sparse_coo_tensor(
        x.indices(), F.dropout(x.values(), p, True), x.shape, is_coalesced=True, check_invariants=False
    )


class GCNClassifier(nn.Module):
    """Node classification: ``layers`` GCN layers -> node latents -> ``LayerNorm -> Linear`` head.

    Hidden layers are followed by ReLU and dropout; the last GCN layer is linear (the node embedding). With
    ``anchor_nodes``, the latent of each node is its cosine similarity to the embeddings of the anchor nodes,
    taken from the same forward pass and detached (anchors are re-embedded by the current network at every
    step, without gradient); otherwise the embedding itself.

    Parameters
    ----------
    in_features, num_classes : int
    hidden : int
        Width of every GCN layer.
    layers : int
        Number of GCN layers (>= 1).
    dropout : float
        Dropout before every GCN layer.
    anchor_nodes : (|A|,) int64 tensor, optional
        Indices of the anchor nodes (relreps Cora: 300 random training nodes).
    projection : {"cosine", "robust"}

    Call ``model(x, adjacency)`` with node features (N, F), dense or a sparse COO tensor (bag-of-words features:
    the first layer then multiplies and drops out only the stored entries, several times faster), and
    ``normalized_adjacency(edge_index, N)`` (an (2, E) int64 ``edge_index`` is accepted too, and normalised on every
    call). Full-batch training with ``fit``:
    ``batches=[(x, adjacency, y, train_mask)]`` and ``loss_fn=node_classification_loss``.
    """

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        *,
        hidden: int = 64,
        layers: int = 2,
        dropout: float = 0.5,
        anchor_nodes: torch.Tensor | None = None,
        projection: str = "cosine",
    ):
        super().__init__()
        widths = [check_positive_int(in_features, "in_features")] + [check_positive_int(hidden, "hidden")] * (
            check_positive_int(layers, "layers")
        )
        self.convs = nn.ModuleList(GCNLayer(a, b) for a, b in itertools.pairwise(widths))
        self.dropout = check_probability(dropout, "dropout", high_open=True)
        check_choice(projection, "projection", PROJECTIONS)
        self.relative = anchor_nodes is not None
        if self.relative:
            if (
                not isinstance(anchor_nodes, torch.Tensor)
                or anchor_nodes.dtype != torch.int64
                or anchor_nodes.ndim != 1
            ):
                raise TypeError("anchor_nodes: expected a 1-D int64 tensor of node indices")
            self.register_buffer("anchor_nodes", anchor_nodes.clone())
            check_choice(projection, "projection", PROJECTIONS)
            num = len(anchor_nodes)
            self.projection = (
                RobustRelativeProjection(hidden, num_anchors=num)
                if projection == "robust"
                else RelativeProjection("cosine", num_anchors=num)
            )
        self.latent_width = len(anchor_nodes) if self.relative else hidden
        self.head = nn.Sequential(
            nn.LayerNorm(self.latent_width),
            nn.Linear(self.latent_width, check_positive_int(num_classes, "num_classes")),
        )

    def embed(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        """Node embeddings (N, hidden): the output of the last GCN layer."""
        if isinstance(x, torch.Tensor) and x.is_sparse:
            if x.ndim != 2 or x.dtype not in (torch.float32, torch.float64) or x.shape[0] < 1:
                raise ValueError(f"x: expected a 2-D floating-point sparse tensor, got {x.dtype} {tuple(x.shape)}")
        else:
            x = as_float_tensor(x, "x", ndim=2, min_rows=1)
        if not adjacency.is_sparse:
            adjacency = normalized_adjacency(adjacency, x.shape[0])
        for i, conv in enumerate(self.convs):
            if i:
                x = F.relu(x)
            x = conv(sparse_dropout(x, self.dropout, self.training), adjacency)
        return x

    def encode(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        """Node latents: embeddings, or their relative vectors to the (detached) anchor-node embeddings."""
        z = self.embed(x, adjacency)
        if not self.relative:
            return z
        if self.anchor_nodes.max() >= z.shape[0]:
            raise ValueError(f"anchor_nodes: index {int(self.anchor_nodes.max())} but the graph has {z.shape[0]} nodes")
        return self.projection(z, z[self.anchor_nodes].detach())

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        return self.head(latents)

    def forward(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x, adjacency))


def node_classification_loss(model: nn.Module, batch: tuple) -> dict[str, torch.Tensor]:
    """``fit``'s loss for full-batch node classification: batch ``(x, adjacency, y, mask)``; cross-entropy and
    accuracy over the nodes where ``mask`` is True (all nodes if ``mask`` is None)."""
    x, adjacency, y, mask = batch
    logits = model(x, adjacency)
    if mask is not None:
        logits, y = logits[mask], y[mask]
    return {"loss": F.cross_entropy(logits, y), "accuracy": (logits.argmax(dim=1) == y).float().mean()}
