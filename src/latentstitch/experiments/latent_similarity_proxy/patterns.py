"""The paper's pattern: similarity to the best model's relative space predicts validation accuracy."""

from __future__ import annotations

from typing import Any

from latentstitch.experiments._report import Pattern, at_least

PAPER_PEARSON = 0.955  # /work/shared/papers/relative-representations.md (recalled, low confidence: methods §1)
STRONG = 0.8  # a strong positive correlation, fixed before running


def patterns() -> list[Pattern]:
    return [
        Pattern(
            "across-models",
            "similarity to the best model tracks validation accuracy across models",
            f"Pearson {PAPER_PEARSON} (Cora, ~2,000 GNNs)",
            "Pearson r across models",
            at_least(STRONG),
            headline=True,
        ),
        Pattern(
            "per-run",
            "the paper's score: within each run over its epochs, mean over runs",
            f"Pearson {PAPER_PEARSON}",
            "mean per-run Pearson r",
            at_least(STRONG),
        ),
    ]


def measure(scores: dict[str, Any]) -> dict[str, Any]:
    return {
        "across-models": (scores["pearson"], f"Spearman {scores['spearman']:.3f}"),
        "per-run": (scores["per_run_pearson"], f"over {len(scores['per_run_pearson_values'])} runs with a defined r"),
    }
