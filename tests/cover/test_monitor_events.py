"""The runtime monitor on corrupted events, and the monitor as an object: incremental, sticky,
with work that follows the iteration rather than the pool. The mutants are in test_monitor.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from relowered import relowered
from test_monitor import NeverAdmits, RaisesInIteration3, W, workload

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import Monitor, monitor_run
from kvsched.checks.mutants.batching import DecodesTwice
from kvsched.checks.mutants.paging import KeepsPagesOnFinish
from kvsched.reference import ContinuousScheduler, run
from kvsched.reference.engine import Run, iteration_bound
from kvsched.spec.properties import TargetProperties

# Event-level corruptions --------------------------------------------------------------------


def corrupt(iteration: int, **changes: Any) -> Finding | None:
    """The run's event of ``iteration`` changed, and lowered again as version 1 is (its schedule
    and its allocations follow from its tables), so that the monitor sees what it reports."""
    result = run(W, ContinuousScheduler)
    events = list(result.events)
    events[iteration - 1] = replace(events[iteration - 1], **changes)
    return monitor_run(replace(result, events=relowered(events)))


def test_page_outside_the_pool_is_page_5() -> None:
    for page in (8, 99):  # ids run 0 to 7
        finding = corrupt(1, page_tables={"a": (0, 1), "b": (page,)}, allocated={"b": (page,)})
        assert finding is not None and (finding.invariant, finding.pages) == ("PAGE-5", (page,))


def test_freeing_a_page_not_held_is_page_3() -> None:
    event = run(W, ContinuousScheduler).events[2]  # a finishes in iteration 3
    assert event.finished == ("a",)
    finding = corrupt(3, freed={**event.freed, "c": (5,)})
    assert finding is not None and finding.invariant == "PAGE-3" and finding.pages == (5,)


def test_a_waiting_request_holding_pages_is_page_4() -> None:
    event = run(W, ContinuousScheduler).events[1]  # c waits in iteration 2
    assert "c" in event.waiting
    finding = corrupt(2, page_tables={**event.page_tables, "c": (7,)})
    assert finding is not None and (finding.invariant, finding.requests) == ("PAGE-4", ("c",))


def test_a_page_dropped_from_a_table_without_a_free_is_page_3() -> None:
    event = run(W, ContinuousScheduler).events[1]
    finding = corrupt(2, page_tables={**event.page_tables, "b": ()})
    assert finding is not None and finding.invariant == "PAGE-3"


def test_request_conservation_in_the_events() -> None:
    second = run(W, ContinuousScheduler).events[1]
    a_pages = second.page_tables["a"]
    cases: list[tuple[int, dict[str, Any], tuple[str, ...], str]] = [
        (2, {"admitted": ("a",)}, ("a",), "already in the batch"),
        (2, {"active": ("a",)}, ("b",), "left the batch"),
        (2, {"active": ("a", "b", "c")}, ("c",), "without being admitted"),
        (3, {"finished": (), "freed": {}}, ("a",), "produced its last token"),
        (2, {"finished": ("a",), "freed": {"a": a_pages}}, ("a",), "after 2 of its 3"),
    ]
    for iteration, changes, requests, words in cases:
        finding = corrupt(iteration, **changes)
        assert finding is not None, changes
        assert (finding.invariant, finding.iteration) == ("REQ-2", iteration), finding
        assert finding.requests == requests and words in finding.message


def test_findings_say_where_a_request_is() -> None:
    unknown = corrupt(1, admitted=("a", "b", "zz"))
    assert unknown is not None and (unknown.invariant, unknown.requests) == ("REQ-1", ("zz",))
    cases = [
        (1, ("a", "b", "c"), "not arrived yet"),
        (2, ("a", "b", "c"), "waiting"),
        (1, ("a", "b", "zz"), "not a request of the workload"),
        (4, ("b", "c", "a"), "finished"),
    ]
    for iteration, decoded, words in cases:
        finding = corrupt(iteration, decoded=decoded)
        assert finding is not None and finding.invariant == "DEC-2", finding
        assert f"is {words}, not in the batch" in finding.message


def test_the_token_checks_name_the_first_request_at_fault() -> None:
    # The token checks test the batch at once and go request by request only on a failure:
    # the request named is still the first at fault, in the event's order.
    assert run(W, ContinuousScheduler).events[1].active == ("a", "b")  # c waits
    cases = [
        (("a", "b", "a"), "DEC-1", ("a",)),
        (("a", "c", "a"), "DEC-1", ("a",)),
        (("c", "a", "a"), "DEC-2", ("c",)),
        (("b",), "DEC-1", ("a",)),  # the lesson model: every active request decodes
    ]
    for decoded, invariant, requests in cases:
        finding = corrupt(2, decoded=decoded)
        assert finding is not None and (finding.invariant, finding.requests) == (
            invariant,
            requests,
        ), (decoded, finding)
    # No KV computed outside the batch is no finding: DEC-2 is about tokens and KV, not names.
    assert corrupt(2, computed={"a": 1, "b": 1, "c": 0}) is None
    finding = corrupt(2, computed={"a": 1, "b": 1, "c": 2})
    assert finding is not None and (finding.invariant, finding.requests) == ("DEC-2", ("c",))


# The monitor as an object -------------------------------------------------------------------


def test_monitor_is_incremental_and_sticky() -> None:
    result = run(W, KeepsPagesOnFinish)
    monitor = Monitor(W, "continuous")
    findings = [monitor.observe(event) for event in result.events]
    first = next(f for f in findings if f is not None)
    assert findings.index(first) == 2  # iteration 3, and every later call repeats it
    assert all(f is first for f in findings[2:])
    assert monitor.finish(True) is first


def test_end_of_run_findings_have_iteration_0() -> None:
    result = run(W, ContinuousScheduler)
    monitor = Monitor(W, "continuous")
    for event in result.events[:-1]:
        assert monitor.observe(event) is None
    lost = monitor.finish(drained=True)  # b never finished, yet the run claims it drained
    assert lost is not None and (lost.invariant, lost.iteration) == ("REQ-2", 0)
    assert lost.requests == ("b",)


def test_messages_name_a_few_requests_and_count_the_rest() -> None:
    for count, words in ((5, "'r4';"), (7, "'r4' and 2 more;")):
        w = workload((1, 4, 8), *((f"r{i}", 0, 1, 1) for i in range(count)))
        finding = Monitor(w, "static").finish(drained=False)
        assert finding is not None and finding.invariant == "LIVE-1"
        assert words in finding.message and len(finding.requests) == count


def test_idle_iterations_after_the_drain_are_fine() -> None:
    result = run(W, ContinuousScheduler)
    last = result.events[-1]
    idle = tuple(
        replace(last, iteration=n, admitted=(), active=(), decoded=(), finished=(),
                page_tables={}, allocated={}, freed={}, free_pages=8, arrived=())
        for n in range(len(result.events) + 1, iteration_bound(W) + 3)
    )  # fmt: skip
    assert monitor_run(replace(result, events=result.events + idle)) is None


def test_events_past_the_bound_are_live_1() -> None:
    # Admitted, but never computing: nothing is stranded in the queue (LIVE-2 does not apply),
    # yet the run does not drain by the bound.
    dawdles = TargetProperties(preemption=True, admission="lazy")
    first = replace(
        run(W, NeverAdmits).events[0],
        admitted=("a",),
        active=("a",),
        computed={},
        waiting=("b",),  # c arrives at time 1: it waits from iteration 2
    )
    later = replace(first, arrived=(), admitted=(), waiting=("b", "c"))
    events = [first, *(replace(later, iteration=n) for n in range(2, iteration_bound(W) + 2))]
    finding = monitor_run(Run(W, "", relowered(events)), dawdles)
    assert finding is not None
    assert (finding.invariant, finding.iteration) == ("LIVE-1", iteration_bound(W) + 1)


def test_protocol_fault_comes_after_the_events_before_it() -> None:
    class BreaksThenRaises(DecodesTwice, RaisesInIteration3):
        pass

    finding = monitor_run(run(W, BreaksThenRaises))
    assert finding is not None and finding.invariant == "DEC-1"


def test_bad_use_of_the_monitor_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="policy"):
        Monitor(W, "static", TargetProperties(policy="continuous"))
    with pytest.raises(ValueError, match="reserved page"):
        Monitor(W, "static", TargetProperties(reserved_pages=(8,)))
    monitor = Monitor(W, "continuous")
    event = run(W, ContinuousScheduler).events[1]
    with pytest.raises(ValueError, match="expected iteration 1"):
        monitor.observe(event)


def test_a_declaration_the_answers_cannot_back_is_a_protocol_finding() -> None:
    # A class that declares preemption but speaks the lesson protocol: a verdict, not a crash.
    declared = TargetProperties(preemption=True, admission="lazy")
    finding = Monitor(W, "continuous", declared).observe(run(W, ContinuousScheduler).events[0])
    assert finding is not None and finding.invariant == "PROTO-1"
    assert "ScheduledBatch.computed" in finding.message


def test_only_changed_tables_are_compared() -> None:
    # The schedule names a table only where it grew, so the page ledger's work per iteration
    # follows what changed, not the batch.
    w = workload((3, 2, 40), ("a", 0, 3, 9), ("b", 0, 0, 7), ("c", 2, 5, 4))
    result = run(w, ContinuousScheduler)
    assert monitor_run(result) is None
    grown = [f"{e.iteration}:{rid}" for e in result.events for rid in e.allocated]
    named = [
        f"{e.iteration}:{op.request}"
        for e in result.events
        for op in e.schedule
        if op.kind in ("alloc", "share")
    ]
    assert named == grown
    assert len(grown) < sum(len(e.active) for e in result.events)


def test_work_does_not_grow_with_the_pool() -> None:
    # One slot, so pages never limit admission; then pretend the pool is a trillion pages. A
    # monitor that walked the pool would run out of time or memory here.
    w = workload((1, 4, 6), ("a", 0, 5, 3), ("b", 0, 9, 2))
    result = run(w, ContinuousScheduler)
    huge = 10**12
    bigger = replace(w, limits=replace(w.limits, pool_pages=w.limits.pool_pages + huge))
    events = tuple(replace(e, free_pages=e.free_pages + huge) for e in result.events)
    assert monitor_run(Run(bigger, "continuous", events)) is None
