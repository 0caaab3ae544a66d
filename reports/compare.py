"""Baseline against candidate: every metric both result sets report, with its change.

Cases are matched like with like: by the workload's content (its requests) and policy when both
sides record the content, whatever the workloads are named; otherwise by (workload name, policy).
A match whose limits differ, or a match by name whose requests differ, is still compared but
carries a warning, since its figures then measure two different things. A case only one side has
is listed, not compared.
The change in percent is relative to the baseline; from a baseline of 0 any rise is infinite,
which the gate treats as over every percentage limit (a figure that was 0 and no longer is has
regressed, however small it is now).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .results import CaseResult, ResultSet


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
    warnings: tuple[str, ...] = ()
    """Matches that do not compare like with like: different limits, or different requests."""

    @property
    def metric_names(self) -> tuple[str, ...]:
        """Metrics compared, or that failed in the candidate where the baseline has them."""
        compared = [change.metric for change in self.changes]
        return tuple(dict.fromkeys([*compared, *(m for _, m in self.failed_in_candidate)]))


def compare(baseline: ResultSet, candidate: ResultSet) -> Comparison:
    changes = []
    only_in_candidate = []
    warnings: list[str] = []
    matched: set[int] = set()
    for case in candidate.cases:
        before = _match(baseline, case)
        if before is None:
            only_in_candidate.append(case.label)
            continue
        matched.add(id(before))
        warnings.extend(_differences(before, case))
        for metric, value in case.metrics.items():
            if metric in before.metrics:
                unit = case.units.get(metric, before.units.get(metric, ""))
                changes.append(
                    MetricChange(
                        case.workload, case.policy, metric, before.metrics[metric], value, unit
                    )
                )
    only_in_baseline = [c.label for c in baseline.cases if id(c) not in matched]
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
        warnings=tuple(warnings),
    )


def _match(baseline: ResultSet, case: CaseResult) -> CaseResult | None:
    """The baseline's case for ``case``: same requests and policy, else same name and policy."""
    if case.content:
        for before in baseline.cases:
            if before.content == case.content and before.policy == case.policy:
                return before
    return baseline.case(case.key)


def _differences(before: CaseResult, after: CaseResult) -> list[str]:
    label = after.label
    if before.workload != after.workload:
        label = f"{after.label} (baseline: '{before.workload}', the same requests)"
    found = []
    if before.content and after.content and before.content != after.content:
        found.append(
            f"{label}: the baseline's workload of that name has different requests; its "
            "figures are not comparable"
        )
    changed = [
        f"{name} {before.limits[name]} -> {after.limits[name]}"
        for name in after.limits
        if name in before.limits and before.limits[name] != after.limits[name]
    ]
    if changed:
        found.append(f"{label}: limits differ from the baseline's ({', '.join(changed)})")
    return found
