"""TopologicalDensificationLoss (forward + backward) against the same loss with scipy's minimum spanning tree.

Baseline: per sub-batch, the exact Euclidean distance matrix in torch, brought to numpy, scipy's
``minimum_spanning_tree`` (Kruskal) for the edges, then the edge lengths gathered from the torch distance matrix
so the gradient flows: the straightforward "torch + scipy for the tree" implementation. Ours finds the trees with
Boruvka's algorithm batched over the sub-batches in torch, on the points' device (ceil(log2 n) rounds of tensor
operations, no step per point), and recomputes only the tree edges' lengths. Shapes: Hofer et al.'s batches
(b = 8 classes x n = 16 samples) at the RoBERTa CLS width (768), and larger class-pure clouds.
"""

from __future__ import annotations

import statistics

import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import minimum_spanning_tree

from latentstitch.losses import TopologicalDensificationLoss

SIZES = {"full": [(8, 16, 768), (8, 64, 768), (4, 256, 128)], "quick": [(8, 16, 768), (4, 64, 128)]}


def scipy_loss(points: torch.Tensor, beta: float) -> torch.Tensor:
    total = points.new_zeros(())
    for cloud in points:
        distances = torch.cdist(cloud, cloud, compute_mode="donot_use_mm_for_euclid_dist")
        d = distances.detach().double().cpu().numpy()
        i, j = np.triu_indices(len(d), k=1)
        # shifted so no edge weighs 0 (scipy drops those); the shift does not change which tree is minimal
        tree = minimum_spanning_tree(coo_matrix((d[i, j] + d.max() + 1, (i, j)), shape=d.shape).tocsr()).tocoo()
        total = total + (distances[tree.row, tree.col] - beta).abs().sum()
    return total / len(points)


def run(args) -> None:
    from benchmarks._harness import interleaved_times, median_ratio, print_table

    ours = TopologicalDensificationLoss(1.0)
    rows = []
    for b, n, d in SIZES["quick" if args.quick else "full"]:
        points = torch.randn(b, n, d, generator=torch.Generator().manual_seed(0)).requires_grad_()
        assert abs(ours(points).item() - scipy_loss(points, 1.0).item()) < 1e-3 * ours(points).item()
        times = interleaved_times(
            {"base": lambda p=points: scipy_loss(p, 1.0).backward(), "ours": lambda p=points: ours(p).backward()},
            args.repeats,
        )
        base, time = statistics.median(times["base"]), statistics.median(times["ours"])
        rows.append([f"b={b} n={n} d={d}", base * 1e3, time * 1e3, median_ratio(times, "ours", "base")])
    print_table(
        f"topological densification loss, forward + backward (CPU); medians of {args.repeats} interleaved rounds "
        "(ours / baseline: median of the per-round ratios)",
        ["sub-batches", "torch + scipy MST (ms)", "ours (ms)", "ours / baseline"],
        rows,
    )
