"""Death times and the topological densification loss: reference persistence, gradients, training effect.

The math runs on the ``--device`` (the ``on`` fixture moves inputs there)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import minimum_spanning_tree

from latentstitch.losses import TopologicalDensificationLoss, death_times
from latentstitch.losses._topological import minimum_spanning_trees


def kruskal_death_times(points: np.ndarray) -> np.ndarray:
    """Independent reference: 0-dim Vietoris-Rips death times = the merge lengths of Kruskal's algorithm on all
    pairwise distances, with a union-find (no scipy, no torch)."""
    n = len(points)
    parent = list(range(n))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    edges = sorted(
        (float(np.sqrt(((points[i] - points[j]) ** 2).sum())), i, j) for i in range(n) for j in range(i + 1, n)
    )
    deaths = []
    for length, i, j in edges:
        a, b = root(i), root(j)
        if a != b:
            parent[a] = b
            deaths.append(length)
    return np.array(deaths)


@given(
    n=st.integers(1, 40),
    d=st.integers(1, 6),
    seed=st.integers(0, 2**31 - 1),
    duplicates=st.integers(0, 3),
)
def test_death_times_equal_kruskal_reference(n, d, seed, duplicates, on):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(n, d)) * rng.uniform(1e-3, 1e3)
    points = np.vstack([points, points[rng.integers(0, n, duplicates)]])  # repeated samples die at 0
    assert isinstance(death_times(points), np.ndarray)
    got = death_times(on(points)).cpu().numpy()
    assert got.shape == (len(points) - 1,)
    np.testing.assert_allclose(got, kruskal_death_times(points), rtol=1e-12, atol=1e-12 * np.abs(points).max())
    assert (got[:duplicates] == 0).all()


@pytest.mark.parametrize("seed", range(5))
def test_death_times_equal_gudhi_rips_persistence(seed):
    gudhi = pytest.importorskip("gudhi")
    points = np.random.default_rng(seed).normal(size=(60, 5))
    tree = gudhi.RipsComplex(points=points).create_simplex_tree(max_dimension=1)
    finite = [death for dim, (_, death) in tree.persistence() if dim == 0 and np.isfinite(death)]
    np.testing.assert_allclose(death_times(points), np.sort(finite), rtol=1e-12)


def test_death_times_of_tiny_or_coincident_clouds():
    # scipy drops dense edges within 1e-8 of zero; the tree must still span clouds at that scale.
    points = np.random.default_rng(0).normal(size=(12, 3)) * 1e-12
    np.testing.assert_allclose(death_times(points), kruskal_death_times(points), rtol=1e-9)
    np.testing.assert_array_equal(death_times(np.zeros((4, 2))), np.zeros(3))
    assert death_times(np.zeros((1, 2))).shape == (0,)


def test_death_times_follow_the_input_type_and_reject_bad_points():
    points = torch.randn(10, 3)
    assert isinstance(death_times(points), torch.Tensor) and death_times(points).dtype == torch.float32
    with pytest.raises(ValueError, match="points: contains NaN"):
        death_times(torch.tensor([[0.0, float("nan")], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="points: expected a 2-D"):
        death_times(torch.randn(3, 2, 2))


def test_death_times_are_invariant_to_rotation_and_translation():
    rng = np.random.default_rng(1)
    points = rng.normal(size=(25, 4))
    rotation, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    np.testing.assert_allclose(death_times(points @ rotation + 3.0), death_times(points), rtol=1e-10)
    np.testing.assert_allclose(death_times(2.5 * points), 2.5 * death_times(points), rtol=1e-12)


def test_loss_value_is_mean_over_groups_of_summed_deviations(on):
    rng = np.random.default_rng(2)
    clouds = rng.normal(size=(3, 8, 4))
    beta = 0.9
    expected = np.mean([np.abs(kruskal_death_times(c) - beta).sum() for c in clouds])
    squared = np.mean([((kruskal_death_times(c) - beta) ** 2).sum() for c in clouds])
    z = on(clouds)
    assert TopologicalDensificationLoss(beta)(z).item() == pytest.approx(expected, rel=1e-12)
    assert TopologicalDensificationLoss(beta, p=2)(z).item() == pytest.approx(squared, rel=1e-12)
    # The same sub-batches, laid out three ways.
    flat = z.reshape(24, 4)
    assert TopologicalDensificationLoss(beta)(flat, group_size=8).item() == pytest.approx(expected, rel=1e-12)
    labels = torch.tensor([5, 1, 7]).repeat_interleave(8).to(z.device)
    order = torch.randperm(24, generator=torch.Generator().manual_seed(0)).to(z.device)
    assert TopologicalDensificationLoss(beta)(flat[order], labels[order]).item() == pytest.approx(expected, rel=1e-12)


def test_singleton_groups_are_not_counted_and_an_empty_loss_keeps_the_graph():
    z = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 0, 0, 1, 2])
    alone = TopologicalDensificationLoss(1.0)(z[:3])
    assert TopologicalDensificationLoss(1.0)(z, labels).item() == pytest.approx(alone.item())
    nothing = TopologicalDensificationLoss(1.0)(z, torch.arange(5))
    nothing.backward()
    assert nothing.item() == 0 and torch.equal(z.grad, torch.zeros_like(z))


def test_loss_gradcheck(device):
    # Generic points: the tree is unique and every death time is a smooth function of the points nearby.
    z = torch.randn(3, 7, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3)).to(device)
    z.requires_grad_()
    for p in (1, 2):
        assert torch.autograd.gradcheck(lambda t, p=p: TopologicalDensificationLoss(0.8, p=p)(t), (z,))
    labels = torch.tensor([0, 1] * 6, device=device)
    flat = z[:2].reshape(14, 4)[:12].detach().requires_grad_()
    assert torch.autograd.gradcheck(lambda t: TopologicalDensificationLoss(0.5)(t, labels), (flat,))
    assert torch.autograd.gradcheck(lambda t: death_times(t), (flat,))


def test_duplicate_points_get_zero_not_nan_gradients(device):
    z = torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]], dtype=torch.float64, device=device, requires_grad=True)
    TopologicalDensificationLoss(0.5)(z).backward()
    assert torch.isfinite(z.grad).all()
    # Only the unit edge moves (towards length 0.5): its endpoints get -+1 along x, split across the tie.
    assert z.grad[2, 0].item() == pytest.approx(1.0)


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_optimising_points_moves_intra_class_death_times_to_beta():
    generator = torch.Generator().manual_seed(0)
    centres = torch.randn(4, 1, 8, generator=generator) * 4
    z = (centres + torch.randn(4, 16, 8, generator=generator)).requires_grad_()
    beta = 0.3
    loss = TopologicalDensificationLoss(beta)
    before = torch.stack([death_times(c) for c in z.detach()])
    optimizer = torch.optim.SGD([z], lr=0.05)
    for _ in range(100):
        optimizer.zero_grad()
        loss(z).backward()
        optimizer.step()
    after = torch.stack([death_times(c) for c in z.detach()])
    # Plain L1 subgradient steps converge slowly; after 100 the mean deviation has more than halved.
    assert (after - beta).abs().mean() < 0.5 * (before - beta).abs().mean()
    assert before.mean() > 2 * beta and (after.mean() - beta).abs() < 0.5 * (before.mean() - beta).abs()


def test_bad_arguments_are_named():
    z = torch.randn(8, 3)
    with pytest.raises(ValueError, match="group_size: 8 rows do not split into groups of 3"):
        TopologicalDensificationLoss(1.0)(z, group_size=3)
    with pytest.raises(ValueError, match="labels and group_size"):
        TopologicalDensificationLoss(1.0)(z, torch.zeros(8, dtype=torch.long), group_size=4)
    with pytest.raises(ValueError, match="labels: expected a 1-D integer"):
        TopologicalDensificationLoss(1.0)(z, torch.zeros(8))
    with pytest.raises(ValueError, match="latents and labels must have the same number of samples"):
        TopologicalDensificationLoss(1.0)(z, torch.zeros(7, dtype=torch.long))
    with pytest.raises(ValueError, match="beta: expected a finite number >= 0"):
        TopologicalDensificationLoss(-1.0)(z)
    with pytest.raises(ValueError, match="latents: contains NaN"):
        TopologicalDensificationLoss(1.0)(torch.full((3, 2), float("nan")))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_loss_on_cuda_matches_cpu():
    z = torch.randn(8, 16, 32, dtype=torch.float64)
    cpu = z.clone().requires_grad_()
    gpu = z.cuda().requires_grad_()
    loss = TopologicalDensificationLoss(1.5)
    loss(cpu).backward()
    value = loss(gpu)
    value.backward()
    assert value.device.type == "cuda"
    assert value.item() == pytest.approx(loss(cpu).item(), rel=1e-12)
    torch.testing.assert_close(gpu.grad.cpu(), cpu.grad)


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 4),
    n=st.integers(1, 70),
    grid=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
    accelerator_path=st.booleans(),
)
def test_batched_trees_span_each_cloud_with_minimum_weight(b, n, grid, seed, accelerator_path, device):
    """Boruvka's rounds against scipy's Kruskal: every tree has n - 1 edges joining all points without a cycle, and
    the least total weight, also on integer grids full of equal distances and duplicate points (ties). Both paths:
    stopping once done (where reading a flag is free) and the fixed worst-case rounds of an accelerator."""
    import latentstitch._core.device as validation

    validation.DEFER_ON_CPU, before = accelerator_path, validation.DEFER_ON_CPU
    try:
        _check_trees(b, n, grid, seed, device)
    finally:
        validation.DEFER_ON_CPU = before


def _check_trees(b, n, grid, seed, device):
    rng = np.random.default_rng(seed)
    points = rng.integers(0, 3, size=(b, n, 2)).astype(float) if grid else rng.normal(size=(b, n, 3))
    distances = torch.cdist(*(torch.from_numpy(points),) * 2).to(device)
    i, j = minimum_spanning_trees(torch.minimum(distances, distances.mT))
    assert i.shape == j.shape == (b, max(n - 1, 0))
    for k in range(b):
        parent = list(range(n))

        def root(v, parent=parent):
            while parent[v] != v:
                v = parent[v]
            return v

        for u, v in zip(i[k].tolist(), j[k].tolist(), strict=True):
            assert root(u) != root(v)  # no cycle, so n - 1 edges span the n points
            parent[root(u)] = root(v)
        weights = distances[k].cpu().numpy()
        shifted = np.triu(weights + 1.0, 1)  # scipy drops zero weights: shift them (the tree is unchanged)
        expected = minimum_spanning_tree(shifted).sum() - (n - 1)
        assert weights[i[k].cpu(), j[k].cpu()].sum() == pytest.approx(expected, abs=1e-9)
