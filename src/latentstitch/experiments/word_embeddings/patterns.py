"""The paper's Table 1 patterns, declared once for each pair of spaces, and our numbers for them."""

from __future__ import annotations

from typing import Any

from latentstitch.experiments._report import Pattern, at_least, below
from latentstitch.experiments.word_embeddings.retrieval import relative_means

#: Pairs of spaces: key -> display name.
PAIRS = {"ft-w2v": "fastText vs word2vec (gensim, same text)", "glove-spacy": "GloVe-50d vs spaCy-300d"}
NEAR_ZERO = 0.05
FAR_ABOVE = 10.0


def patterns() -> list[Pattern]:
    declared = []
    for key, name in PAIRS.items():
        declared += [
            Pattern(
                f"{key}-absolute-near-zero",
                f"{name}: absolute cross-space retrieval fails (Jaccard@5, MRR ~ 0)",
                "0.00 / 0.00",
                "largest absolute Jaccard@5 or MRR",
                below(NEAR_ZERO),
                headline=True,
            ),
            Pattern(
                f"{key}-relative-far-above",
                f"{name}: relative far above absolute and chance",
                "0.34-0.39 / 0.94-0.98 vs 0.00",
                "smallest relative / max(absolute, chance) (Jaccard, MRR)",
                at_least(FAR_ABOVE, "x"),
                headline=True,
            ),
            Pattern(
                f"{key}-relative-jaccard-level",
                f"{name}: relative Jaccard@5 at the paper's level",
                "0.34 (FT -> W2V), 0.39 (W2V -> FT)",
                "smallest relative Jaccard@5",
                at_least(0.3),
            ),
            Pattern(
                f"{key}-relative-mrr-level",
                f"{name}: relative MRR at the paper's level",
                "0.94 (FT -> W2V), 0.98 (W2V -> FT)",
                "smallest relative MRR",
                at_least(0.9),
            ),
        ]
    return declared


def measure(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, result in results.items():
        means = relative_means(result)
        absolute = result["absolute"] | result["equal_width_controls"]
        largest = max(max(v[0], v[1]) for v in absolute.values())
        chance = result["chance"]
        ratios = {
            (d, metric): means[d][i] / max(result["absolute"][d][i], chance[i])
            for d in means
            for i, metric in enumerate(("Jaccard", "MRR"))
        }
        weakest = min(ratios, key=ratios.get)
        described = "; ".join(f"{d}: Jaccard {v[0]:.2f}, MRR {v[1]:.2f}, cosine {v[2]:.2f}" for d, v in means.items())
        out[f"{key}-absolute-near-zero"] = (largest, f"over {len(absolute)} absolute cross-space rows")
        out[f"{key}-relative-far-above"] = (
            ratios[weakest],
            f"weakest: {weakest[1]} {weakest[0]}; relative {described}; chance Jaccard {chance[0]:.4f}, MRR "
            f"{chance[1]:.4f} over {result['words']} words",
        )
        out[f"{key}-relative-jaccard-level"] = (min(v[0] for v in means.values()), described)
        out[f"{key}-relative-mrr-level"] = (min(v[1] for v in means.values()), described)
    return out
