"""GCN in plain torch: normalised adjacency, node classification on a stochastic block model, stitching."""

import pytest
import torch

from latentstitch.data import stochastic_block_model
from latentstitch.models import GCNClassifier, ZeroShotStitched, node_classification_loss, normalized_adjacency
from latentstitch.models._gcn import sparse_dropout
from latentstitch.training import fit


def planted_partition(sizes=(60, 60, 60), seed=0):
    """A small SBM whose node features carry only a weak class signal (class means 0.4 apart in units of the
    noise), so the graph's structure is what makes the nodes separable."""
    graph = stochastic_block_model(
        sizes, p_in=0.15, p_out=0.01, feature_signal=0.4, train_fraction=0.3, val_fraction=0.0, seed=seed
    )
    as_tensor = torch.from_numpy
    return as_tensor(graph.x), as_tensor(graph.edge_index), as_tensor(graph.y), as_tensor(graph.train_mask)


def test_normalized_adjacency_equals_the_dense_formula():
    edge_index = torch.tensor([[0, 1, 1, 3, 0], [1, 2, 2, 0, 1]])  # one duplicate, one directed only
    adjacency = normalized_adjacency(edge_index, 5).to_dense()
    a = torch.zeros(5, 5)
    a[edge_index[0], edge_index[1]] = 1
    a = ((a + a.T) > 0).float() + torch.eye(5)
    d = a.sum(1).rsqrt()
    torch.testing.assert_close(adjacency, d[:, None] * a * d[None, :])
    assert adjacency[4, 4] == 1  # an isolated node keeps itself
    directed = normalized_adjacency(edge_index, 5, symmetric=False, self_loops=False).to_dense()
    assert directed[2, 1] == 0 and directed[1, 2] > 0


def test_bad_edges_are_named():
    with pytest.raises(ValueError, match=r"edge_index: node indices must lie in \[0, 3\)"):
        normalized_adjacency(torch.tensor([[0, 5], [1, 2]]), 3)
    with pytest.raises(TypeError, match="edge_index: expected a \\(2, E\\) int64 tensor"):
        normalized_adjacency(torch.tensor([[0.0, 1.0], [1.0, 2.0]]), 3)
    with pytest.raises(ValueError, match="anchor_nodes: index 9 but the graph has 4 nodes"):
        GCNClassifier(3, 2, anchor_nodes=torch.tensor([0, 9]))(torch.randn(4, 3), torch.tensor([[0], [1]]))


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_gcn_learns_a_stochastic_block_model_well_above_chance(relative):
    x, edge_index, y, train = planted_partition()
    adjacency = normalized_adjacency(edge_index, len(y))
    anchors = train.nonzero().flatten()[:20] if relative else None
    torch.manual_seed(0)
    model = GCNClassifier(x.shape[1], 3, hidden=32, anchor_nodes=anchors)
    history = fit(model, node_classification_loss, [(x, adjacency, y, train)], epochs=150, lr=0.01, progress=False)
    test = ~train
    with torch.no_grad():
        predictions = model(x, adjacency).argmax(1)
    score = (predictions[test] == y[test]).float().mean()
    assert score > 0.85, score  # chance: 1/3
    assert history[-1]["loss"] < history[0]["loss"]
    # Without the graph (identity adjacency) the weak features alone do much worse: the GCN uses the edges.
    with torch.no_grad():
        alone = (model(x, normalized_adjacency(torch.zeros(2, 0, dtype=torch.long), len(y))).argmax(1) == y)[test]
    assert alone.float().mean() < score - 0.2


def test_relative_gcns_stitch_through_anchor_nodes():
    x, edge_index, _, _ = planted_partition(sizes=(10, 10))
    anchors = torch.arange(0, 20, 4)
    torch.manual_seed(0)
    a = GCNClassifier(x.shape[1], 2, hidden=8, anchor_nodes=anchors).eval()
    b = GCNClassifier(x.shape[1], 2, hidden=8, anchor_nodes=anchors).eval()
    with torch.no_grad():
        out = ZeroShotStitched(a, b)(x, edge_index)  # an edge_index is normalised on the fly
        assert out.shape == (20, 2)
        torch.testing.assert_close(out, b.decode(a.encode(x, normalized_adjacency(edge_index, 20))))
    assert a.encode(x, edge_index).shape == (20, 5)


def test_sparse_node_features_give_the_dense_forward_and_gradients():
    x, edge_index, y, train = planted_partition()
    x = torch.where(x > 0.5, x, torch.zeros_like(x))  # mostly zeros, like bag-of-words features
    adjacency = normalized_adjacency(edge_index, len(y))
    torch.manual_seed(0)
    model = GCNClassifier(x.shape[1], 3, hidden=8, layers=2, dropout=0.5).eval()
    dense, sparse = model(x, adjacency), model(x.to_sparse(), adjacency)
    torch.testing.assert_close(sparse, dense)
    grads = []
    for features in (x, x.to_sparse()):
        model.zero_grad()
        node_classification_loss(model, (features, adjacency, y, train))["loss"].backward()
        grads.append(model.convs[0].linear.weight.grad.clone())
    torch.testing.assert_close(grads[1], grads[0])


def test_sparse_dropout_drops_only_stored_entries_and_keeps_the_mean():
    torch.manual_seed(0)
    x = (torch.rand(400, 50) < 0.1).float()
    dropped = sparse_dropout(x.to_sparse(), 0.5, True).to_dense()
    assert torch.all(dropped[x == 0] == 0)
    assert set(dropped[x == 1].unique().tolist()) == {0.0, 2.0}
    assert dropped.sum() / x.sum() == pytest.approx(1.0, abs=0.1)  # ~2,000 entries: std of the ratio ~0.02
    assert sparse_dropout(x.to_sparse(), 0.5, False).to_dense().equal(x)
