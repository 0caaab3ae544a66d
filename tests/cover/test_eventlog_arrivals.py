"""Arrivals (spec/eventlog.md 8.5): a request joins the queue at its arrival time, or earlier in
that iteration by an 'arrive' operation, and joins it once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_eventlog_v2 import assert_rejected, header, iteration, write

from kvsched.checks.eventlog.jsonl import check_log
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.spec.workload import Limits, Request, Workload


def test_an_arrival_in_the_middle_of_an_iteration(tmp_path: Path) -> None:
    late = Workload("late", Limits(2, 2, 6), (Request("a", 0, 2, 1), Request("b", 1, 2, 1)))
    one = [["admit", "a"], ["alloc", "a", [0]], ["compute", "a", 2], ["token", "a"],
           ["finish", "a"], ["free", "a", [0]]]  # fmt: skip
    two = [["admit", "b"], ["alloc", "b", [0]], ["compute", "b", 2], ["token", "b"],
           ["finish", "b"], ["free", "b", [0]]]  # fmt: skip

    def merged(arrive: bool) -> list[Any]:
        ops = [*one[:2], *two[:2], *one[2:4], *two[2:4], *one[4:], *two[4:]]
        ops[ops.index(["alloc", "b", [0]])] = ["alloc", "b", [1]]
        ops[-1] = ["free", "b", [1]]
        return [["arrive", "b"], *ops] if arrive else ops

    early = write(tmp_path / "e.jsonl", header(late), iteration(1, merged(False), 6))
    finding = check_log(early)
    assert finding is not None and finding.invariant == "REQ-1"  # b arrives at time 1
    apart = write(tmp_path / "a.jsonl", header(late), iteration(1, one, 6), iteration(2, two, 6))
    assert check_log(apart) is None
    # b reaches the scheduler during iteration 1, at its arrival time, and joins that iteration.
    during = write(tmp_path / "d.jsonl", header(late), iteration(1, merged(True), 6))
    assert check_log(during) is None
    too_soon = Workload("soon", late.limits, (late.requests[0], Request("b", 2, 2, 1)))
    soon = write(tmp_path / "s.jsonl", header(too_soon), iteration(1, merged(True), 6))
    finding = check_log(soon)
    assert finding is not None and (finding.invariant, finding.iteration) == ("REQ-1", 1)
    # an iteration's operations run schedule, step, update: an admission after a finish is not
    unordered = [["arrive", "b"], *one, *two]
    assert_rejected(
        write(tmp_path / "u.jsonl", header(late), iteration(1, unordered, 6)),
        "line 2: field 'ops[7]'",
        "after the update",
    )


def test_a_request_that_arrived_early_is_queued_once(tmp_path: Path) -> None:
    # b reaches the scheduler during iteration 1 (an 'arrive'), waits, and joins in iteration 2
    # ahead of c, which arrives then by its arrival time: first come, first served. Counting b
    # again among iteration 2's arrivals once put it twice in the queue the order is read from,
    # and read c's admission as overtaking it (BATCH-4).
    three = Workload("three", Limits(2, 2, 2), tuple(Request(r, t, 2, 1) for r, t in
                     (("a", 0), ("b", 1), ("c", 1))))  # fmt: skip
    one = [["arrive", "b"], ["admit", "a"], ["alloc", "a", [0]], ["compute", "a", 2],
           ["token", "a"], ["finish", "a"], ["free", "a", [0]]]  # fmt: skip
    two = [["admit", "b"], ["alloc", "b", [0]], ["admit", "c"], ["alloc", "c", [1]],
           ["compute", "b", 2], ["compute", "c", 2], ["token", "b"], ["token", "c"],
           ["finish", "b"], ["finish", "c"], ["free", "b", [0]], ["free", "c", [1]]]  # fmt: skip
    lines = [header(three), iteration(1, one, 2, waiting=["b"]), iteration(2, two, 2)]
    checked = check_stream(write(tmp_path / "l.jsonl", *lines), all_findings=True)
    assert checked.finding is None, checked.finding
    swapped = [*two[2:4], *two[:2], *two[4:]]  # c admitted ahead of b: out of order
    lines[2] = iteration(2, swapped, 2)
    found = check_stream(write(tmp_path / "s.jsonl", *lines)).finding
    assert found is not None and (found.invariant, found.requests[0]) == ("BATCH-4", "c")


def test_a_request_gone_before_its_arrival_iteration_is_not_queued_again(tmp_path: Path) -> None:
    # b reaches the scheduler during iteration 1 (an 'arrive'), runs and finishes in it; at
    # iteration 2, its arrival time's, it joins no queue: under a priority order, queueing it
    # again would look up the key of a request already forgotten.
    from kvsched.spec.properties import TargetProperties
    from kvsched.spec.workload import Limits, Request, Workload

    late = Workload("late", Limits(2, 2, 6), (Request("a", 0, 2, 2), Request("b", 1, 2, 1)))
    ops = [["arrive", "b"], ["admit", "a"], ["alloc", "a", [0]], ["admit", "b"],
           ["alloc", "b", [1]], ["compute", "a", 2], ["compute", "b", 2], ["token", "a"],
           ["token", "b"], ["finish", "b"], ["free", "b", [1]]]  # fmt: skip
    second = [["alloc", "a", [1]], ["decode", ["a"]], ["finish", "a"], ["free", "a", [0, 1]]]
    for order in ("fcfs", "priority", "shortest-first"):
        target = TargetProperties("continuous", admission="lazy", token_budget=8, order=order)
        lines = [header(late, target), iteration(1, ops, 5), iteration(2, second, 6)]
        checked = check_stream(write(tmp_path / f"{order}.jsonl", *lines), all_findings=True)
        assert checked.finding is None, (order, checked.finding)
