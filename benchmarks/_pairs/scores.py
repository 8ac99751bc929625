"""Candidate label-free scores of a route, from the anchors only, and the consumers' figures on test items.

Label-free (k-fold over the anchors: the route is fitted on k-1 folds, each held-out source anchor is bridged and
compared with its true target-side representation; the routes' outputs are read as the consumer reads them:
target vectors for translation routes, relative vectors of the target for relative routes):

- ``mrr_anchors``: MRR of the own partner among the held-out target anchors (the current ``Bridge`` score);
- ``mrr_all`` / ``r10_all``: MRR / Recall@10 of the own partner among *all* target vectors the user has (every
  train item of the old model, the anchors included);
- ``knn10``: neighbourhood agreement, the mean overlap of the 10 nearest target vectors of the bridged vector and
  of the true partner (among all train items' target vectors);
- ``r2_weighted``: R^2 in the target's own units (``1 - SSE / SST`` summed over features);
- ``r2_scaled``: the mean over features of each feature's R^2 (standard-scaled: every feature weighs alike);
- ``cosine``: mean cosine of the bridged vector and its partner;
- ``pseudo_agree``: a stand-in for the user's head without labels: k-means (10 clusters) of the old model's train
  vectors gives pseudo-labels, a head of the consumer's kind (standard-scaled logistic regression) is trained on
  them (on the route's relative target vectors for a relative route), and the score is the share of held-out
  anchors whose bridged vector gets the head's prediction for the true target vector.

Consumers (the target's train items; the test items, which are never anchors): a logistic-regression head and an
MLP head (scikit-learn, on standard-scaled inputs, as the library's ``LinearHead``) and a logistic regression on the
raw vectors (``lr_raw``, what many users fit), trained on the target's train vectors as the route reads them,
applied to the bridged source test vectors (accuracy, macro-F1); a nearest-neighbour index of the target's
vectors of all items, queried with the bridged source test vectors (Recall@10 of the item itself).
"""

from __future__ import annotations

import numpy as np
import torch

CANDIDATES = ("mrr_anchors", "mrr_all", "r10_all", "knn10", "r2_weighted", "r2_scaled", "cosine", "pseudo_agree")
PSEUDO_CLASSES = 10


def _unit(x: np.ndarray) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(x, dtype=np.float32))
    return t / t.norm(dim=1, keepdim=True).clamp_min(1e-12)


def own_ranks(queries: np.ndarray, index: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Rank (1 = first, ties count half) of index row ``own[i]`` among all index rows for query i, by cosine."""
    scores = _unit(queries) @ _unit(index).T
    mine = scores[torch.arange(len(own)), torch.as_tensor(own)][:, None]
    return (1 + (scores > mine).sum(1) + ((scores == mine).sum(1) - 1) / 2).numpy()


def knn_overlap(bridged: np.ndarray, partner: np.ndarray, index: np.ndarray, k: int = 10) -> float:
    from latentstitch._core.knn import top_k

    x = _unit(index)
    a, b = top_k(_unit(bridged), x, k), top_k(_unit(partner), x, k)
    shared = [len(set(r.tolist()) & set(s.tolist())) for r, s in zip(a, b, strict=True)]
    return float(np.mean(shared)) / k


def label_free(bridged: np.ndarray, partner: np.ndarray, index: np.ndarray, own: np.ndarray) -> dict[str, float]:
    """Every candidate score of held-out bridged anchors against their partners; ``index`` = every target-side
    train vector the user has (as the route reads it), ``own[i]`` = the row of partner i in it."""
    b, p = np.asarray(bridged, np.float64), np.asarray(partner, np.float64)
    anchors = own_ranks(b, p, np.arange(len(p)))
    everything = own_ranks(b, index, own)
    centred = p - p.mean(0)
    sse, sst = ((p - b) ** 2).sum(0), (centred**2).sum(0)
    live = sst > 1e-12 * max(sst.max(), 1e-300)
    return {
        "mrr_anchors": float(np.mean(1 / anchors)),
        "mrr_all": float(np.mean(1 / everything)),
        "r10_all": float(np.mean(everything <= 10)),
        "knn10": knn_overlap(b, p, index),
        "r2_weighted": float(1 - sse.sum() / sst.sum()),
        "r2_scaled": float(np.mean(1 - sse[live] / sst[live])),
        "cosine": float(np.mean(np.sum(_unit(b).numpy() * _unit(p).numpy(), axis=1))),
    }


def heads(x_train: np.ndarray, y_train: np.ndarray, seed: int) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, C=1.0))
    mlp = make_pipeline(
        StandardScaler(),
        MLPClassifier(hidden_layer_sizes=(128,), alpha=1e-3, max_iter=200, early_stopping=True, random_state=seed),
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = LogisticRegression(max_iter=1000, C=1.0)  # the plain head many users train on raw embeddings
        return {"lr": lr.fit(x_train, y_train), "lr_raw": raw.fit(x_train, y_train), "mlp": mlp.fit(x_train, y_train)}


def head_scores(trained: dict, x_test: np.ndarray, y_test: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, f1_score

    out = {}
    for name, head in trained.items():
        predicted = head.predict(x_test)
        out[f"{name}_f1"] = float(f1_score(y_test, predicted, average="macro"))
        out[f"{name}_acc"] = float(accuracy_score(y_test, predicted))
    return out


def recall_at_10(queries: np.ndarray, index: np.ndarray, own: np.ndarray) -> float:
    return float(np.mean(own_ranks(queries, index, own) <= 10))


def pseudo_labels(target_train: np.ndarray, seed: int = 0) -> np.ndarray:
    """k-means clusters of the old model's train vectors (standard-scaled): a label-free stand-in task."""
    from sklearn.cluster import KMeans
    from sklearn.preprocessing import StandardScaler

    x = StandardScaler().fit_transform(target_train)
    return KMeans(PSEUDO_CLASSES, n_init=3, random_state=seed).fit_predict(x)


def pseudo_head(x_train: np.ndarray, labels: np.ndarray):
    import warnings

    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_pipeline(StandardScaler(), LogisticRegression(max_iter=300)).fit(x_train, labels)


def agreement(head, bridged: np.ndarray, partner: np.ndarray) -> float:
    return float(np.mean(head.predict(bridged) == head.predict(partner)))
