"""The verdict on a recorded event log: a run from any engine, judged offline.

The log (spec/eventlog.md) carries its workload and the target's declared properties, so nothing
of the engine that wrote it is imported: :func:`~kvsched.checks.eventlog.log_check.check_stream`
reads it line by line and the runtime monitor checks each line as it comes. A recording cannot
be rerun or shrunk, so a violation is shown on the log's own workload, iteration by iteration up
to the violation.
"""

from __future__ import annotations

from pathlib import Path

from kvsched.checks.eventlog.header import LogHeader
from kvsched.checks.eventlog.lines import EventLogError
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.judge.grade import enforce
from kvsched.checks.monitor.coverage import Coverage
from kvsched.checks.verdict.declarations import declared
from kvsched.checks.verdict.report import Evidence, FailingWorkload, Verdict, build_verdict
from kvsched.spec.properties import Declaration


def check_event_log(
    label: str,
    path: Path,
    policy: str = "",
    all_findings: bool = False,
    allowed: frozenset[Declaration] | None = None,
) -> Verdict:
    """Judge the log at ``path``; ``policy``, if given, must be the one the log declares.
    With ``all_findings`` the verdict has the first violation of every invariant. Grading
    (``allowed`` not ``None``), a declaration of the header's not allowed is refused unread."""

    def accept(header: LogHeader) -> None:
        declaring = header.properties
        where = f"the header of {label} (its target object)"
        enforce(allowed, declaring, declaring.policy, where, needs_policy=False)

    checked = check_stream(path, all_findings, accept=accept)
    header = checked.header
    properties = header.properties
    if policy and policy != properties.policy:
        raise EventLogError(
            f"{path}: the log declares policy {properties.policy!r}; --policy {policy} "
            "cannot change what the recorded target did"
        )
    finding = checked.finding
    # The fast path counts iterations, not a run's extremes: the coverage says only that.
    coverage = Coverage(runs=1, iterations=checked.iterations, extremes=False)
    evidence = Evidence(log_iterations=checked.iterations, coverage=coverage)
    failing = None
    if finding is not None:
        failing = FailingWorkload(header.workload, f"the recorded log {path.name}")
    figures = checked.efficiency.by_id() if checked.efficiency is not None else {}
    efficiency = tuple(figures.items())
    notes: list[str] = []
    if not properties.lesson_model:
        notes.append(f"declared by the log: {', '.join(declared(properties).values())}")
    if header.pages == "counts":
        notes.append(
            "the log counts pages without naming them: PAGE-2 (one owner per page) cannot be "
            "checked, and page ids in a finding are stand-ins"
        )
    notes += [f"also violated: {later}" for later in checked.later]
    return build_verdict(
        label,
        "event log",
        properties.policy,
        evidence,
        finding,
        failing,
        notes=tuple(notes),
        later=checked.later if all_findings else None,
        properties=properties,
        efficiency=efficiency,
        efficiency_on="the recorded log",
        excused=checked.excused,
    )
