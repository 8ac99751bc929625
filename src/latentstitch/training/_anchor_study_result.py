"""The result of ``anchor_study``: one record per (strategy, number of anchors, seed), as a summary, a Markdown
table, JSON and a two-panel plot."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from latentstitch._core.atomic import write_text
from latentstitch._core.figures import pyplot, save_figure


@dataclass
class AnchorStudy:
    """The result of ``anchor_study``: one record per (strategy, number of anchors, seed).

    Each record holds ``strategy``, ``n_anchors``, ``seed`` and the test accuracies ``a_to_b`` (classifier trained
    on space A, reading space B), ``b_to_a``, ``a_to_a``, ``b_to_b``, with ``stitched`` = mean of ``a_to_b`` and
    ``b_to_a`` and ``non_stitched`` = mean of ``a_to_a`` and ``b_to_b``.
    """

    records: list[dict[str, Any]]
    settings: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> list[dict[str, Any]]:
        """Mean and (population) standard deviation over seeds for every (strategy, n_anchors)."""
        groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for record in self.records:
            groups.setdefault((record["strategy"], record["n_anchors"]), []).append(record)
        out = []
        for (strategy, n), runs in groups.items():
            row: dict[str, Any] = {"strategy": strategy, "n_anchors": n, "runs": len(runs)}
            for key in ("stitched", "non_stitched", "a_to_b", "b_to_a"):
                values = np.array([r[key] for r in runs])
                row[key] = float(values.mean())
                row[f"{key}_std"] = float(values.std())
            out.append(row)
        return out

    def to_markdown(self) -> str:
        lines = [
            "| strategy | anchors | stitched (mean of both directions) | A -> B | B -> A | non-stitched |",
            "|---|---|---|---|---|---|",
        ]
        for row in self.summary():
            lines.append(
                f"| {row['strategy']} | {row['n_anchors']} | {row['stitched']:.3f} ± {row['stitched_std']:.3f} | "
                f"{row['a_to_b']:.3f} | {row['b_to_a']:.3f} | {row['non_stitched']:.3f} |"
            )
        return "\n".join(lines)

    def to_json(self, path: str | Path) -> None:
        write_text(path, json.dumps({"settings": self.settings, "records": self.records}, indent=1) + "\n")

    def plot(self, path: str | Path, title: str | None = None) -> Path:
        """Two panels against the number of anchors (log scale), one line per strategy with its spread over seeds:
        zero-shot stitched accuracy, and non-stitched accuracy (the ceiling). Written as PNG."""
        plt = pyplot()
        summary = self.summary()
        strategies = list(dict.fromkeys(row["strategy"] for row in summary))
        figure, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
        colours = plt.get_cmap("tab10")
        for index, strategy in enumerate(strategies):
            rows = sorted((r for r in summary if r["strategy"] == strategy), key=lambda r: r["n_anchors"])
            n = np.array([r["n_anchors"] for r in rows])
            for axis, key in zip(axes, ("stitched", "non_stitched"), strict=True):
                mean = np.array([r[key] for r in rows])
                spread = np.array([r[f"{key}_std"] for r in rows])
                axis.plot(n, mean, "o-", color=colours(index), label=strategy, linewidth=1.6, markersize=4)
                axis.fill_between(n, mean - spread, mean + spread, color=colours(index), alpha=0.15, linewidth=0)
        chance = self.settings.get("chance")
        counts = sorted({row["n_anchors"] for row in summary})
        for axis, label in zip(
            axes, ("zero-shot stitched (mean of A→B and B→A)", "non-stitched (mean of A→A and B→B)"), strict=True
        ):
            axis.set_xscale("log")
            axis.set_xticks(counts, [str(n) for n in counts])
            axis.minorticks_off()
            axis.set_xlabel("number of anchors")
            axis.set_title(label, fontsize=11)
            axis.grid(alpha=0.3)
            if chance is not None:
                axis.axhline(chance, color="grey", linestyle=":", linewidth=1, label="chance")
        axes[0].set_ylabel("test accuracy")
        axes[1].legend(title="anchor strategy", fontsize=9, loc="center left", bbox_to_anchor=(1.02, 0.5))
        figure.suptitle(title or self.settings.get("title", "anchor study"), fontsize=12)
        figure.tight_layout()
        out = Path(path)
        save_figure(figure, out, dpi=110)
        return out
