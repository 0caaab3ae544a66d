"""The regression gate: thresholds such as ``p95_wait>+5%`` checked against a comparison.

A threshold names a metric, the direction in which it must not move, and how far it may move:

- ``METRIC>+N%``: fail if the metric rises by more than N percent of the baseline (for metrics
  where higher is worse: waits, iterations, pages);
- ``METRIC<-N%``: fail if it falls by more than N percent (for metrics where lower is worse:
  utilization);
- ``METRIC>+N`` and ``METRIC<-N``: the same in the metric's own unit (``iterations>+3``).

The sign is required and must agree with the direction, so a threshold reads as the change it
forbids; ``p95_wait>-5%`` would fail on an unchanged result and is refused. "More than" is
strict: ``p95_wait>+0%`` allows no rise at all and lets an unchanged result pass.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import numbers
from .compare import Comparison, MetricChange

_METRIC = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_AMOUNT = re.compile(r"[0-9]+(\.[0-9]+)?")
FORM = "METRIC>+N% or METRIC<-N% (or without % for an absolute change), e.g. 'p95_wait>+5%'"


class ThresholdError(ValueError):
    """A --fail-on threshold is malformed or names a metric the results lack."""


@dataclass(frozen=True)
class Threshold:
    metric: str
    rise: bool
    """True for '>' (fail on a rise), False for '<' (fail on a fall)."""
    limit: float
    """How far the metric may move in the forbidden direction, >= 0."""
    percent: bool
    """Whether ``limit`` is a percentage of the baseline or an amount in the metric's unit."""
    text: str

    def breached_by(self, change: MetricChange) -> bool:
        moved = change.percent if self.percent else change.delta
        return moved > self.limit if self.rise else moved < -self.limit

    def describe(self) -> str:
        amount = f"{self.limit:g}%" if self.percent else f"{self.limit:g}"
        return f"{self.metric} may {'rise' if self.rise else 'fall'} by at most {amount}"


@dataclass(frozen=True)
class Breach:
    threshold: Threshold
    change: MetricChange


@dataclass(frozen=True)
class GateVerdict:
    thresholds: tuple[Threshold, ...]
    checked: tuple[int, ...]
    """Per threshold, how many (case, metric) changes it was checked against."""
    breaches: tuple[Breach, ...]
    failures: tuple[tuple[Threshold, str], ...] = ()
    """(threshold, case label) where the candidate's benchmark failed: no figure, no pass."""
    incomplete: tuple[str, ...] = ()
    """Candidate runs that faulted or starved, described. Their figures are partial (no wait
    for a request never admitted) and can look better than the baseline's, so they never pass."""

    @property
    def passed(self) -> bool:
        return not self.breaches and not self.failures and not self.incomplete

    @property
    def problems(self) -> list[str]:
        """Every reason the gate failed, one sentence each."""
        return (
            [describe_breach(b) for b in self.breaches]
            + [describe_failure(t, label) for t, label in self.failures]
            + list(self.incomplete)
        )


def parse_threshold(text: str) -> Threshold:
    """Parse one ``--fail-on`` value; a bad one raises :class:`ThresholdError` naming the part."""
    operators = [ch for ch in text if ch in "<>="]
    if not operators:
        raise ThresholdError(f"'{text}' has no '>' or '<'; expected {FORM}")
    if "=" in operators:
        raise ThresholdError(
            f"'{text}': '=' is not part of a threshold; the gate fails when the change is "
            f"strictly beyond the limit, so write '>' or '<' ({FORM})"
        )
    if len(operators) > 1:
        raise ThresholdError(f"'{text}' has more than one '>' or '<'; expected {FORM}")
    operator = operators[0]
    name, _, limit = (part.strip() for part in text.partition(operator))
    if not name:
        raise ThresholdError(f"'{text}' names no metric before '{operator}'; expected {FORM}")
    if not _METRIC.fullmatch(name):
        raise ThresholdError(f"'{text}': '{name}' is not a metric name; expected {FORM}")
    rise = operator == ">"
    sign = "+" if rise else "-"
    if not limit:
        raise ThresholdError(f"'{text}' has no limit after '{operator}'; expected {FORM}")
    if limit[0] not in "+-":
        raise ThresholdError(
            f"'{text}': the limit '{limit}' needs a sign, '{name}{operator}{sign}{limit}'"
        )
    if limit[0] != sign:
        example = "'p95_wait>+5%'" if rise else "'utilization<-5%'"
        raise ThresholdError(
            f"'{text}': '{operator}{limit[0]}' would fail on an unchanged result; a limit on "
            f"a rise takes '>+' and a limit on a fall '<-' (e.g. {example})"
        )
    amount = limit[1:].strip()
    percent = amount.endswith("%")
    number = amount[:-1].strip() if percent else amount
    if not _AMOUNT.fullmatch(number):
        raise ThresholdError(
            f"'{text}': '{number or amount}' is not a non-negative number "
            f"(write digits, optionally a decimal point and '%')"
        )
    return Threshold(name, rise, float(number), percent, text)


def check_gate(
    thresholds: Sequence[Threshold], comparison: Comparison, incomplete: Sequence[str] = ()
) -> GateVerdict:
    """Every threshold against every compared case that reports its metric; ``incomplete``
    describes candidate runs that did not complete, each a failure whatever the thresholds."""
    available = comparison.metric_names
    checked: list[int] = []
    breaches: list[Breach] = []
    failures: list[tuple[Threshold, str]] = []
    for threshold in thresholds:
        if threshold.metric not in available:
            known = ", ".join(available) if available else "none: no case is in both results"
            raise ThresholdError(
                f"'{threshold.text}': metric '{threshold.metric}' is not in both the baseline "
                f"and the candidate (metrics compared: {known})"
            )
        relevant = [c for c in comparison.changes if c.metric == threshold.metric]
        checked.append(len(relevant))
        breaches.extend(Breach(threshold, c) for c in relevant if threshold.breached_by(c))
        failures.extend(
            (threshold, label)
            for label, metric in comparison.failed_in_candidate
            if metric == threshold.metric
        )
    return GateVerdict(
        tuple(thresholds), tuple(checked), tuple(breaches), tuple(failures), tuple(incomplete)
    )


def describe_failure(threshold: Threshold, label: str) -> str:
    return (
        f"{label}: {threshold.metric} has no value in the candidate (its benchmark failed), so "
        f"'{threshold.text}' cannot pass"
    )


def describe_breach(breach: Breach) -> str:
    change = breach.change
    pair = (change.baseline, change.candidate)
    before, after = numbers.values(pair, change.unit)
    moved = (
        numbers.signed_percent(change.percent)
        if breach.threshold.percent
        else numbers.signed(change.delta, change.unit, pair)
    )
    if math.isinf(change.percent) and breach.threshold.percent:
        moved = "from 0"
    return (
        f"{change.label}: {change.metric} {before} -> {after} "
        f"({moved}) breaks '{breach.threshold.text}' ({breach.threshold.describe()})"
    )
