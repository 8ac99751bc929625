"""A reproduction's expected patterns, declared once (``Pattern``: the paper's claim, the paper's number, what our
number is, and the ``Rule`` that decides), judged on its measurements (``judge`` -> ``Verdict`` s); and the demo's
checks (``Expectation``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from latentstitch.experiments._tables import format_number

#: Comparison operators a ``Rule`` may use.
OPERATORS = (">=", "<=", ">", "<")


@dataclass(frozen=True)
class Rule:
    """``ours OP threshold`` decides whether a pattern holds (``unit`` is only for display: "x", " points")."""

    op: str
    threshold: float
    unit: str = ""

    def __post_init__(self):
        if self.op not in OPERATORS:
            raise ValueError(f"op: expected one of {', '.join(OPERATORS)}, got {self.op!r}")
        if not math.isfinite(self.threshold):
            raise ValueError(f"threshold: expected a finite number, got {self.threshold!r}")

    def holds(self, value: float | None) -> bool | None:
        """Whether ``value`` satisfies the rule; None when there is no value to judge (None or NaN)."""
        if value is None or math.isnan(float(value)):
            return None
        value = float(value)
        return {
            ">=": value >= self.threshold,
            "<=": value <= self.threshold,
            ">": value > self.threshold,
            "<": value < self.threshold,
        }[self.op]

    def text(self) -> str:
        return f"{self.op} {self.threshold:g}{self.unit}"


def at_least(threshold: float, unit: str = "") -> Rule:
    return Rule(">=", threshold, unit)


def at_most(threshold: float, unit: str = "") -> Rule:
    return Rule("<=", threshold, unit)


def above(threshold: float, unit: str = "") -> Rule:
    return Rule(">", threshold, unit)


def below(threshold: float, unit: str = "") -> Rule:
    return Rule("<", threshold, unit)


@dataclass(frozen=True)
class Pattern:
    """An expected pattern from the paper, declared once per reproduction.

    ``claim``: the pattern in words; ``paper``: the paper's number(s) for it (or what the paper says); ``measure``:
    what our number is; ``rule``: how our number decides it. ``headline`` patterns are also judged by the quick run
    (whose smaller setting is built to show them; CI fails when one does not hold there).
    """

    key: str
    claim: str
    paper: str
    measure: str
    rule: Rule
    headline: bool = False

    def judge(self, ours: float | None, detail: str = "") -> Verdict:
        """The verdict on our measured value (None or NaN: not computable, which does not hold)."""
        value = None if ours is None or (isinstance(ours, float) and math.isnan(ours)) else float(ours)
        holds = self.rule.holds(value)
        return Verdict(
            key=self.key,
            claim=self.claim,
            paper=self.paper,
            measure=self.measure,
            rule=self.rule.text(),
            ours=value,
            holds=bool(holds),
            detail=detail if holds is not None else (detail or "not computable in this run"),
            headline=self.headline,
        )


@dataclass
class Verdict:
    """A pattern judged on one run: our value beside the paper's, and whether the rule holds."""

    key: str
    claim: str
    paper: str
    measure: str
    rule: str
    ours: float | None
    holds: bool
    detail: str = ""
    headline: bool = False

    def line(self) -> str:
        status = "holds" if self.holds else "DOES NOT HOLD"
        text = (
            f"{self.claim}: {status} ({self.measure} {format_number(self.ours)}, rule {self.rule}; paper {self.paper})"
        )
        return text + (f"; {self.detail}" if self.detail else "")


def judge(patterns: list[Pattern] | tuple[Pattern, ...], measured: dict[str, Any], *, quick: bool) -> list[Verdict]:
    """Verdicts of ``patterns`` on ``measured`` (key -> value or (value, detail)); a quick run judges the headline
    patterns only. Every judged pattern must have a measurement (a missing key is a programming error)."""
    keys = [p.key for p in patterns]
    if len(set(keys)) != len(keys):
        raise ValueError(f"patterns: keys must be unique, got {keys}")
    verdicts = []
    for pattern in patterns:
        if quick and not pattern.headline:
            continue
        if pattern.key not in measured:
            raise KeyError(f"measured: no value for pattern {pattern.key!r}")
        entry = measured[pattern.key]
        ours, detail = entry if isinstance(entry, tuple) else (entry, "")
        verdicts.append(pattern.judge(ours, detail))
    return verdicts


@dataclass
class Expectation:
    """A check of the demo (not a reproduction: reproductions declare ``Pattern`` s and judge ``Verdict`` s)."""

    description: str
    holds: bool
    detail: str = ""

    def line(self) -> str:
        status = "holds" if self.holds else "DOES NOT HOLD"
        return f"{self.description}: {status}" + (f" ({self.detail})" if self.detail else "")
