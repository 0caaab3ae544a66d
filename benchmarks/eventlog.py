"""Reading and checking recorded event logs: iterations per second and peak memory.

:class:`EventLogCheck`: a log of 10^5 iterations of the reference continuous scheduler with about 40
active requests and pages of 16 tokens (:mod:`benchmarks.logs`), in version 2, plain and gzip.
``kvsched check`` takes such a log through the fast path (checks/eventlog/steady.py) wherever it
applies, so these figures are the fast path's; ``track_fast_share`` says how much of the log it
took. Times are process CPU seconds (``timer = time.process_time``): on shared cores the wall clock
also measures the neighbours. Information, not a gate.

:class:`EngineLogCheck`: a log of 2 x 10^4 iterations of the reference engine scheduler as vLLM v1
is designed, 64 slots, prefix caching and preemption (:func:`benchmarks.logs.write_engine_log`).
The fast path takes its decode lines, prefix-hit admissions, chunks and preemptions, as on the
logs ``kvsched record vllm`` writes, and declines a few lines to the full path.

:class:`LongLogCheck`: a log of 10^6 iterations whose requests are declared as they come.
"""

from __future__ import annotations

import gzip
import itertools
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import msgspec

from benchmarks.logs import write_engine_log, write_logs, write_long_log
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.stream import LogReader
from kvsched.checks.monitor.runtime import Monitor

LOGS = ("v2.jsonl", "v2.jsonl.gz")
ITERATIONS = 100_000
ENGINE_ITERATIONS = 20_000
LONG_ITERATIONS = 1_000_000
PREFIX = 20_000
"""Iterations the monitor-alone comparison holds in memory."""


class EventLogCheck:
    """``kvsched check run.jsonl``'s work: read, decode, lower and monitor, streaming."""

    params: ClassVar[list[str]] = list(LOGS)
    param_names = ("log",)
    timeout = 1800
    timer = time.process_time
    number = 1
    repeat = 1

    def setup_cache(self) -> str:
        directory = Path("eventlog-logs").resolve()
        directory.mkdir(exist_ok=True)
        write_logs(directory, ITERATIONS, version_1=False)
        return str(directory)

    def time_check(self, directory: str, log: str) -> None:
        _clean(Path(directory, log))

    def peakmem_check(self, directory: str, log: str) -> None:
        _clean(Path(directory, log))

    def track_iterations_per_second(self, directory: str, log: str) -> float:
        started = time.process_time()
        iterations = _clean(Path(directory, log))
        return iterations / (time.process_time() - started)

    track_iterations_per_second.unit = "iterations/s"  # type: ignore[attr-defined]

    def track_ratio_to_monitor(self, directory: str, log: str) -> float:
        """Throughput of read + check, streamed, over that of the monitor alone on events
        already in memory (the full path, no reading), on the first 20,000 iterations: above 1,
        the check outruns the monitor it replaces for steady decoding."""
        path = Path(directory, log)
        reader = LogReader(path)
        events = list(itertools.islice(reader.events(), PREFIX))
        header = reader.header
        started = time.process_time()
        _monitor(header, events)
        alone = time.process_time() - started
        prefix = Path(directory, f"prefix-{log}")
        _head(path, prefix, PREFIX + 1)
        started = time.process_time()
        checked = _clean(prefix, must_drain=False)
        return (checked / (time.process_time() - started)) / (len(events) / alone)

    track_ratio_to_monitor.unit = "ratio"  # type: ignore[attr-defined]

    def track_fast_share(self, directory: str, log: str) -> float:
        """Share of the iteration lines the fast path took in without making their events."""
        checked = check_stream(Path(directory, log))
        return checked.fast_lines / checked.iterations

    track_fast_share.unit = "share"  # type: ignore[attr-defined]

    def track_times_decode(self, directory: str, log: str) -> float:
        return _times_decode(Path(directory, log))

    track_times_decode.unit = "ratio"  # type: ignore[attr-defined]


class EngineLogCheck:
    """``kvsched check engine.jsonl``'s work on an engine's log: prefix hits, chunks, preemption."""

    timeout = 1800
    timer = time.process_time
    number = 1
    repeat = 1

    def setup_cache(self) -> str:
        return str(write_engine_log(Path("engine.jsonl").resolve(), ENGINE_ITERATIONS))

    def peakmem_check(self, log: str) -> None:
        _clean(Path(log))

    def track_iterations_per_second(self, log: str) -> float:
        started = time.process_time()
        iterations = _clean(Path(log))
        return iterations / (time.process_time() - started)

    track_iterations_per_second.unit = "iterations/s"  # type: ignore[attr-defined]

    def track_times_decode(self, log: str) -> float:
        return _times_decode(Path(log))

    track_times_decode.unit = "ratio"  # type: ignore[attr-defined]

    def track_command_line_times_decode(self, log: str) -> float:
        return _command_line_times_decode(Path(log))

    track_command_line_times_decode.unit = "ratio"  # type: ignore[attr-defined]


def _command_line_times_decode(path: Path, runs: int = 3) -> float:
    """``kvsched check LOG`` as a user runs it, less ``kvsched --version`` (kvsched's own
    start-up), over decoding the log's lines as untyped JSON (msgspec): the CPU seconds of each,
    the least of ``runs`` runs, so that a neighbour's burst on a shared core is not counted. The
    aim for an engine's log is 8 or less (benchmarks/README.md)."""
    kvsched = str(Path(sys.executable).with_name("kvsched"))
    lines = _lines(path)
    decoded, started_up, checked = [], [], []
    for _ in range(runs):
        decoded.append(_decode_seconds(lines))
        started_up.append(_child_seconds([kvsched, "--version"]))
        checked.append(_child_seconds([kvsched, "check", str(path)]))
    return (min(checked) - min(started_up)) / min(decoded)


def _child_seconds(command: list[str]) -> float:
    """The CPU seconds of ``command`` run to its end, which must be a pass (exit 0)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _times_decode(path: Path) -> float:
    """The check's CPU time over that of decoding the log's lines as untyped JSON (msgspec),
    both in this run: how much the check costs beyond reading its input. The aim for an engine's
    log is 8 or less (benchmarks/README.md)."""
    decoded = _decode_seconds(_lines(path))
    started = time.process_time()
    _clean(path)
    return (time.process_time() - started) / decoded


def _lines(path: Path) -> list[bytes]:
    """The log's lines (a .gz log decompressed)."""
    raw = path.read_bytes()
    return (gzip.decompress(raw) if path.suffix == ".gz" else raw).splitlines()


def _decode_seconds(lines: list[bytes]) -> float:
    """The CPU seconds of decoding ``lines`` as untyped JSON (msgspec)."""
    decoder = msgspec.json.Decoder()
    started = time.process_time()
    for line in lines:
        decoder.decode(line)
    return time.process_time() - started


class LongLogCheck:
    """``kvsched check long.jsonl.gz`` on a run of 10^6 iterations whose requests come in lines
    (:func:`benchmarks.logs.write_long_log`, spec/eventlog.md 8.7): the targets are under a
    minute and under 200 MiB. Writing the log takes about 4 minutes."""

    timeout = 3600
    timer = time.process_time
    number = 1
    repeat = 1

    def setup_cache(self) -> str:
        return str(write_long_log(Path("long.jsonl.gz").resolve(), LONG_ITERATIONS))

    def peakmem_check(self, log: str) -> None:
        _clean(Path(log))

    def track_seconds(self, log: str) -> float:
        started = time.process_time()
        _clean(Path(log))
        return time.process_time() - started

    track_seconds.unit = "seconds"  # type: ignore[attr-defined]


def _head(path: Path, into: Path, lines: int) -> None:
    """The first ``lines`` lines of the log at ``path``, plain, into ``into`` (once)."""
    if into.exists():
        return
    with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as source:
        into.write_bytes(b"".join(itertools.islice(source, lines)))


def _clean(path: Path, must_drain: bool = True) -> int:
    checked = check_stream(path)
    if checked.finding is not None and (must_drain or checked.finding.iteration):
        raise AssertionError(f"the reference run's log has a finding: {checked.finding}")
    return checked.iterations


def _monitor(header, events) -> None:  # type: ignore[no-untyped-def]
    monitor = Monitor(header.workload, header.properties.policy, header.properties)
    for event in events:
        if monitor.observe(event) is not None:
            raise AssertionError(f"finding in the reference run: {monitor.finding}")
