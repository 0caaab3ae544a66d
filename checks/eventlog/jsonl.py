"""JSONL event logs: write a run, read one back, check one offline (spec/eventlog.md).

A log is one JSON object per line: a header (format, version, workload, the target's declared
properties), one line per iteration, and optionally a fault line. Any engine in any language can
write one; :func:`check_log` judges it with the runtime monitor without importing the engine.

A malformed log is invalid input, never a finding: :class:`EventLogError` names the file, the
line and the field. What a well-formed log *says* (a page with two owners, a token for a waiting
request) is for the monitor to judge.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from kvsched.checks.eventlog.lines import LOG_FORMAT, LOG_VERSION, EventLogError, event_json
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.stream import LogReader
from kvsched.checks.monitor.findings import Finding
from kvsched.reference.engine import Run
from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties, properties_to_json
from kvsched.spec.workload import Workload, workload_to_json

__all__ = [
    "LOG_FORMAT",
    "LOG_VERSION",
    "EventLogError",
    "check_log",
    "log_lines",
    "read_log",
    "read_run",
    "write_log",
]


def write_log(run: Run, path: str | Path, properties: TargetProperties | None = None) -> None:
    """Write ``run`` as a JSONL event log; :func:`read_run` reads it back unchanged."""
    Path(path).write_text("".join(line + "\n" for line in log_lines(run, properties)), "utf-8")


def log_lines(run: Run, properties: TargetProperties | None = None) -> Iterator[str]:
    """The lines of ``run``'s event log, without newlines."""
    declared = properties if properties is not None else TargetProperties()
    if not declared.policy:
        declared = replace(declared, policy=run.policy)
    header = {
        "type": "header",
        "format": LOG_FORMAT,
        "version": LOG_VERSION,
        "workload": workload_to_json(run.workload),
        "target": properties_to_json(declared),
    }
    yield json.dumps(header)
    for event in run.events:
        yield json.dumps(event_json(event))
    if run.fault is not None:
        fault = run.fault
        line = {
            "type": "fault",
            "iteration": fault.iteration,
            "call": fault.call,
            "message": fault.message,
        }
        yield json.dumps(line)


def read_log(path: str | Path) -> tuple[Workload, TargetProperties, tuple[IterationEvent, ...]]:
    """The workload, the declared properties and the events of a log; the fault line, if any,
    is validated but not returned (use :func:`read_run`)."""
    run, properties = read_run(path)
    return run.workload, properties, run.events


def read_run(path: str | Path) -> tuple[Run, TargetProperties]:
    """A log, of either version, as a :class:`~kvsched.reference.engine.Run` in memory, plus the
    target's declared properties. To check a long log, :func:`check_log` streams it instead.

    The run counts as drained when the log has no fault line and every request finished in it.
    """
    reader = LogReader(path)
    events = tuple(reader.events())
    header = reader.header
    run = Run(
        header.workload,
        header.properties.policy,
        events,
        fault=reader.fault,
        drained=reader.drained,
    )
    return run, header.properties


def check_log(path: str | Path) -> Finding | None:
    """Judge a recorded log offline with the runtime monitor, as it streams: the first finding,
    or ``None``."""
    return check_stream(path).finding
