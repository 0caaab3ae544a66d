"""Event logs for the reading benchmarks: a long run of the reference continuous scheduler.

The run is streamed from the engine's loop (``SchedulerDriver.step``) straight to disk, in both
versions, so making a log of 10^5 iterations holds one iteration at a time. The workload keeps
about 40 requests active with pages of 16 tokens, the shape of a busy serving engine.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import IO, BinaryIO, TextIO

from kvsched.checks.eventlog.lines import LOG_FORMAT, event_json
from kvsched.checks.eventlog.version2 import ENCODER, IterationLine, queue_json
from kvsched.checks.eventlog.writer import header_line, ops_of
from kvsched.reference import ContinuousScheduler
from kvsched.reference.engine import SchedulerDriver
from kvsched.spec.properties import TargetProperties, properties_to_json
from kvsched.spec.workload import Limits, Request, Workload, arrival_order, workload_to_json

BATCH, PAGE = 40, 16


def busy_workload(iterations: int) -> Workload:
    """Requests of 40 to 230 output tokens arriving fast enough to keep 40 slots full."""
    requests = []
    budget = iterations * BATCH  # output tokens 40 slots produce in ``iterations``
    n = 0
    while budget > 0:
        output = 40 + (n * 37) % 191
        prompt = 16 + (n * 53) % 300
        requests.append(Request(f"r{n}", n * 10 // 3, prompt, output))
        budget -= output
        n += 1
    pool = BATCH * ((316 + 231) // PAGE + 1)
    return Workload("busy", Limits(BATCH, PAGE, pool), tuple(requests))


def write_logs(directory: Path, iterations: int, version_1: bool = True) -> dict[str, Path]:
    """Record one run as ``v1.jsonl`` (unless not ``version_1``), ``v2.jsonl`` and
    ``v2.jsonl.gz`` in ``directory``."""
    workload = busy_workload(iterations)
    properties = TargetProperties(policy="continuous")
    paths = {name: directory / name for name in ("v1.jsonl", "v2.jsonl", "v2.jsonl.gz")}
    with ExitStack() as files:
        v1_path = paths["v1.jsonl"] if version_1 else Path(os.devnull)
        v1 = files.enter_context(v1_path.open("w", encoding="utf-8"))
        v2 = files.enter_context(paths["v2.jsonl"].open("wb"))
        v2z = files.enter_context(gzip.open(paths["v2.jsonl.gz"], "wb"))
        _record(workload, properties, v1, v2, v2z)
    return paths


def _record(
    workload: Workload, properties: TargetProperties, v1: TextIO, v2: BinaryIO, v2z: IO[bytes]
) -> None:
    header1 = {
        "type": "header",
        "format": LOG_FORMAT,
        "version": 1,
        "workload": workload_to_json(workload),
        "target": properties_to_json(properties),
    }
    v1.write(json.dumps(header1) + "\n")
    head = header_line(workload, properties).encode() + b"\n"
    v2.write(head)
    v2z.write(head)
    prompts = {r.id: r.prompt_tokens for r in workload.requests}
    driver = SchedulerDriver(ContinuousScheduler, workload.limits)
    arrivals = arrival_order(workload.requests)
    taken, finished, iteration = 0, 0, 0
    while finished < len(workload.requests):
        iteration += 1
        first = taken
        while taken < len(arrivals) and arrivals[taken].arrival < iteration:
            taken += 1
        event = driver.step(iteration, arrivals[first:taken])
        assert not hasattr(event, "call"), event  # the reference scheduler never faults
        finished += len(event.finished)  # type: ignore[union-attr]
        v1.write(json.dumps(event_json(event)) + "\n")  # type: ignore[arg-type]
        ops = tuple(ops_of(event, prompts))  # type: ignore[arg-type]
        # The queue is written as the engine reports it: BATCH-4 judges fcfs admissions by it.
        waiting = queue_json(tuple(event.waiting))  # type: ignore[union-attr]
        line = ENCODER.encode(IterationLine(iteration, ops, event.free_pages, waiting)) + b"\n"  # type: ignore[union-attr]
        v2.write(line)
        v2z.write(line)


if __name__ == "__main__":
    # python -m benchmarks.logs DIRECTORY ITERATIONS: the version-2 logs, plain and gzip
    write_logs(Path(sys.argv[1]), int(sys.argv[2]), version_1=False)
