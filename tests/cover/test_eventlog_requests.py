"""Event logs that declare their requests as they come (spec/eventlog.md 8.7): the same
verdicts as logs whose header lists every request, and request lines that say something
impossible rejected as invalid input, with the line and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from engines.recorded_logs import SCENARIOS
from test_eventlog_v2 import FIRST, LAZY, SECOND, W, assert_rejected, header, iteration, write

from kvsched.checks.eventlog.jsonl import read_run
from kvsched.checks.eventlog.log_check import LogCheck, check_stream
from kvsched.checks.eventlog.writer import v2_lines
from kvsched.spec.workload import workload_to_json


def verdict(checked: LogCheck) -> tuple[Any, ...]:
    found = [checked.finding, *checked.later] if checked.finding else []
    return (
        checked.iterations,
        [(f.invariant, f.iteration, f.message, f.requests, f.pages) for f in found],
        checked.efficiency,
    )


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_requests_in_lines_keep_every_recorded_verdict(scenario: Any, tmp_path: Path) -> None:
    run, properties = read_run(scenario.path)
    logs = {}
    for mode in ("header", "lines"):
        logs[mode] = tmp_path / f"{mode}.jsonl"
        logs[mode].write_text("".join(f"{line}\n" for line in v2_lines(run, properties, mode)))
    assert '"type":"request"' in logs["lines"].read_text()
    for fast in (True, False):
        header_mode, lines_mode = (
            check_stream(logs[mode], all_findings=True, fast=fast) for mode in ("header", "lines")
        )
        assert verdict(lines_mode) == verdict(header_mode)
        assert lines_mode.fast_lines == header_mode.fast_lines


def lines_header(**extra: Any) -> dict[str, Any]:
    return header(workload=W, target=LAZY, requests="lines", **extra) | {
        "workload": workload_to_json(W) | {"requests": []}
    }


def request(rid: str, arrival: int = 0, **extra: Any) -> dict[str, Any]:
    return {"type": "request", "id": rid, "arrival": arrival, "prompt_tokens": 2,
            "output_tokens": 2, **extra}  # fmt: skip


def test_the_worked_example_with_its_requests_in_lines(tmp_path: Path) -> None:
    log = write(
        tmp_path / "l.jsonl",
        lines_header(),
        request("a"),
        request("b"),
        iteration(1, FIRST, 4),
        iteration(2, SECOND, 6),
    )
    checked = check_stream(log)
    assert checked.finding is None and checked.iterations == 2
    assert read_run(log)[0].drained


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        ([request("a"), request("a")], ("line 3", "field 'id'", "declared twice")),
        ([request("a"), iteration(1, FIRST[:2] + FIRST[4:5] + FIRST[6:7], 5), request("b")],
         ("line 4", "field 'arrival'", "1 iterations were written before it")),
        ([request("a", 3), request("b", 1)], ("line 3", "field 'arrival'", "arriving at 3")),
        ([request("a", prompt_tokens=-1)], ("line 2", "prompt_tokens")),
        ([request("a", output_tokens=True)], ("line 2", "output_tokens")),
        ([request("a", colour="red")], ("line 2", "colour")),
        ([request("a", prefix_tokens=2)], ("line 2", "prefix_group")),
        ([request("a", prompt_tokens=40)], ("line 2", "needs 21 pages")),
        ([request("")], ("line 2", "id")),
    ],
)  # fmt: skip
def test_impossible_request_lines_are_invalid_input(
    rows: list[Any], words: tuple[str, ...], tmp_path: Path
) -> None:
    assert_rejected(write(tmp_path / "l.jsonl", lines_header(), *rows), *words)


def test_a_request_line_needs_a_header_that_says_so(tmp_path: Path) -> None:
    listed = write(tmp_path / "h.jsonl", header(), request("c"))
    assert_rejected(listed, "line 2", '"requests": "lines"')
    both = header(requests="lines")  # the workload still lists a and b
    assert_rejected(write(tmp_path / "b.jsonl", both), "line 1", "must be []")
    unknown = header(requests="later") | {"workload": workload_to_json(W) | {"requests": []}}
    assert_rejected(write(tmp_path / "u.jsonl", unknown), "line 1", "'requests'", '"lines"')
    version_1 = lines_header() | {"version": 1}
    assert_rejected(write(tmp_path / "v.jsonl", version_1), "line 1", "unknown field 'requests'")


def test_an_undeclared_request_is_not_the_workloads(tmp_path: Path) -> None:
    log = write(tmp_path / "l.jsonl", lines_header(), request("a"), iteration(1, FIRST, 4))
    found = check_stream(log).finding
    assert found is not None and found.invariant == "REQ-1" and found.requests == ("b",)
    assert json.loads(log.read_text().splitlines()[0])["requests"] == "lines"


def test_the_schema_knows_request_lines() -> None:
    from test_eventlog import validator

    good = [lines_header(), request("a"), request("b", 10**9, priority=2), header()]
    good += [header(requests="header")]
    for line in good:
        assert validator().is_valid(line), line
    bad = [
        header(requests="lines"),  # its workload still lists a and b
        lines_header() | {"version": 1},
        request("a", colour="red"),
        {k: v for k, v in request("a").items() if k != "output_tokens"},
        request("a", prefix_tokens=2),
        request("a", -1),
    ]
    for line in bad:
        assert not validator().is_valid(line), line


def test_the_ledgers_forget_a_request_once_it_finishes() -> None:
    # What a check holds follows the live requests: of a finished request only its state stays
    # (so that naming it again is still judged: REQ-2, "has already finished").
    from dataclasses import replace

    from kvsched.checks.monitor.runtime import Monitor
    from kvsched.reference import ContinuousScheduler, run
    from kvsched.reference.efficiency import Meter
    from kvsched.reference.families import generate
    from kvsched.spec.events import Op

    workload = generate("poisson-short-tight", 60, 2)
    result = run(workload, ContinuousScheduler)
    monitor, meter = Monitor(workload, "continuous"), Meter(workload)
    for event in result.events:
        meter.observe(event)
        assert monitor.observe(event) is None
    requests = monitor.requests
    assert requests.drained() and len(requests.finished) == 60
    requests.records.begin()  # the next iteration forgets the requests the last one finished
    meter.records.begin()
    kept = [requests.live, requests.records.left, requests.cut, monitor.order.position]
    kept += [meter.records.live, meter.records.left]
    assert all(not ledger for ledger in kept), [len(ledger) for ledger in kept]
    again = replace(
        result.events[-1],
        iteration=len(result.events) + 1,
        admitted=("r0",),
        schedule=(Op("admit", "r0"),),
    )
    found = monitor.observe(again)
    assert found is not None and found.invariant == "REQ-2" and "already finished" in found.message


def test_a_batch_that_lists_a_finished_request_is_a_finding(tmp_path: Path) -> None:
    # The efficiency meter reads the log before the monitor judges it, and forgets a request
    # once it finishes: a lesson-model line that lists a finished request in its batch must
    # still come out as the monitor's finding (REQ-2), never as a crash of the meter.
    from dataclasses import replace

    from test_monitor import W as LESSON

    from kvsched.checks.eventlog.jsonl import write_log
    from kvsched.reference import ContinuousScheduler, run

    result = run(LESSON, ContinuousScheduler)
    events = list(result.events)
    assert events[2].finished == ("a",)
    events[3] = replace(events[3], active=("a", *events[3].active))
    log = tmp_path / "v1.jsonl"
    write_log(replace(result, events=tuple(events)), log)
    found = check_stream(log, all_findings=True).finding
    assert found is not None and found.invariant == "REQ-2" and found.iteration == 4
