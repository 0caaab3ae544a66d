"""Baseline against candidate: every metric both result sets report, with its change.

Cases are matched by (workload name, policy); a case only one side has is listed, not compared.
The change in percent is relative to the baseline; from a baseline of 0 any rise is infinite,
which the gate treats as over every percentage limit (a figure that was 0 and no longer is has
regressed, however small it is now).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .results import ResultSet


@dataclass(frozen=True)
class MetricChange:
    workload: str
    policy: str
    metric: str
    baseline: float
    candidate: float
    unit: str = ""

    @property
    def label(self) -> str:
        return f"{self.workload} / {self.policy}" if self.policy else self.workload

    @property
    def delta(self) -> float:
        return self.candidate - self.baseline

    @property
    def percent(self) -> float:
        """Change relative to the baseline, in percent; +-inf from a baseline of 0."""
        if self.baseline == 0:
            return 0.0 if self.candidate == 0 else math.copysign(math.inf, self.delta)
        return 100.0 * self.delta / abs(self.baseline)


@dataclass(frozen=True)
class Comparison:
    baseline_source: str
    candidate_source: str
    changes: tuple[MetricChange, ...]
    """Cases in candidate order, metrics in the candidate's order within a case."""
    only_in_baseline: tuple[str, ...]
    """Labels of cases the candidate lacks."""
    only_in_candidate: tuple[str, ...]
    """Labels of cases new in the candidate."""
    failed_in_candidate: tuple[tuple[str, str], ...] = ()
    """(case label, metric) the baseline has a value for and the candidate's benchmark failed."""

    @property
    def metric_names(self) -> tuple[str, ...]:
        """Metrics compared, or that failed in the candidate where the baseline has them."""
        compared = [change.metric for change in self.changes]
        return tuple(dict.fromkeys([*compared, *(m for _, m in self.failed_in_candidate)]))


def compare(baseline: ResultSet, candidate: ResultSet) -> Comparison:
    changes = []
    only_in_candidate = []
    for case in candidate.cases:
        before = baseline.case(case.key)
        if before is None:
            only_in_candidate.append(case.label)
            continue
        for metric, value in case.metrics.items():
            if metric in before.metrics:
                unit = case.units.get(metric, before.units.get(metric, ""))
                changes.append(
                    MetricChange(
                        case.workload, case.policy, metric, before.metrics[metric], value, unit
                    )
                )
    only_in_baseline = [c.label for c in baseline.cases if candidate.case(c.key) is None]
    failed = []
    for workload, policy, metric in candidate.failed:
        before = baseline.case((workload, policy))
        if before is not None and metric in before.metrics:
            failed.append((before.label, metric))
    return Comparison(
        baseline_source=baseline.source,
        candidate_source=candidate.source,
        changes=tuple(changes),
        only_in_baseline=tuple(only_in_baseline),
        only_in_candidate=tuple(only_in_candidate),
        failed_in_candidate=tuple(failed),
    )


def format_percent(change: MetricChange) -> str:
    """'+5.0%', '-12.3%', '0%' for no change, '+inf%' from a baseline of 0."""
    percent = change.percent
    if percent == 0:
        return "0%"
    if math.isinf(percent):
        return "+inf%" if percent > 0 else "-inf%"
    return f"{percent:+.1f}%"
