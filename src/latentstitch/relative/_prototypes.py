"""Learned anchors: prototypes trained with the task, initialised by k-means.

Fixed anchors are samples picked once (``select_anchors``). Learned anchors are trainable points, so a model can
move them where they describe its data best. To stay usable across spaces (zero-shot stitching needs *parallel*
anchors), the default parametrisation keeps every anchor a convex combination of real samples:

``a_j = sum_i w_ji p_i``, ``w_j = softmax(logits_j)`` over the members of the j-th k-means cluster of the pool,

initialised with equal weights, i.e. at the k-means centroid. The learned weights then give the same prototype in
any other space that holds the same pool samples (another seed, another encoder): ``anchors(pool_b)``. Because
weights sum to one, a convex combination commutes with every affine map, so the relative representation keeps
the similarity's invariances to affine transformations; it loses what fixed sample anchors have beyond that (e.g.
cosine with sample anchors ignores each sample's norm, a combination of samples does not). ``mode="free"`` keeps
the anchors as free points of one space instead (initialised at the centroids): the most flexible, but they do not
transfer to another space.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows, to_numpy
from latentstitch._core.params import check_choice, check_positive, check_positive_int, check_seed
from latentstitch.relative._aggregation import standardize_rows
from latentstitch.relative._projection import relative_projection

MODES = ("convex", "free")


class LearnedAnchors(nn.Module):
    """Trainable anchors initialised at the k-means centroids of a pool of samples (see the module docstring).

    Build with ``LearnedAnchors.from_kmeans(pool, n)``. ``forward(pool)`` returns the (n, d) anchors in the space of
    ``pool`` (the same samples, in any space, for ``mode="convex"``; ``pool`` is ignored for ``"free"``).

    Attributes
    ----------
    mode : {"convex", "free"}
    logits : (n, P) parameter (convex): the anchors' weights over the pool before the softmax; ``-inf`` outside
        each anchor's cluster (kept as a buffer ``support``).
    points : (n, d) parameter (free).
    """

    def __init__(self, num_anchors: int, pool_size: int, *, mode: str = "convex", dim: int | None = None):
        super().__init__()
        self.num_anchors = check_positive_int(num_anchors, "num_anchors")
        self.pool_size = check_positive_int(pool_size, "pool_size")
        self.mode = check_choice(mode, "mode", MODES)
        self.logits = nn.Parameter(torch.zeros(num_anchors, pool_size)) if mode == "convex" else None
        self.register_buffer("support", torch.ones(num_anchors, pool_size, dtype=torch.bool))
        if mode == "free":
            if dim is None:
                raise ValueError("dim: free anchors need the width of their space")
            self.points = nn.Parameter(torch.zeros(num_anchors, check_positive_int(dim, "dim")))
        else:
            self.points = None

    @classmethod
    def from_kmeans(cls, pool: ArrayLike, num_anchors: int, *, mode: str = "convex", seed: int = 0) -> LearnedAnchors:
        """Cluster ``pool`` (P, d) into ``num_anchors`` clusters (k-means, ``random_state=seed``) and start every
        anchor at its cluster's centroid: equal weights on the cluster's members (convex) or the centroid itself
        (free). Empty clusters cannot occur (scikit-learn relocates them)."""
        from sklearn.cluster import KMeans

        points = as_float_tensor(pool, "pool", ndim=2, min_rows=1)
        n = check_positive_int(num_anchors, "num_anchors")
        seed = check_seed(seed)
        if n > points.shape[0]:
            raise ValueError(f"num_anchors: asked for {n} anchors but pool has only {points.shape[0]} samples")
        data = to_numpy(points.detach().cpu().double(), "pool")
        kmeans = KMeans(n_clusters=n, n_init=1, random_state=seed).fit(data)
        module = cls(n, points.shape[0], mode=mode, dim=points.shape[1])
        with torch.no_grad():
            if mode == "convex":
                labels = torch.from_numpy(kmeans.labels_.astype(np.int64))
                module.support.copy_(labels.unsqueeze(0) == torch.arange(n).unsqueeze(1))
            else:
                module.points.copy_(torch.from_numpy(kmeans.cluster_centers_))
        return module.to(dtype=points.dtype, device=points.device)

    @property
    def weights(self) -> torch.Tensor:
        """(n, P) convex weights of every anchor over the pool (rows sum to 1, zero outside its cluster)."""
        if self.mode != "convex":
            raise ValueError("weights: free anchors are points, not combinations of the pool")
        return torch.softmax(self.logits.masked_fill(~self.support, float("-inf")), dim=1)

    def forward(self, pool: torch.Tensor | None = None) -> torch.Tensor:
        if self.mode == "free":
            return self.points
        if pool is None:
            raise ValueError("pool: convex anchors are combinations of the pool samples; pass them (in any space)")
        pool = as_float_tensor(pool, "pool", ndim=2)
        if pool.shape[0] != self.pool_size:
            raise ValueError(
                f"pool: expected the {self.pool_size} pool samples the anchors were built on, got {len(pool)}"
            )
        return self.weights.to(pool.dtype) @ pool

    def extra_repr(self) -> str:
        return f"num_anchors={self.num_anchors}, pool_size={self.pool_size}, mode={self.mode!r}"


def fit_prototypes(
    x: ArrayLike,
    y: ArrayLike,
    num_anchors: int,
    *,
    similarity: str = "cosine",
    mode: str = "convex",
    epochs: int = 200,
    lr: float = 0.05,
    seed: int = 0,
    **similarity_kwargs: Any,
) -> tuple[LearnedAnchors, nn.Linear]:
    """Learn ``num_anchors`` prototypes on labelled samples ``x`` (the pool), jointly with a linear classifier.

    The anchors start at the k-means centroids of ``x``; the classifier reads the standardised relative vectors
    (per sample over the anchors) and both are trained full-batch with Adam on the cross-entropy for ``epochs``
    steps. Returns ``(anchors, classifier)``; ``anchors(pool_b)`` gives the learned prototypes in another space
    holding the same samples. Runs under ``torch.manual_seed(seed)``.
    """
    xt = as_float_tensor(x, "x", ndim=2, min_rows=2)
    labels = torch.as_tensor(to_numpy(y, "y") if isinstance(y, torch.Tensor) else np.asarray(y)).long()
    if labels.ndim != 1:
        raise ValueError(f"y: expected one label per sample, got shape {tuple(labels.shape)}")
    check_same_rows(xt, labels, "x", "y")
    epochs = check_positive_int(epochs, "epochs")
    lr = check_positive(lr, "lr")
    seed = check_seed(seed)
    classes = int(labels.max()) + 1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        anchors = LearnedAnchors.from_kmeans(xt, num_anchors, mode=mode, seed=seed)
        head = nn.Linear(num_anchors, classes).to(dtype=xt.dtype, device=xt.device)
        optimizer = torch.optim.Adam([*anchors.parameters(), *head.parameters()], lr=lr)
        detached = xt.detach()
        for _ in range(epochs):
            optimizer.zero_grad()
            r = relative_projection(detached, anchors(detached), similarity, **similarity_kwargs)
            loss = F.cross_entropy(head(standardize_rows(r)), labels.to(xt.device))
            loss.backward()
            optimizer.step()
    return anchors.eval(), head.eval()
