"""Zero-shot cross-lingual stitching on a parallel labelled split: a head trained on one encoder's embeddings of the
training texts in one language reads another encoder's embeddings of the test texts in another language, either as
they are (absolute, where the widths agree) or through cosine similarities to the parallel anchors (relative: each
encoder embeds the anchors' text in its own language)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from latentstitch.data import ParallelSplit
from latentstitch.experiments._report import mean_std
from latentstitch.experiments._text import absolute_head, embed, macro_f1, relative_head, score
from latentstitch.relative import select_anchors


@dataclass(frozen=True)
class Pairing:
    """A head trained on ``decoder`` = (encoder, language), tested on ``encoder`` = (encoder, language)."""

    kind: str
    decoder: tuple[str, str]
    encoder: tuple[str, str]


def evaluate(
    split: ParallelSplit,
    pairings: list[Pairing],
    *,
    seeds: list[int],
    epochs: int,
    num_anchors: int,
    progress: bool,
    encoders: dict,
) -> list[dict]:
    """Macro-F1 and accuracy of every pairing, relative and absolute, one run per head seed."""
    n_train = len(split.y_train)
    texts = {lang: split.train[lang] + split.test[lang] for lang in split.languages}
    embeddings: dict[tuple[str, str], torch.Tensor] = {}
    for pairing in pairings:
        for model, lang in (pairing.decoder, pairing.encoder):
            if (model, lang) not in embeddings:
                embeddings[model, lang] = torch.from_numpy(
                    embed(model, texts[lang], progress=progress, encoders=encoders)
                )
    anchors = select_anchors(np.zeros((n_train, 1)), num_anchors, "random", seed=0)  # parallel texts
    y_train = torch.from_numpy(split.y_train)
    heads: dict[tuple, torch.nn.Module] = {}
    results = []
    for pairing in pairings:
        train_x = embeddings[pairing.decoder][:n_train]
        test_x = embeddings[pairing.encoder][n_train:]
        anchors_encoder = embeddings[pairing.encoder][:n_train][torch.as_tensor(anchors)]
        runs: dict[str, list[dict[str, float]]] = {"relative": [], "absolute": []}
        for seed in seeds:
            for route in ("relative", "absolute"):
                key = (*pairing.decoder, route, seed)
                if key not in heads:
                    heads[key] = (
                        relative_head(train_x, y_train, anchors, split.num_classes, seed=seed, epochs=epochs)
                        if route == "relative"
                        else absolute_head(train_x, y_train, split.num_classes, seed=seed, epochs=epochs)
                    )
            runs["relative"].append(
                score(heads[(*pairing.decoder, "relative", seed)], test_x, split.y_test, anchors_encoder)
            )
            if train_x.shape[1] == test_x.shape[1]:
                runs["absolute"].append(score(heads[(*pairing.decoder, "absolute", seed)], test_x, split.y_test))
        results.append(
            {"kind": pairing.kind, "decoder": list(pairing.decoder), "encoder": list(pairing.encoder), "runs": runs}
        )
    return results


def f1(result: dict, route: str) -> float | None:
    """Mean macro-F1 x 100 of a pairing's route (None where it is undefined)."""
    runs = result["runs"][route]
    return 100 * float(np.mean([r["macro_f1"] for r in runs])) if runs else None


def cell(result: dict, route: str):
    runs = result["runs"][route]
    return mean_std([100 * r["macro_f1"] for r in runs]) if runs else None


def majority_f1(split: ParallelSplit) -> float:
    """Macro-F1 x 100 of always predicting the most frequent training class."""
    y = split.y_test
    majority = np.bincount(split.y_train, minlength=split.num_classes).argmax()
    return 100 * macro_f1(y, np.full_like(y, majority))
