"""Checking a recorded log as it streams: the runtime monitor over each event as it is read.

Nothing of the engine that wrote the log is imported, and nothing but the live state is held:
:class:`LogCheck` reads one line, checks it, and lets it go.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kvsched.checks.eventlog.header import LogHeader
from kvsched.checks.eventlog.steady import SteadyDecode
from kvsched.checks.eventlog.steady_ops import in_scope
from kvsched.checks.eventlog.stream import LogReader
from kvsched.checks.monitor.excuses import Excused
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import Monitor
from kvsched.reference.efficiency import Efficiency, Meter
from kvsched.spec.workload import Request


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
    fast_lines: int = 0
    """Iteration lines the fast path (:mod:`.steady`) took in without making their events."""
    excused: Excused = field(default_factory=Excused)
    """What the log's declarations excused in the lines read."""


def check_stream(
    path: str | Path,
    all_findings: bool = False,
    fast: bool = True,
    accept: Callable[[LogHeader], None] | None = None,
) -> LogCheck:
    """Judge the log at ``path`` with the runtime monitor as it streams: the first finding, or
    (``all_findings``) the first finding of every invariant, checking on after a violation.

    ``fast`` takes steady decoding in without events where :mod:`.steady` applies; the
    findings and figures are those of the full path (``fast=False``) either way. ``accept``
    sees the header before any line is checked, and may refuse it by raising."""
    reader = LogReader(path)
    header = reader.header
    if accept is not None:
        accept(header)
    properties = header.properties
    monitor = Monitor(header.workload, properties.policy, properties, all_findings)
    meter = Meter(
        header.workload, properties, monitor.requests.records, monitor.pages.held_as_scheduled
    )
    steady = (
        SteadyDecode(monitor, meter, reader.lowering)
        if fast and reader.lowering is not None and in_scope(header)
        else None
    )

    def declare(request: Request) -> None:
        monitor.declare(request)  # into the records the meter reads too

    for event in reader.events(steady.take if steady is not None else None, declare):
        if steady is not None:
            found = steady.observe(event)
        else:
            found = monitor.observe(event)
            meter.observe(event)  # the figures of the counts the monitor has just moved
        if found is not None and not all_findings:
            figures, fast_lines = meter.figures(), _fast(steady)
            excused = monitor.excused()
            return LogCheck(
                header, reader.iterations, monitor.finding, (), figures, fast_lines, excused
            )
    if steady is not None:
        steady.flush()
    monitor.finish(reader.drained, reader.fault)
    later = tuple(f for f in monitor.findings.values() if f is not monitor.finding)
    figures, excused = meter.figures(), monitor.excused()
    return LogCheck(
        header, reader.iterations, monitor.finding, later, figures, _fast(steady), excused
    )


def _fast(steady: SteadyDecode | None) -> int:
    return 0 if steady is None else steady.fast_lines
