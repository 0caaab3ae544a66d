"""The engine's per-iteration work follows what changed, and loses nothing by it (section 6).

Page tables handed back unchanged are not re-validated, and events share the waiting queue
instead of copying it; a table changed in place, or a queue changed out of order, must still be
seen exactly as before.
"""

from __future__ import annotations

import pickle
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kvsched.checks.search.strategies import workloads
from kvsched.reference import POLICIES, run
from kvsched.reference.waiting import QueueView, WaitingQueue
from kvsched.spec.events import IterationEvent
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, StepOutcome
from kvsched.spec.workload import Limits, Request, Workload

ONE = Workload("one", Limits(batch_limit=1, page_size=4, pool_pages=4), (Request("a", 0, 1, 5),))


class MutatesInPlace:
    """Returns the same list as a's page table every iteration, and corrupts it in iteration 3."""

    def __init__(self, limits: Limits) -> None:
        self.table: list[Any] = [0]
        self.iteration = 0

    def add_request(self, request: Request) -> None:
        pass

    def schedule(self) -> ScheduledBatch:
        self.iteration += 1
        if self.iteration == 3:
            self.table.append("x")
        admitted = ("a",) if self.iteration == 1 else ()
        return ScheduledBatch(admitted=admitted, decode=("a",), page_tables={"a": self.table})

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        return StepOutcome(finished=(), freed={}, free_pages=3)


class NewBadTuple(MutatesInPlace):
    """Returns a fresh tuple each iteration; the one of iteration 3 holds a bool."""

    def schedule(self) -> ScheduledBatch:
        batch = super().schedule()
        table = (0, True) if self.iteration == 3 else (0,)
        return ScheduledBatch(batch.admitted, batch.decode, {"a": table})


def test_a_table_corrupted_in_place_is_still_a_fault() -> None:
    result = run(ONE, MutatesInPlace)
    assert result.fault is not None and result.fault.iteration == 3
    assert "page_tables['a'] must be a sequence of integer page ids" in result.fault.message


def test_a_new_tuple_is_validated_again() -> None:
    result = run(ONE, NewBadTuple)
    assert result.fault is not None and result.fault.iteration == 3


def naive_waiting(events: tuple[IterationEvent, ...]) -> list[tuple[str, ...]]:
    """The queue of every iteration, recomputed from scratch: arrived and never admitted."""
    queue: list[str] = []
    admitted: set[str] = set()
    queues = []
    for event in events:
        queue.extend(event.arrived)
        admitted.update(event.admitted)
        queues.append(tuple(rid for rid in queue if rid not in admitted))
    return queues


@given(workloads(max_requests=10), st.sampled_from(sorted(POLICIES)))
def test_shared_queues_equal_a_fresh_copy(workload: Workload, policy: str) -> None:
    events = run(workload, POLICIES[policy]).events
    for event, expected in zip(events, naive_waiting(events), strict=True):
        assert event.waiting == expected and tuple(event.waiting) == expected
        assert len(event.waiting) == len(expected)
        for rid in {r.id for r in workload.requests}:
            assert (rid in event.waiting) == (rid in expected)


def test_an_unchanged_queue_is_one_object() -> None:
    limits = Limits(batch_limit=1, page_size=4, pool_pages=8)
    requests = (Request("a", 0, 1, 4), Request("b", 0, 1, 1), Request("c", 0, 1, 1))
    events = run(Workload("queue", limits, requests), POLICIES["continuous"]).events
    assert events[0].waiting == ("b", "c")
    assert all(e.waiting is events[0].waiting for e in events[:4])  # a decodes, b and c wait


def test_admission_out_of_order_leaves_a_hole() -> None:
    queue = WaitingQueue()
    for rid in "abcd":
        queue.arrive(rid)
    before = queue.view()
    queue.admit("c")
    after = queue.view()
    assert before == ("a", "b", "c", "d") and after == ("a", "b", "d")
    assert "c" in before and "c" not in after and "d" in after and "e" not in after
    assert after[2] == "d" and after[-1] == "d" and after[1:] == ("b", "d") and len(after) == 3
    queue.admit("a")
    queue.admit("b")
    queue.arrive("e")
    assert queue.view() == ("d", "e") and after == ("a", "b", "d")  # old views never change
    assert hash(after) == hash(("a", "b", "d")) and repr(after) == "('a', 'b', 'd')"
    assert pickle.loads(pickle.dumps(after)) == ("a", "b", "d")
    assert after != ["a", "b", "d"]  # as a tuple would: a list is another kind of value
    assert isinstance(after, QueueView)
