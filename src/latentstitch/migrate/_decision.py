"""Which arrangement to choose, on what the user will see: the migration (the chosen mode), **doing nothing** (the
old model end to end: old queries against the old index) and a **full re-embed** (the new model end to end), all
three on the same queries over the same documents (the re-embedded sample, the only documents whose new vectors
exist).

The figure: with labelled queries, each query's Recall@10 (its relevant document in its top 10); without them, each
held-out re-embedded item is a query with its new vector, judged by the overlap of its top 10 (itself left out) with
the full re-embed's own top 10 among the known documents (Drift-Adapter's protocol): the full re-embed scores 1 by
construction, and an item finding itself is never the figure.

The rule, on paired percentile-bootstrap intervals over queries (``bootstrap_difference`` of per-query
differences):

- the migration clearly below doing nothing: **keep the old model** (or, when a full re-embed is clearly better
  than the old model on labelled queries, **re-embed everything**): a migration is never advised when doing nothing
  scores better;
- the new model not clearly better than the old end to end (labelled queries): **keep the old model**;
- the migration not clearly above doing nothing: **re-embed everything** when that is clearly better than the old
  model, else cannot tell;
- an index of at most ``small_index`` items where a full re-embed is clearly better than the migration: **re-embed
  everything** (re-embedding costs less than what the migration loses);
- the migration clearly keeps at least ``keep`` of the full re-embed's figure (``M - keep R`` above 0): **migrate**;
- clearly below ``keep``: **re-embed everything**; otherwise it cannot tell, and says so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from latentstitch.migrate._retrieval import Interval, bootstrap_difference, bootstrap_mean

#: The share of a full re-embed's figure a migration must keep to be advised (issue 40: rebasis's single-stage
#: bridges keep ~0.71 of a full re-index; a user who re-embeds expects the new model's answers).
KEEP = 0.95
#: An index of at most this many items is re-embedded rather than migrated when the migration loses anything
#: measurable: embedding 10,000 short texts takes minutes on one CPU.
SMALL_INDEX = 10_000

CHOICES = ("keep the old model", "migrate", "re-embed everything", "cannot tell")


@dataclass(frozen=True)
class Decision:
    """The advice (one of ``CHOICES``), its sentence, the figure it read, and each arrangement's interval."""

    choice: str
    sentence: str
    measure: str
    queries: str
    mode: str
    arrangements: dict[str, Interval]
    differences: dict[str, Interval]

    def to_dict(self) -> dict[str, Any]:
        return {
            "choice": self.choice,
            "sentence": self.sentence,
            "measure": self.measure,
            "queries": self.queries,
            "mode": self.mode,
            "arrangements": {k: v.to_dict() for k, v in self.arrangements.items()},
            "differences": {k: v.to_dict() for k, v in self.differences.items()},
        }


def _words(name: str, value: Interval) -> str:
    return f"{name} {value.mean:.3f} [{value.low:.3f}, {value.high:.3f}]"


def decide(
    migrated: np.ndarray,
    old: np.ndarray,
    reembedded: np.ndarray,
    *,
    mode: str,
    labelled: bool,
    n_index: int,
    rng: np.random.Generator,
    level: float = 0.95,
    keep: float = KEEP,
    small_index: int = SMALL_INDEX,
) -> Decision:
    """The advice from per-query figures of the three arrangements on the same queries (see the module docstring)."""
    migrated, old, reembedded = (np.asarray(v, dtype=float) for v in (migrated, old, reembedded))
    measure = "Recall@10" if labelled else "overlap@10 with the full re-embed's top 10"
    queries = "labelled queries" if labelled else "held-out re-embedded items as queries"
    arrangements = {
        f"migrate ({mode}-side)": bootstrap_mean(migrated, rng, level),
        "keep the old model": bootstrap_mean(old, rng, level),
        "re-embed everything": bootstrap_mean(reembedded, rng, level),
    }
    edge = bootstrap_difference(migrated - old, rng, level)  # the migration against doing nothing
    gain = bootstrap_difference(reembedded - old, rng, level)  # the new model end to end against the old
    kept = bootstrap_difference(migrated - keep * reembedded, rng, level)  # above 0: keeps at least ``keep``
    differences = {"migrate - keep the old model": edge, "re-embed - keep the old model": gain}
    differences[f"migrate - {keep:g} x re-embed"] = kept
    new_better = gain.low > 0 if labelled else True  # without labels the new model's own answers are the reference
    shown = "; ".join(_words(name, value) for name, value in arrangements.items())
    ratio = arrangements[f"migrate ({mode}-side)"].mean / max(arrangements["re-embed everything"].mean, 1e-12)
    if edge.high < 0:
        choice = "re-embed everything" if labelled and new_better else "keep the old model"
        why = "the migration scores below doing nothing"
    elif labelled and gain.high < 0:
        choice, why = "keep the old model", "the new model scores below the old one end to end"
    elif labelled and not new_better and edge.low <= 0:
        choice, why = "keep the old model", "neither the migration nor a full re-embed is measurably better"
    elif edge.low <= 0:
        choice = "re-embed everything" if new_better else "cannot tell"
        why = "the migration is not measurably better than doing nothing"
    elif n_index <= small_index and bootstrap_difference(reembedded - migrated, rng, level).low > 0:
        choice = "re-embed everything"
        why = f"the index holds only {n_index:,} items: re-embedding them costs less than what the migration loses"
    elif kept.low > 0:
        choice, why = "migrate", f"it keeps at least {keep:.0%} of a full re-embed's {measure}"
    elif kept.high < 0:
        choice, why = "re-embed everything", f"the migration keeps {ratio:.0%}, below {keep:.0%}, of a full re-embed"
    else:
        choice = "cannot tell"
        why = (
            f"the migration keeps {ratio:.0%} of a full re-embed, not measurably above or below {keep:.0%}; "
            "re-embed and hold out more items, or give labelled queries"
        )
    label = f"migrate ({mode}-side)" if choice == "migrate" else choice
    caveat = "" if labelled else " (without labelled queries the new model is taken to be the better one)"
    sentence = f"{label}: {why}{caveat}. {measure} on {len(migrated)} {queries}: {shown}."
    return Decision(choice, sentence, measure, queries, mode, arrangements, differences)
