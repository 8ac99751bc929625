"""The certificate: a dataclass with ``to_dict()`` (its JSON, ``"kind": "migration"``, read by ``latentstitch
report``), its tables, and its charts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from latentstitch._core.atomic import atomic_path
from latentstitch._core.tables import table
from latentstitch.migrate._migration import curve_measures

MEASURES = ("recall@1", "recall@10", "mrr@10", "ndcg@10")


@dataclass
class Certificate:
    mode: str
    metric: str
    metric_assumed: str
    level: float
    n_index: int
    n_fit: int
    n_holdout: int
    measures: dict[str, Any]
    thresholds: list[dict[str, Any]] = field(default_factory=list)
    confidence: dict[str, Any] | None = None
    curve: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    learning: dict[str, Any] | None = None
    #: Which arrangement to choose (``migrate._decision.Decision.to_dict``): the headline.
    decision: dict[str, Any] | None = None

    def recall10(self, query_set: str = "documents") -> dict[str, float]:
        """The chosen mode's whole-index Recall@10 interval (what the untouched rest of the corpus will see)."""
        rows = self.measures[query_set]["whole_index"]
        return next(v["recall@10"] for k, v in rows.items() if k.endswith("(chosen)"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "migration",
            "decision": self.decision,
            "mode": self.mode,
            "metric": self.metric,
            "metric_assumed": self.metric_assumed,
            "level": self.level,
            "n_index": self.n_index,
            "n_fit": self.n_fit,
            "n_holdout": self.n_holdout,
            "measures": self.measures,
            "thresholds": self.thresholds,
            "confidence": self.confidence,
            "curve": self.curve,
            "learning": self.learning,
            "notes": self.notes,
            "tables": self.tables(),
        }

    def tables(self) -> list[dict[str, Any]]:
        out = []
        if self.decision:
            d = self.decision
            out.append(
                table(
                    f"decision: {d['choice']}",
                    ["arrangement", d["measure"], "interval"],
                    [
                        [k, f"{v['mean']:.3f}", f"[{v['low']:.3f}, {v['high']:.3f}]"]
                        for k, v in d["arrangements"].items()
                    ],
                    d["sentence"] + f" {self.level:.0%} intervals over queries; the three on the re-embedded sample.",
                )
            )
        for name, measured in self.measures.items():
            for universe, title in (("whole_index", "whole index"), ("sample", "re-embedded sample")):
                rows = []
                for setup, values in measured[universe].items():
                    cells = [setup]
                    for measure in MEASURES:
                        v = values[measure]
                        cells.append(f"{v['mean']:.3f} [{v['low']:.3f}, {v['high']:.3f}]")
                    extra = values.get("overlap with old model") or values.get("overlap with reference")
                    cells.append("" if extra is None else f"{extra['mean']:.3f}")
                    ratio = values.get("recall@10 / reference")
                    cells.append("" if ratio is None else f"{ratio:.3f}")
                    rows.append(cells)
                note = (
                    f"{measured['n']} held-out {name}; {self.level:.0%} intervals over queries "
                    "(Wilson's for recall, bootstrap for the others). Overlap: "
                    + (
                        "top-10 shared with the old model end to end."
                        if universe == "whole_index"
                        else "top-10 shared with the re-embedded reference (the new model end to end)."
                    )
                )
                out.append(
                    table(
                        f"{name}: {title}",
                        ["setup", *MEASURES, "top-10 overlap", "R@10 / reference"],
                        rows,
                        note,
                    )
                )
        if self.thresholds:
            out.append(
                table(
                    "threshold remapping",
                    ["cut-off", "space", "bridged cut-off", "interval", "kept", "decisions changed"],
                    [
                        [
                            t["threshold"],
                            t["space"],
                            t["bridged_threshold"],
                            f"[{t['interval'][0]:.4f}, {t['interval'][1]:.4f}]",
                            t["share_kept"],
                            t["decisions_changed"],
                        ]
                        for t in self.thresholds
                    ],
                    "Mapped by quantiles over (query, top-10 document) pairs of the re-embedded sample.",
                )
            )
        if self.curve:
            out.append(
                table(
                    "Recall@10 against the share re-embedded (corpus-side)",
                    ["share re-embedded", "lowest confidence first", "at random"],
                    [
                        list(r)
                        for r in zip(
                            self.curve["share"], self.curve["by_confidence"], self.curve["at_random"], strict=False
                        )
                    ],
                    "Held-out queries over the whole index.",
                )
            )
        if self.learning:
            measures = curve_measures(self.learning, "learning")
            out.append(
                table(
                    f"learning curve of the fit ({self.mode}-side)",
                    ["fit pairs", *[m.label for m in measures]],
                    [
                        [f"{pairs:,.0f}", *[f"{self.learning[m.key][i]:.3f}" for m in measures]]
                        for i, pairs in enumerate(self.learning["pairs"])
                    ],
                    "Each cross-validation fold's bridge fitted on a quarter, a half and all of its training pairs; "
                    "held out: the re-embedded documents as queries and, when labelled, the fit's queries.",
                )
            )
        return out

    def charts(self, folder: Path, stem: str = "certificate") -> dict[str, Path]:
        """PNG charts beside the certificate: the measures per setup, and the re-embedding curve."""
        from latentstitch._core.figures import pyplot, save_figure

        plt = pyplot()
        written: dict[str, Path] = {}
        measured = self.measures["queries" if "queries" in self.measures else "documents"]
        setups = list(measured["whole_index"].items())
        figure, axis = plt.subplots(figsize=(9, 3.2))
        width = 0.8 / len(setups)
        for i, (setup, values) in enumerate(setups):
            means = [values[m]["mean"] for m in MEASURES]
            errors = [
                [values[m]["mean"] - values[m]["low"] for m in MEASURES],
                [values[m]["high"] - values[m]["mean"] for m in MEASURES],
            ]
            axis.bar([j + i * width for j in range(len(MEASURES))], means, width, yerr=errors, label=setup, capsize=2)
        axis.set_xticks([j + 0.4 - width / 2 for j in range(len(MEASURES))], MEASURES)
        axis.set_ylim(0, 1.05)
        axis.set_title("Retrieval over the whole index (held-out items)")
        axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
        figure.tight_layout()
        path = folder / f"{stem}-measures.png"
        with atomic_path(path, option="folder") as temporary:
            save_figure(figure, temporary)
        written["Retrieval measures with bootstrap intervals"] = path
        if self.curve:
            figure, axis = plt.subplots(figsize=(5, 3.2))
            axis.plot(self.curve["share"], self.curve["by_confidence"], marker="o", label="lowest confidence first")
            axis.plot(self.curve["share"], self.curve["at_random"], marker="x", linestyle="--", label="at random")
            axis.set_xlabel("share of the corpus re-embedded")
            axis.set_ylabel("Recall@10 (held-out)")
            axis.legend(fontsize=8)
            figure.tight_layout()
            path = folder / f"{stem}-curve.png"
            with atomic_path(path, option="folder") as temporary:
                save_figure(figure, temporary)
            written["Recall@10 against the share re-embedded"] = path
        return written
