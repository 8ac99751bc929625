"""Graphs for node classification: a typed container, a real k-NN document graph and a stochastic block model.

Cora, CiteSeer and PubMed ship in no registry package (see :func:`load_planetoid` for local copies). The
runnable default is a real graph of the same shape built from real data: BBC News articles as nodes, binary
bag-of-words features, edges between each article and its nearest neighbours in TF-IDF cosine similarity, and
topics as labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from latentstitch._core.params import check_nonnegative, check_positive_int, check_probability, check_seed
from latentstitch.data._text import bbc_news_documents


@dataclass(frozen=True)
class Graph:
    """A node-classification graph.

    ``x`` (N, F) float32 node features; ``edge_index`` (2, E) int64, one column per directed edge (an undirected
    edge appears in both directions), sorted, no duplicates; ``y`` (N,) int64 labels into ``classes`` (-1 for an
    unlabelled node); boolean masks (N,) choose the train / validation / test nodes.
    """

    name: str
    x: np.ndarray
    edge_index: np.ndarray
    y: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    classes: tuple[str, ...]

    def __post_init__(self) -> None:
        n = self.x.shape[0]
        if self.edge_index.ndim != 2 or self.edge_index.shape[0] != 2:
            raise ValueError(f"edge_index: expected shape (2, E), got {self.edge_index.shape}")
        if self.edge_index.size and (self.edge_index.min() < 0 or self.edge_index.max() >= n):
            raise ValueError(
                f"edge_index: node ids must lie in [0, {n}), got [{self.edge_index.min()}, {self.edge_index.max()}]"
            )
        for field_name in ("y", "train_mask", "val_mask", "test_mask"):
            if getattr(self, field_name).shape != (n,):
                raise ValueError(f"{field_name}: expected shape ({n},), got {getattr(self, field_name).shape}")

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        """Number of directed edges (columns of ``edge_index``)."""
        return int(self.edge_index.shape[1])

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def adjacency(self):
        """The (N, N) scipy CSR adjacency matrix with ones on the edges."""
        from scipy.sparse import csr_matrix

        ones = np.ones(self.num_edges, dtype=np.float32)
        return csr_matrix((ones, (self.edge_index[0], self.edge_index[1])), shape=(self.num_nodes, self.num_nodes))


def coalesce_edges(rows: np.ndarray, cols: np.ndarray, num_nodes: int, *, symmetric: bool) -> np.ndarray:
    """(2, E) int64 edge index: self-loops and duplicates removed, sorted by (source, target); both directions
    of every edge when ``symmetric``."""
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    if symmetric:
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    keep = rows != cols
    codes = np.unique(rows[keep] * num_nodes + cols[keep])
    return np.stack([codes // num_nodes, codes % num_nodes]).astype(np.int64)


def planetoid_masks(
    y: np.ndarray, *, per_class: int, num_val: int, num_test: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Planetoid split protocol, seeded: ``per_class`` random training nodes of every class, then
    ``num_val`` validation and ``num_test`` test nodes drawn from the rest (labelled nodes only)."""
    rng = np.random.default_rng(seed)
    n = len(y)
    train = np.zeros(n, dtype=bool)
    for label in np.unique(y[y >= 0]):
        members = np.flatnonzero(y == label)
        if len(members) < per_class:
            raise ValueError(f"per_class: class {label} has {len(members)} nodes, fewer than {per_class}")
        train[rng.choice(members, size=per_class, replace=False)] = True
    rest = rng.permutation(np.flatnonzero(~train & (y >= 0)))
    if num_val + num_test > len(rest):
        raise ValueError(f"num_val + num_test: {num_val + num_test} asked but only {len(rest)} nodes remain")
    val = np.zeros(n, dtype=bool)
    test = np.zeros(n, dtype=bool)
    val[rest[:num_val]] = True
    test[rest[num_val : num_val + num_test]] = True
    return train, val, test


def knn_document_graph(
    *,
    k: int = 10,
    max_features: int = 1500,
    per_class: int = 20,
    num_val: int = 500,
    num_test: int = 1000,
    seed: int = 0,
) -> Graph:
    """A real graph with the shape of Cora, built from BBC News: 2,225 article nodes, 5 topic labels.

    Node features are binary bag-of-words indicators over the ``max_features`` most frequent words (English stop
    words removed; Cora has 1,433 such features). Each article is linked to its ``k`` nearest neighbours by cosine
    similarity of TF-IDF vectors; the edges are symmetrised (an edge in either direction becomes undirected), with
    no self-loops. Masks follow the Planetoid protocol (``per_class`` train nodes per class, ``num_val``
    validation, ``num_test`` test), seeded. Needs ``latentstitch[text]``.
    """
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from sklearn.neighbors import NearestNeighbors

    k = check_positive_int(k, "k")
    max_features = check_positive_int(max_features, "max_features")
    texts, labels, topics = bbc_news_documents()
    features = CountVectorizer(max_features=max_features, stop_words="english", binary=True).fit_transform(texts)
    tfidf = TfidfVectorizer(stop_words="english", sublinear_tf=True).fit_transform(texts)
    neighbours = NearestNeighbors(n_neighbors=k + 1, metric="cosine", algorithm="brute").fit(tfidf)
    _, index = neighbours.kneighbors(tfidf)
    rows = np.repeat(np.arange(len(texts)), k + 1)
    edge_index = coalesce_edges(rows, index.ravel(), len(texts), symmetric=True)
    train, val, test = planetoid_masks(
        labels, per_class=per_class, num_val=num_val, num_test=num_test, seed=check_seed(seed)
    )
    return Graph(
        f"bbc-news-knn{k}",
        features.toarray().astype(np.float32),
        edge_index,
        labels,
        train,
        val,
        test,
        topics,
    )


def stochastic_block_model(
    sizes: Sequence[int],
    p_in: float,
    p_out: float,
    *,
    num_features: int = 16,
    feature_signal: float = 1.0,
    train_fraction: float = 0.5,
    val_fraction: float = 0.25,
    seed: int = 0,
) -> Graph:
    """A random undirected graph with planted communities, for tests.

    Nodes of block ``b`` (``sizes[b]`` of them, label ``b``) are linked with probability ``p_in`` inside their
    block and ``p_out`` across blocks, independently per pair; no self-loops. Features are Gaussian: a random
    unit mean per block scaled by ``feature_signal``, plus standard normal noise (``num_features`` wide; signal 0
    makes them uninformative). Masks split the nodes at random (``train_fraction``, ``val_fraction``, rest test).
    Deterministic for ``seed``.
    """
    sizes = [check_positive_int(s, "sizes") for s in sizes]
    if not sizes:
        raise ValueError("sizes: expected at least one block")
    check_probability(p_in, "p_in")
    check_probability(p_out, "p_out")
    num_features = check_positive_int(num_features, "num_features")
    check_nonnegative(feature_signal, "feature_signal")
    check_probability(train_fraction, "train_fraction", low_open=True, high_open=True)
    check_probability(val_fraction, "val_fraction", high_open=True)
    if not train_fraction + val_fraction < 1:
        raise ValueError("train_fraction, val_fraction: expected positive fractions summing to less than 1")
    rng = np.random.default_rng(check_seed(seed))
    y = np.repeat(np.arange(len(sizes)), sizes).astype(np.int64)
    n = len(y)
    upper_rows, upper_cols = np.triu_indices(n, k=1)
    probability = np.where(y[upper_rows] == y[upper_cols], p_in, p_out)
    linked = rng.random(len(probability)) < probability
    edge_index = coalesce_edges(upper_rows[linked], upper_cols[linked], n, symmetric=True)
    means = rng.standard_normal((len(sizes), num_features))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    x = (feature_signal * means[y] + rng.standard_normal((n, num_features))).astype(np.float32)
    order = rng.permutation(n)
    n_train, n_val = round(train_fraction * n), round(val_fraction * n)
    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    masks[0][order[:n_train]] = True
    masks[1][order[n_train : n_train + n_val]] = True
    masks[2][order[n_train + n_val :]] = True
    return Graph(f"sbm-{len(sizes)}", x, edge_index, y, *masks, tuple(f"block {b}" for b in range(len(sizes))))
