"""Event logs for the reading benchmarks: long runs of the reference schedulers.

Each run is streamed from the engine's loop (``SchedulerDriver.step``) straight to disk, so making
a log of 10^5 iterations holds one iteration at a time.

- :func:`write_logs`: the continuous scheduler, about 40 requests active with pages of 16 tokens,
  the shape of a busy serving engine; the fast path (checks/eventlog/steady.py) takes it in.
- :func:`write_engine_log`: the engine scheduler as vLLM v1 is designed (a token budget, chunked
  prefill, preemption, prefix caching, the null block), 64 slots, three prefix groups and a pool
  that preempts now and then: the full path judges every line, as for a recorded vLLM log.
"""

from __future__ import annotations

import gzip
import json
import sys
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import IO, AnyStr, TextIO

from kvsched.checks.eventlog.lines import LOG_FORMAT, event_json
from kvsched.checks.eventlog.version2 import ENCODER, IterationLine, RequestMode, queue_json
from kvsched.checks.eventlog.writer import header_line, ops_of, request_line
from kvsched.reference import ContinuousScheduler
from kvsched.reference.engine import SchedulerDriver, SchedulerFactory
from kvsched.reference.engine_scheduler import EngineScheduler
from kvsched.reference.engine_scheduler.config import VLLM_V1
from kvsched.spec.properties import TargetProperties, properties_to_json
from kvsched.spec.workload import Limits, Request, Workload, arrival_order, workload_to_json

BATCH, PAGE = 40, 16


def busy_workload(iterations: int, gap: tuple[int, int] = (10, 3)) -> Workload:
    """Requests of 40 to 230 output tokens, one every ``gap[0] / gap[1]`` iterations: by
    default a little faster than 40 slots serve them, so the slots stay full and the queue
    grows through the run."""
    pool = BATCH * ((316 + 231) // PAGE + 1)
    requests = _requests(BATCH, iterations, gap, grouped=False)
    return Workload("busy", Limits(BATCH, PAGE, pool), requests)


ENGINE_BATCH, ENGINE_BUDGET = 64, 512
ENGINE = replace(VLLM_V1, token_budget=ENGINE_BUDGET)


def engine_workload(iterations: int) -> Workload:
    """Requests arriving fast enough to keep 64 slots full, three in four of them in one of three
    prefix groups, over a pool of two fifths of their peak: one iteration in about fifteen
    preempts."""
    pool = ENGINE_BATCH * ((316 + 231) // PAGE + 1) * 2 // 5
    requests = _requests(ENGINE_BATCH, iterations, (21, 10), grouped=True)
    return Workload("engine", Limits(ENGINE_BATCH, PAGE, pool), requests)


def engine_requests(count: int) -> Workload:
    """The first ``count`` requests of :func:`engine_workload`, its limits and shape."""
    # No output is longer than 230 tokens, so this many iterations hold ``count`` requests.
    workload = engine_workload(count * 230 // ENGINE_BATCH + 1)
    return replace(workload, name=f"engine-{count}", requests=workload.requests[:count])


def _requests(
    slots: int, iterations: int, gap: tuple[int, int], grouped: bool
) -> tuple[Request, ...]:
    """Prompts of 16 to 315 tokens and outputs of 40 to 230, one request every
    ``gap[0] / gap[1]`` iterations, as many as ``slots`` decode in ``iterations``; ``grouped``:
    three in four in one of three prefix groups, sharing up to 48 prompt tokens."""
    requests = []
    budget = iterations * slots  # output tokens the slots produce in ``iterations``
    n = 0
    while budget > 0:
        output = 40 + (n * 37) % 191
        prompt = 16 + (n * 53) % 300
        group = f"g{n % 3}" if grouped and n % 4 != 3 else ""
        prefix = min(48, prompt) if group else 0
        requests.append(Request(f"r{n}", n * gap[0] // gap[1], prompt, output, group, prefix))
        budget -= output
        n += 1
    return tuple(requests)


def write_engine_log(path: Path, iterations: int) -> Path:
    """Record the engine scheduler's run as a version-2 log at ``path`` (.gz: gzip)."""
    return _write_log(engine_workload(iterations), ENGINE.properties(), _engine, path)


def write_long_log(path: Path, iterations: int) -> Path:
    """A busy run of the continuous scheduler as a version-2 log whose requests come in lines
    (spec/eventlog.md 8.7), so a run of any length has a short header. Requests arrive a
    little slower than 40 slots serve them (one every 3.5 iterations), so the queue stays short
    however long the run."""
    workload = busy_workload(iterations, gap=(7, 2))
    continuous = TargetProperties(policy="continuous")
    return _write_log(workload, continuous, ContinuousScheduler, path, requests="lines")


def _write_log(
    workload: Workload,
    properties: TargetProperties,
    factory: SchedulerFactory,
    path: Path,
    requests: RequestMode = "header",
) -> Path:
    """One run as one version-2 log at ``path`` (.gz: gzip)."""
    with gzip.open(path, "wb") if path.suffix == ".gz" else path.open("wb") as log:
        _record(workload, properties, factory, (), (log,), requests)
    return path


def _engine(limits: Limits) -> EngineScheduler:
    return EngineScheduler(limits, ENGINE)


def write_logs(directory: Path, iterations: int, version_1: bool = True) -> dict[str, Path]:
    """Record one run as ``v1.jsonl`` (unless not ``version_1``), ``v2.jsonl`` and
    ``v2.jsonl.gz`` in ``directory``."""
    workload = busy_workload(iterations)
    properties = TargetProperties(policy="continuous")
    names = ("v1.jsonl", "v2.jsonl", "v2.jsonl.gz") if version_1 else ("v2.jsonl", "v2.jsonl.gz")
    paths = {name: directory / name for name in names}
    with ExitStack() as files:
        v1: tuple[TextIO, ...] = ()
        if version_1:
            v1 = (files.enter_context(paths["v1.jsonl"].open("w", encoding="utf-8")),)
        v2 = files.enter_context(paths["v2.jsonl"].open("wb"))
        v2z = files.enter_context(gzip.open(paths["v2.jsonl.gz"], "wb"))
        _record(workload, properties, ContinuousScheduler, v1, (v2, v2z))
    return paths


def _record(
    workload: Workload,
    properties: TargetProperties,
    factory: SchedulerFactory,
    v1: tuple[TextIO, ...],
    v2: tuple[IO[bytes], ...],
    requests: RequestMode = "header",
) -> None:
    """Run ``factory``'s scheduler over ``workload`` and write each line to every log of each
    version as it comes."""
    header1 = {
        "type": "header",
        "format": LOG_FORMAT,
        "version": 1,
        "workload": workload_to_json(workload),
        "target": properties_to_json(properties),
    }
    _write(v1, json.dumps(header1) + "\n")
    _write(v2, header_line(workload, properties, requests=requests).encode() + b"\n")
    prompts = {r.id: r.prompt_tokens for r in workload.requests}
    driver = SchedulerDriver(factory, workload.limits, properties)
    arrivals = arrival_order(workload.requests)
    taken, finished, iteration = 0, 0, 0
    while finished < len(workload.requests):
        iteration += 1
        first = taken
        while taken < len(arrivals) and arrivals[taken].arrival < iteration:
            if requests == "lines":  # declared before the iteration it joins
                _write(v2, request_line(arrivals[taken]) + b"\n")
            taken += 1
        event = driver.step(iteration, arrivals[first:taken])
        assert not hasattr(event, "call"), event  # the reference schedulers never fault
        finished += len(event.finished)  # type: ignore[union-attr]
        if v1:
            _write(v1, json.dumps(event_json(event)) + "\n")  # type: ignore[arg-type]
        ops = tuple(ops_of(event, prompts))  # type: ignore[arg-type]
        # The queue is written as the engine reports it: BATCH-4 judges fcfs admissions by it.
        waiting = queue_json(tuple(event.waiting))  # type: ignore[union-attr]
        line = IterationLine(iteration, ops, event.free_pages, waiting)  # type: ignore[union-attr]
        _write(v2, ENCODER.encode(line) + b"\n")


def _write(logs: tuple[IO[AnyStr], ...], line: AnyStr) -> None:
    for log in logs:
        log.write(line)


if __name__ == "__main__":
    # python -m benchmarks.logs DIRECTORY ITERATIONS [long]: the version-2 logs, plain and
    # gzip, and the engine scheduler's log (engine.jsonl); with "long", only the log whose
    # requests come in lines (long.jsonl.gz)
    directory, iterations = Path(sys.argv[1]), int(sys.argv[2])
    if sys.argv[3:] == ["long"]:
        write_long_log(directory / "long.jsonl.gz", iterations)
    else:
        write_logs(directory, iterations, version_1=False)
        write_engine_log(directory / "engine.jsonl", iterations)
