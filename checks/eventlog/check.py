"""Checking a recorded log as it streams: the runtime monitor over each event as it is read.

Nothing of the engine that wrote the log is imported, and nothing but the live state is held:
:class:`LogCheck` reads one line, checks it, and lets it go.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kvsched.checks.eventlog.header import LogHeader
from kvsched.checks.eventlog.stream import LogReader
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import Monitor
from kvsched.reference.efficiency import Efficiency, measure
from kvsched.spec.events import IterationEvent


@dataclass(frozen=True)
class LogCheck:
    """What checking a log found: its header, how many iterations it had, the first finding and,
    when asked for every invariant's first violation, the later ones of other invariants."""

    header: LogHeader
    iterations: int
    finding: Finding | None
    later: tuple[Finding, ...] = ()
    efficiency: Efficiency | None = None
    """The efficiency figures over the events read (up to the finding, when checking stopped)."""


def check_stream(path: str | Path, all_findings: bool = False) -> LogCheck:
    """Judge the log at ``path`` with the runtime monitor as it streams: the first finding, or
    (``all_findings``) the first finding of every invariant, checking on after a violation."""
    reader = LogReader(path)
    header = reader.header
    properties = header.properties
    monitor = Monitor(header.workload, properties.policy, properties, all_findings)
    stopped: list[bool] = []

    def watched() -> Iterator[IterationEvent]:
        # The efficiency figures read the same events as they stream past the monitor.
        for event in reader.events():
            yield event
            if monitor.observe(event) is not None and not all_findings:
                stopped.append(True)
                return

    efficiency = measure(header.workload, watched(), properties)
    if stopped:
        return LogCheck(header, reader.iterations, monitor.finding, efficiency=efficiency)
    monitor.finish(reader.drained, reader.fault)
    later = tuple(f for f in monitor.findings.values() if f is not monitor.finding)
    return LogCheck(header, reader.iterations, monitor.finding, later, efficiency)
