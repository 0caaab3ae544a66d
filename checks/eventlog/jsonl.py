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

from kvsched.checks.eventlog.lines import (
    LOG_FORMAT,
    LOG_VERSION,
    EventLogError,
    check_engine_ids,
    event_json,
    parse_event,
    parse_fault,
    parse_header,
    parse_object,
)
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import monitor_run
from kvsched.reference.engine import Run, SchedulerFault
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
    """A log as a :class:`~kvsched.reference.engine.Run`, plus the target's declared properties.

    The run counts as drained when the log has no fault line and every request finished in it.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise EventLogError(f"{path}: cannot read the event log ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise EventLogError(
            f"{path}: not UTF-8 text (byte {error.start}: {error.reason}); an event log is UTF-8"
        ) from None
    lines = text.splitlines()
    if not lines:
        raise EventLogError(f"{path}: empty; an event log starts with a header line")
    workload, properties = parse_header(parse_object(lines[0], path, 1), path)
    known = {r.id for r in workload.requests}
    events: list[IterationEvent] = []
    fault: SchedulerFault | None = None
    explicit: bool | None = None  # whether the lines carry 'computed': all of them or none
    for number, line in enumerate(lines[1:], start=2):
        where = f"{path}: line {number}"
        document = parse_object(line, path, number)
        if fault is not None:
            raise EventLogError(f"{where}: nothing may follow the fault line")
        kind = document.get("type")
        if kind == "fault":
            fault = parse_fault(document, where)
            continue
        if kind != "iteration":
            raise EventLogError(
                f"{where}: field 'type' must be 'iteration' or 'fault', got {kind!r}"
            )
        event = parse_event(document, where)
        check_engine_ids(event, known, where)
        if event.iteration != len(events) + 1:
            raise EventLogError(
                f"{where}: field 'iteration' must be {len(events) + 1} "
                f"(iterations are numbered 1, 2, 3, ...), got {event.iteration}"
            )
        has_computed = event.computed is not None
        if explicit is None:
            explicit = has_computed
        if has_computed != explicit or (properties.computes_explicitly and not has_computed):
            everywhere = explicit or properties.computes_explicitly
            needed = "every iteration line" if everywhere else "no line"
            raise EventLogError(
                f"{where}: field 'computed' must be in {needed} of this log "
                "(it is all or nothing, and required when the target declares "
                "chunked prefill, preemption or prefix sharing)"
            )
        events.append(event)
    finished = {rid for event in events for rid in event.finished}
    drained = fault is None and finished >= {r.id for r in workload.requests}
    run = Run(workload, properties.policy, tuple(events), fault=fault, drained=drained)
    return run, properties


def check_log(path: str | Path) -> Finding | None:
    """Judge a recorded log offline with the runtime monitor: the first finding, or ``None``."""
    run, properties = read_run(path)
    return monitor_run(run, properties)
