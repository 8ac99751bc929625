"""A per-document confidence of a corpus-side migration, computable for every document without its new vector,
and the curve of Recall@10 against the share of lowest-confidence documents re-embedded first."""

from __future__ import annotations

import numpy as np

from latentstitch.migrate._retrieval import per_query, ranks, search

SHARES = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)


def neighbourhood_agreement(
    old: np.ndarray, migrated: np.ndarray, metric: str, *, reference: int = 2048, k: int = 10, seed: int = 0
) -> np.ndarray:
    """Per document, the share of its ``k`` nearest neighbours among ``reference`` random documents that are the
    same in the old space and in the bridged space: where the bridge keeps a document's neighbourhood, its
    bridged vector is more likely right (1: all kept, 0: none)."""
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(old), size=min(reference, len(old)), replace=False)
    k = min(k, len(rows) - 1)
    before = rows[search(old, old[rows], k + 1, metric)]
    after = rows[search(migrated, migrated[rows], k + 1, metric)]
    own = np.arange(len(old))[:, None]
    # a reference document's own row is its nearest neighbour in both spaces; it is not counted
    same = ((before[:, :, None] == after[:, None, :]) & (before[:, :, None] != own[:, :, None])).any(axis=2)
    return same.sum(axis=1) / np.maximum((before != own).sum(axis=1), 1)


def confidence_curve(confidence, migrated, new_by_row, held_rows, sets, metric, rng) -> dict:
    """Recall@10 of the held-out queries when the lowest-confidence share of the corpus is re-embedded first (the
    held-out documents in that share get their true new vectors), beside the same share chosen at random.
    Documents outside the held-out sample that would be re-embedded keep their bridged vectors here (their new
    vectors are unknown), so the curve is a lower bound for them as distractors."""
    order = np.argsort(confidence, kind="stable")
    rank_of = np.empty(len(order), np.int64)
    rank_of[order] = np.arange(len(order))
    random_rank = rng.permutation(len(order))
    queries = [(q_new, relevant) for q_new, _, relevant in sets.values()]
    q_new = np.concatenate([q for q, _ in queries])
    relevant = np.concatenate([r for _, r in queries])
    rows = {"share": list(SHARES), "by_confidence": [], "at_random": []}
    for share in SHARES:
        cut = round(share * len(order))
        for key, ranking in (("by_confidence", rank_of), ("at_random", random_rank)):
            index = migrated.copy()
            chosen = held_rows[ranking[held_rows] < cut]
            index[chosen] = new_by_row[chosen]
            found = search(q_new, index, 10, metric)
            rows[key].append(float(per_query(ranks(found, relevant))["recall@10"].mean()))
    return rows
