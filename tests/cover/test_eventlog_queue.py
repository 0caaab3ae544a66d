"""A version-2 log's optional queue (spec/eventlog.md, section 8.2): left out, it is predicted."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_engine import TWO_VICTIMS

from kvsched.checks.eventlog.jsonl import EventLogError
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.writer import v2_lines
from kvsched.checks.monitor.runtime import watch_run
from kvsched.reference import POLICIES
from kvsched.reference.engine import Run, run
from kvsched.reference.engine_scheduler import VLLMV1Scheduler
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import ScheduledBatch
from kvsched.spec.workload import Limits, Request, Workload


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "full path"])
def test_a_log_that_leaves_out_its_queue_is_judged_on_the_predicted_one(
    fast: bool, tmp_path: Path
) -> None:
    # 'waiting' is optional: without it, requests that wait across iterations must not read as
    # overtaken by whoever is admitted next (BATCH-4 under fcfs).
    # One slot: b waits behind a, and c arrives in time to queue behind b in every iteration
    # until b is admitted.
    requests = (
        Request("a", 0, 2, 3),
        Request("b", 0, 2, 2),
        *(Request(f"c{t}", t, 2, 2) for t in range(1, 5)),
    )
    result = run(Workload("queue", Limits(1, 2, 8), requests), POLICIES["continuous"])
    properties = TargetProperties("continuous")
    queued = 0
    log = tmp_path / "no-queue.jsonl"
    with log.open("w") as out:
        for line in v2_lines(result, properties):
            document = json.loads(line)
            queued += bool(document.pop("waiting", None))
            out.write(json.dumps(document) + "\n")
    assert queued >= 3  # the run did keep a queue, and the log no longer says so
    checked = check_stream(log, fast=fast)
    assert checked.finding is None, str(checked.finding)


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "full path"])
@pytest.mark.parametrize("where", [0, -1])
def test_an_unknown_request_behind_a_known_queue_is_invalid(
    fast: bool, where: int, tmp_path: Path
) -> None:
    # The reader looks up only the new tail of a queue that kept the last one's requests, so
    # the unknown id goes at the tail of such a queue (where=-1), or at its head (0).
    requests = tuple(Request(f"r{i}", i // 3, 2, 3) for i in range(12))
    result = run(Workload("queue", Limits(2, 2, 16), requests), POLICIES["continuous"])
    rows = [json.loads(line) for line in v2_lines(result, TargetProperties("continuous"))]
    pairs = [
        i
        for i in range(2, len(rows))
        if rows[i].get("waiting")
        and rows[i - 1].get("waiting") == rows[i]["waiting"][: len(rows[i - 1]["waiting"])]
    ]
    assert pairs
    broken = rows[pairs[0]]["waiting"]
    broken.insert(len(broken) if where else 0, "nobody")
    log = tmp_path / "unknown.jsonl"
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(EventLogError, match="nobody"):
        check_stream(log, fast=fast)


class _Retracts(VLLMV1Scheduler):
    """vLLM v1's design, but a preempted request rejoins the queue at its tail (SGLang's
    retraction), as the queue it reports says."""

    def _preempt(self, step: Any, seq: Any) -> None:
        super()._preempt(step, seq)
        self.waiting.append(self.waiting.pop(0))


class _RetractsUnreported(_Retracts):
    def schedule(self) -> ScheduledBatch:
        return replace(super().schedule(), waiting=None)


TAIL = replace(VLLMV1Scheduler.properties, requeue="tail")


def _requeued_behind_others(result: Run) -> int:
    """The iterations in which a preempted request went behind one that waited before it."""
    return sum(
        1
        for event in result.events
        for rid in event.preempted
        if event.waiting and event.waiting[0] != rid and rid in event.waiting
    )


def test_a_preempted_request_sent_to_the_tail_is_out_of_the_declared_order(tmp_path: Path) -> None:
    """Under fcfs a preempted request rejoins the queue at its head (spec/eventlog.md 4.6): a
    queue that puts it behind requests that were waiting is BATCH-4 where it is reported, in
    process and in a log, on both paths."""
    result = run(TWO_VICTIMS, _Retracts)
    assert _requeued_behind_others(result)
    declared = VLLMV1Scheduler.properties
    finding, _ = watch_run(result, declared)
    assert finding is not None and finding.invariant == "BATCH-4", str(finding)
    assert "preempted in iteration" in finding.message and "ahead of" in finding.message
    first = min(e.iteration for e in result.events if e.preempted and e.waiting[-1:] != ())
    assert finding.iteration >= first
    log = tmp_path / "tail.jsonl"
    log.write_text("".join(line + "\n" for line in v2_lines(result, declared)))
    for fast in (True, False):
        checked = check_stream(log, fast=fast)
        assert checked.finding == finding or (
            checked.finding is not None
            and (checked.finding.invariant, checked.finding.iteration)
            == (finding.invariant, finding.iteration)
        ), str(checked.finding)


@pytest.mark.parametrize("target", [_Retracts, _RetractsUnreported], ids=["reported", "kept"])
def test_a_declared_tail_requeue_passes(target: type[VLLMV1Scheduler], tmp_path: Path) -> None:
    """Declared ``requeue="tail"``, the same scheduler is clean, whether it reports its queue or
    the engine loop keeps it, and so is its log; the verdict counts the requeues."""
    result = run(TWO_VICTIMS, target, properties=TAIL)
    assert any(e.preempted for e in result.events)
    finding, excused = watch_run(result, TAIL)
    assert finding is None, str(finding)
    assert excused.requeued_at_tail == sum(len(e.preempted) for e in result.events)
    log = tmp_path / "tail.jsonl"
    log.write_text("".join(line + "\n" for line in v2_lines(result, TAIL)))
    for fast in (True, False):
        checked = check_stream(log, fast=fast)
        assert checked.finding is None, str(checked.finding)


def test_requests_that_joined_in_one_iteration_stand_in_any_order(tmp_path: Path) -> None:
    """Arrivals of one iteration may be queued in any order among themselves (and so may the
    requests preempted in one), but not ahead of a request that arrived earlier."""
    requests = tuple(Request(f"r{i}", i // 3, 2, 3) for i in range(12))
    result = run(Workload("ties", Limits(2, 2, 16), requests), POLICIES["continuous"])
    rows = [json.loads(line) for line in v2_lines(result, TargetProperties("continuous"))]
    arrived = {r["id"]: int(r["arrival"]) for r in rows[0]["workload"]["requests"]}
    line = next(
        row
        for row in rows
        if len(row.get("waiting", ())) >= 3
        and arrived[row["waiting"][-1]] == arrived[row["waiting"][-2]]
        and arrived[row["waiting"][0]] != arrived[row["waiting"][-1]]
    )
    queue = line["waiting"]
    log = tmp_path / "ties.jsonl"
    queue[-1], queue[-2] = queue[-2], queue[-1]
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    for fast in (True, False):
        assert check_stream(log, fast=fast).finding is None
    queue[0], queue[-1] = queue[-1], queue[0]
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    for fast in (True, False):
        found = check_stream(log, fast=fast).finding
        assert found is not None and found.invariant in ("BATCH-4", "BATCH-3"), str(found)
        assert found.iteration == line["iteration"]
