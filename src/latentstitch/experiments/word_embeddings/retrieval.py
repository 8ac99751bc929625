"""Cross-space retrieval (methods §1): for every search word w, space 1's vector of w queries the index of space 2;
Jaccard@5 of the neighbourhood it retrieves vs space 2's own, MRR of w itself, and the cosine of matched vectors
(inner product of L2-normalised vectors, k = 5). Absolute: the vectors themselves; relative: cosine similarities
to parallel anchor words (the same words in both spaces)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentstitch.experiments._report import mean_std
from latentstitch.experiments.word_embeddings.vocabularies import SpacePair
from latentstitch.relative import relative_projection, select_anchors
from latentstitch.similarity import jaccard_at_k, matched_cosine, mrr

K = 5
NUM_ANCHORS = 300
METRICS = ("jaccard", "mrr", "cosine")


def zero_pad(x: np.ndarray, width: int) -> np.ndarray:
    """``x`` with zero columns appended up to ``width`` (the narrower space embedded in the wider one)."""
    return np.pad(x, ((0, 0), (0, width - x.shape[1])))


def retrieval(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Jaccard@5, MRR@5 and mean matched cosine of ``x`` queries against the index of ``y`` (methods §1)."""
    return float(jaccard_at_k(x, y, K)), float(mrr(x, y, k=K)), float(matched_cosine(x, y))


def chance(n: int) -> tuple[float, float]:
    """Jaccard@5 and MRR@5 of a random ranking of ``n`` words: w lands at each of the top 5 ranks with probability
    1/n, and K^2/n of the K words are shared with the target's top K on average (Jaccard ~ (K^2/n) / (2K))."""
    return (K * K / n) / (2 * K), float(np.sum(1.0 / np.arange(1, K + 1))) / n


def evaluate(pair: SpacePair, seeds: list[int], *, progress: bool, description: str) -> dict[str, Any]:
    """Absolute retrieval both ways (the narrower space zero-padded when the widths differ, with a control at
    equal width: the wider space reduced to the narrower width by its own PCA), same-space retrieval, and relative
    retrieval (plain and anchor-centred) for every anchor seed."""
    from sklearn.decomposition import PCA

    from latentstitch._core.progress import new_progress

    first, second = pair.names
    x, y = pair.vectors[first], pair.vectors[second]
    width = max(x.shape[1], y.shape[1])
    absolute = {
        f"{first} -> {second}": retrieval(zero_pad(x, width), zero_pad(y, width)),
        f"{second} -> {first}": retrieval(zero_pad(y, width), zero_pad(x, width)),
    }
    controls = {}
    if x.shape[1] != y.shape[1]:
        (narrow_name, narrow), (wide_name, wide) = sorted(((first, x), (second, y)), key=lambda item: item[1].shape[1])
        reduced = PCA(n_components=narrow.shape[1], random_state=0).fit_transform(wide).astype(np.float32)
        label = f"{wide_name}-PCA{narrow.shape[1]}"
        controls = {
            f"{narrow_name} -> {label}": retrieval(narrow, reduced),
            f"{label} -> {narrow_name}": retrieval(reduced, narrow),
        }
    same_space = {f"{name} -> {name}": retrieval(v, v) for name, v in pair.vectors.items()}
    relative: dict[str, dict[str, list[tuple[float, float, float]]]] = {"plain": {}, "centred": {}}
    with new_progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(description, total=len(seeds))
        for seed in seeds:
            anchors = select_anchors(x, NUM_ANCHORS, "random", seed=seed)  # parallel: the same words in both
            for variant, center in (("plain", False), ("centred", True)):
                rel = {
                    name: relative_projection(torch.from_numpy(v), torch.from_numpy(v[anchors]), center=center)
                    for name, v in pair.vectors.items()
                }
                for a, b in ((first, second), (second, first)):
                    relative[variant].setdefault(f"{a} -> {b}", []).append(retrieval(rel[a], rel[b]))
            bar.advance(task)
    return {
        "words": len(pair.words),
        "seeds": seeds,
        "absolute": absolute,
        "equal_width_controls": controls,
        "same_space": same_space,
        "relative": relative,
        "chance": chance(len(pair.words)),
    }


def relative_means(result: dict[str, Any], variant: str = "plain") -> dict[str, list[float]]:
    """Per direction: mean over seeds of (Jaccard, MRR, cosine)."""
    return {
        d: [float(np.mean([r[i] for r in runs])) for i in range(3)] for d, runs in result["relative"][variant].items()
    }


def summary(runs: list[tuple[float, float, float]]) -> list[tuple[float, float]]:
    return [mean_std([r[i] for r in runs]) for i in range(3)]


def as_json(result: dict[str, Any]) -> dict[str, Any]:
    """The numbers with named metrics."""

    def named(values):
        return dict(zip(METRICS, values, strict=True))

    return {
        "words": result["words"],
        "seeds": result["seeds"],
        "chance_jaccard_mrr": list(result["chance"]),
        "absolute": {d: named(v) for d, v in result["absolute"].items()},
        "equal_width_controls": {d: named(v) for d, v in result["equal_width_controls"].items()},
        "same_space": {d: named(v) for d, v in result["same_space"].items()},
        "relative": {
            variant: {d: [named(r) for r in runs] for d, runs in v.items()} for variant, v in result["relative"].items()
        },
    }
