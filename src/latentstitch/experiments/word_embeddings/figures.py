"""The figures: the 5 nearest words of a few query words (own spaces, absolute and relative cross-space), and the
retrieval metrics of both pairs of spaces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.figures import pyplot, save_figure
from latentstitch.experiments.word_embeddings.retrieval import NUM_ANCHORS, K, zero_pad
from latentstitch.experiments.word_embeddings.vocabularies import SpacePair
from latentstitch.relative import relative_projection

# Query words of the neighbourhood figure, fixed before any result was seen.
FIGURE_WORDS = ("music", "water", "economy", "football", "doctor", "river", "king", "government")


def _top_words(query: np.ndarray, index: np.ndarray, words: list[str], k: int = K) -> list[str]:
    q = query / np.linalg.norm(query)
    scores = (index / np.linalg.norm(index, axis=1, keepdims=True)) @ q
    return [words[i] for i in np.argsort(-scores)[:k]]


def plot_neighbourhoods(pair: SpacePair, anchors: np.ndarray, path: Path) -> str:
    """The 5 nearest words of a few query words within each space, and space 1's vector of the word searched in
    space 2's index, absolute (zero-padded when narrower) and relative (anchors of seed 0)."""
    plt = pyplot()
    first, second = pair.names
    x, y = pair.vectors[first], pair.vectors[second]
    rel = {name: relative_projection(v, v[anchors]) for name, v in pair.vectors.items()}
    width = max(x.shape[1], y.shape[1])
    position = {w: i for i, w in enumerate(pair.words)}
    queries = [w for w in FIGURE_WORDS if w in position][:6] or pair.words[:6]
    columns = [
        f"{first}, own space",
        f"{second}, own space (target)",
        f"{first} query in {second} index:\nabsolute",
        f"{first} query in {second} index:\nrelative ({NUM_ANCHORS} anchors)",
    ]
    cells = []
    for word in queries:
        i = position[word]
        target = _top_words(y[i], y, pair.words)
        lists = [
            _top_words(x[i], x, pair.words),
            target,
            _top_words(zero_pad(x, width)[i], zero_pad(y, width), pair.words),
            _top_words(rel[first][i], rel[second], pair.words),
        ]
        cells.append([", ".join(f"[{w}]" if (j >= 2 and w in target) else w for w in ws) for j, ws in enumerate(lists)])
    figure, axes = plt.subplots(figsize=(19, 1.2 + 0.55 * len(queries)))
    axes.axis("off")
    table = axes.table(cellText=cells, rowLabels=queries, colLabels=columns, loc="center", cellLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(8.5)
    table.scale(1.0, 2.1)
    axes.set_title(
        f"{first} vs {second}: 5 nearest words (cosine) of a few query words; [brackets]: also in {second}'s own top "
        "5 (the retrieval target)",
        fontsize=11,
    )
    figure.tight_layout()
    return save_figure(figure, path, dpi=100)


def plot_metrics(results: dict[str, dict[str, Any]], names: dict[str, str], path: Path) -> str:
    """Grouped bars per pair and direction: Jaccard@5, MRR and cosine, absolute vs relative (plain and centred)."""
    plt = pyplot()
    metrics = ("Jaccard@5", "MRR@5", "cosine")
    panels = [(key, d) for key, result in results.items() for d in result["absolute"]]
    figure, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.4), sharey=True, squeeze=False)
    width = 0.25
    for ax, (key, direction) in zip(axes[0], panels, strict=True):
        result = results[key]
        x = np.arange(len(metrics))
        bars = {"absolute": ([result["absolute"][direction][i] for i in range(3)], [0.0] * 3)}
        for variant, label in (("plain", "relative"), ("centred", "relative, anchor-centred")):
            runs = result["relative"][variant][direction]
            bars[label] = (
                [np.mean([r[i] for r in runs]) for i in range(3)],
                [np.std([r[i] for r in runs]) for i in range(3)],
            )
        for j, (label, (means, stds)) in enumerate(bars.items()):
            ax.bar(x + (j - 1) * width, means, width, yerr=stds, label=label, capsize=3)
        ax.set_xticks(x, metrics)
        ax.set_title(
            f"{names[key]}\nquery {direction.split(' -> ')[0]}, index {direction.split(' -> ')[1]}", fontsize=9
        )
        ax.set_ylim(-0.05, 1.05)
        ax.axhline(0, color="black", linewidth=0.6)
    axes[0, 0].set_ylabel("value (mean ± std over anchor seeds)")
    axes[0, 0].legend(loc="upper left", fontsize=8)
    figure.suptitle("Cross-space retrieval of the same word (k = 5): absolute vs relative representations")
    figure.tight_layout()
    return save_figure(figure, path, dpi=100)


def plot_count_sweep(sweep: dict[int, dict[str, Any]], names: tuple[str, str], path: Path) -> str:
    """Relative Jaccard@5 and MRR (both directions) against the minimum corpus count of the search words."""
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(7, 4.2))
    counts = list(sweep)
    first, second = names
    for direction, style in ((f"{first} -> {second}", "-"), (f"{second} -> {first}", "--")):
        for index, (metric, label) in enumerate(((0, "Jaccard@5"), (1, "MRR"))):
            values = [np.mean([r[metric] for r in sweep[c]["relative"]["plain"][direction]]) for c in counts]
            ax.plot(counts, values, style, marker="o", color=f"C{index}", label=f"{label}, {direction}")
    ax.set_xscale("log")
    ax.set_xticks(counts, [f">= {c}\n({sweep[c]['words']:,} words)" for c in counts])
    ax.minorticks_off()
    ax.set_xlabel("search words: seen at least this many times in the 1.6M-token corpus")
    ax.set_ylabel("relative retrieval (mean over anchor seeds)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    ax.set_title("fastText vs word2vec trained on the same small corpus: better vectors, better alignment", fontsize=10)
    figure.tight_layout()
    return save_figure(figure, path, dpi=100)
