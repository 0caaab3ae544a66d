"""Time one way of reading a log, by hand: ``python benchmarks/read_log.py LOG MODE``.

``decode``: decode every line with msgspec, as the fast path gets it. ``stream``: the streaming
reader with every line taken in unchecked (its queue read, no event made): the fast path's floor.
``read``: decode and lower every line, no monitor. ``check``: read and check, streaming, as
``kvsched check`` does (the fast path where it applies). ``full``: the same without the fast path.
``monitor``: the monitor alone over events read into memory first. Prints
iterations per CPU second and the peak resident memory. Not an asv benchmark (see eventlog.py).
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.source import decode_line, numbered_lines
from kvsched.checks.eventlog.stream import LogReader
from kvsched.checks.eventlog.version2 import DECODER, line_keys
from kvsched.checks.monitor.runtime import Monitor


def main(path: str, mode: str) -> None:
    started = time.process_time()
    if mode in ("check", "full"):
        iterations = check_stream(path, fast=mode == "check").iterations
    elif mode == "decode":
        iterations = sum(1 for _ in _decoded(Path(path)))
    elif mode == "stream":
        reader = LogReader(path)
        for _ in reader.events(lambda line, waiting: ()):
            pass  # every line is taken in: nothing is yielded
        iterations = reader.iterations
    elif mode == "read":
        iterations = sum(1 for _ in LogReader(path).events())
    else:
        reader = LogReader(path)
        events = list(reader.events())
        header = reader.header
        started = time.process_time()
        monitor = Monitor(header.workload, header.properties.policy, header.properties)
        for event in events:
            monitor.observe(event)
        iterations = len(events)
    seconds = time.process_time() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{mode}: {iterations} iterations, {iterations / seconds:,.0f}/s, peak {peak:.0f} MiB")


def _decoded(path: Path) -> Iterator[object]:
    for number, line in numbered_lines(path):
        if number > 1:
            yield decode_line(DECODER, line, "", line_keys)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
