"""Checking a recorded log as it streams: the runtime monitor over each event as it is read.

Nothing of the engine that wrote the log is imported, and nothing but the live state is held:
:class:`LogCheck` reads one line, checks it, and lets it go.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvsched.checks.eventlog.header import LogHeader
from kvsched.checks.eventlog.stream import LogReader
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import Monitor


@dataclass(frozen=True)
class LogCheck:
    """What checking a log found: its header, how many iterations it had, and the finding."""

    header: LogHeader
    iterations: int
    finding: Finding | None


def check_stream(path: str | Path) -> LogCheck:
    """Judge the log at ``path`` with the runtime monitor as it streams; the first finding."""
    reader = LogReader(path)
    header = reader.header
    monitor = Monitor(header.workload, header.properties.policy, header.properties)
    finding: Finding | None = None
    for event in reader.events():
        finding = monitor.observe(event)
        if finding is not None:
            break
    else:
        finding = monitor.finish(reader.drained, reader.fault)
    return LogCheck(header, reader.iterations, finding)
