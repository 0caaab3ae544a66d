"""The verdict on a recorded event log: a run from any engine, judged offline.

The log (spec/eventlog.md) carries its workload and the target's declared properties, so nothing
of the engine that wrote it is imported: :func:`~kvsched.checks.eventlog.read_run`
reads it and the runtime monitor replays it. A recording cannot be rerun or shrunk, so a
violation is shown on the log's own workload, iteration by iteration up to the violation.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from kvsched.checks.eventlog.jsonl import EventLogError, read_run
from kvsched.checks.monitor.runtime import monitor_run
from kvsched.checks.verdict.report import Evidence, FailingWorkload, Verdict, build_verdict
from kvsched.reference.efficiency import measure
from kvsched.spec.properties import TargetProperties


def check_event_log(label: str, path: Path, policy: str = "") -> Verdict:
    """Judge the log at ``path``; ``policy``, if given, must be the one the log declares."""
    run, properties = read_run(path)
    if policy and policy != properties.policy:
        raise EventLogError(
            f"{path}: the log declares policy {properties.policy!r}; --policy {policy} "
            "cannot change what the recorded target did"
        )
    finding = monitor_run(run, properties)
    evidence = Evidence(log_iterations=len(run.events))
    failing = None
    if finding is not None:
        failing = FailingWorkload(run.workload, f"the recorded log {path.name}")
    notes = () if properties.lesson_model else (f"declared by the log: {_declared(properties)}",)
    efficiency = tuple(measure(run.workload, run.events, properties).by_id().items())
    return build_verdict(
        label, "event log", properties.policy, evidence, finding, failing, notes=notes,
        properties=properties, efficiency=efficiency, efficiency_on="the recorded log",
    )  # fmt: skip


def _declared(properties: TargetProperties) -> str:
    """The declarations that differ from the lesson model, as ``name=value`` or a bare flag."""
    parts = []
    for field in fields(properties):
        value = getattr(properties, field.name)
        if field.name == "policy" or value == field.default:
            continue
        parts.append(field.name if value is True else f"{field.name}={value!r}")
    return ", ".join(parts)
