"""A version-2 log's optional queue (spec/eventlog.md, section 8.2): left out, it is predicted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsched.checks.eventlog.jsonl import EventLogError
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.writer import v2_lines
from kvsched.reference import POLICIES
from kvsched.reference.engine import run
from kvsched.spec.properties import TargetProperties
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
