"""The engine loop and the reference schedulers (spec/semantics.md sections 3-5)."""

from dataclasses import replace
from typing import Any

import pytest

from kvsched.reference import POLICIES, PagePool, PoolError, run
from kvsched.reference.engine import iteration_bound
from kvsched.reference.engine_scheduler import VLLMV1Scheduler
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, Scheduler, StepOutcome
from kvsched.spec.workload import Limits, Request, Workload, pages_for

WORKLOAD = Workload(
    "mixed",
    Limits(batch_limit=2, page_size=4, pool_pages=12),
    (
        Request("a", 0, 5, 3),
        Request("b", 0, 0, 6),
        Request("c", 1, 9, 2),
        Request("d", 1, 1, 1),
        Request("e", 7, 4, 4),
    ),
)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_reference_implements_the_protocol_and_drains(policy: str) -> None:
    assert isinstance(POLICIES[policy](WORKLOAD.limits), Scheduler)
    result = run(WORKLOAD, POLICIES[policy])
    assert result.drained and result.fault is None
    assert result.policy == policy
    finished = [rid for e in result.events for rid in e.finished]
    assert sorted(finished) == ["a", "b", "c", "d", "e"]
    tokens = {r.id: 0 for r in WORKLOAD.requests}
    for event in result.events:
        for rid in event.decoded:
            tokens[rid] += 1
        for rid in event.active:
            request = WORKLOAD.request(rid)
            context = request.prompt_tokens + tokens[rid]
            assert len(event.page_tables[rid]) == pages_for(context, 4)  # PAGE-1
        owned = [p for table in event.page_tables.values() for p in table]
        assert len(owned) == len(set(owned))  # PAGE-2
        assert len(event.active) <= 2  # BATCH-1
    assert tokens == {r.id: r.output_tokens for r in WORKLOAD.requests}
    assert result.events[-1].free_pages == 12  # PAGE-4 at drain


def test_static_keeps_membership_and_continuous_refills() -> None:
    static = run(WORKLOAD, POLICIES["static"])
    continuous = run(WORKLOAD, POLICIES["continuous"])
    admitted_static = {rid: e.iteration for e in static.events for rid in e.admitted}
    admitted_continuous = {rid: e.iteration for e in continuous.events for rid in e.admitted}
    # a finishes in iteration 3; b (6 tokens) holds the static batch until iteration 6.
    assert admitted_static == {"a": 1, "b": 1, "c": 7, "d": 7, "e": 9}
    assert admitted_continuous == {"a": 1, "b": 1, "c": 4, "d": 6, "e": 8}


def test_admission_commits_peak_pages_and_keeps_fcfs() -> None:
    # Each request peaks at 3 pages; a pool of 5 admits one at a time although 2 slots exist,
    # and the small request behind the head does not overtake it (BATCH-4).
    workload = Workload(
        "tight",
        Limits(batch_limit=2, page_size=4, pool_pages=5),
        (Request("a", 0, 8, 4), Request("b", 0, 8, 4), Request("c", 0, 0, 1)),
    )
    result = run(workload, POLICIES["continuous"])
    admitted = {rid: e.iteration for e in result.events for rid in e.admitted}
    assert admitted == {"a": 1, "b": 5, "c": 5}
    assert max(e.pages_in_use for e in result.events) <= 5


def test_iteration_bound_covers_serial_execution() -> None:
    assert iteration_bound(WORKLOAD) == 7 + 3 + 6 + 2 + 1 + 4


def test_pool_refuses_misuse() -> None:
    pool = PagePool(3)
    pages = pool.allocate("a", 2)
    with pytest.raises(PoolError, match="over-allocation"):
        pool.allocate("b", 2)
    with pytest.raises(PoolError, match="foreign free"):
        pool.free("b", pages)
    pool.free("a", pages)
    with pytest.raises(PoolError, match="double free"):
        pool.free("a", pages[:1])
    assert pool.free_count == 3
    with pytest.raises(ValueError, match="pool size"):
        PagePool(0)


class Raises:
    policy = "continuous"

    def __init__(self, limits: Limits) -> None:
        self.calls = 0

    def add_request(self, request: Request) -> None:
        pass

    def schedule(self) -> ScheduledBatch:
        raise ZeroDivisionError("boom")

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        raise AssertionError("unreachable")


class Garbage(Raises):
    def schedule(self) -> Any:
        return ScheduledBatch(admitted=("a",), decode=("a",), page_tables={"a": [1, "x"]})


class NeverFinishes(Raises):
    def schedule(self) -> ScheduledBatch:
        return ScheduledBatch(admitted=(), decode=())

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        return StepOutcome(finished=(), freed={}, free_pages=12)


def test_a_raising_scheduler_is_a_fault_not_a_crash() -> None:
    result = run(WORKLOAD, Raises)
    assert result.fault is not None and not result.drained
    assert (result.fault.iteration, result.fault.call) == (1, "schedule")
    assert "ZeroDivisionError: boom" in result.fault.message


def test_malformed_answers_are_faults() -> None:
    result = run(WORKLOAD, Garbage)
    assert result.fault is not None
    assert "page_tables['a'] must be a sequence of integer page ids" in result.fault.message


def test_a_scheduler_that_never_finishes_stops_at_the_bound() -> None:
    result = run(WORKLOAD, NeverFinishes)
    assert result.fault is None and not result.drained
    assert len(result.events) == iteration_bound(WORKLOAD)


def test_a_failing_constructor_is_a_fault() -> None:
    def factory(limits: Limits) -> Scheduler:
        raise RuntimeError("no GPU")

    result = run(WORKLOAD, factory)
    assert result.fault is not None and result.fault.call == "__init__"


# Two requests preempted in one iteration (q, then p) of the engine model under a tight pool.
TWO_VICTIMS = Workload(
    "two-victims",
    Limits(batch_limit=20, page_size=8, pool_pages=64),
    tuple(
        Request(rid, arrival, prompt, 8)
        for rid, arrival, prompt in (
            *(("a", 32, 16), ("b", 32, 8), ("c", 32, 18), ("d", 32, 36)),
            *(("e", 36, 8), ("f", 36, 21), ("g", 36, 24), ("h", 36, 30)),
            *(("i", 36, 8), ("j", 36, 16), ("k", 36, 24), ("l", 38, 24)),
            *(("m", 38, 0), ("n", 38, 75), ("o", 38, 17), ("p", 38, 60)),
            *(("q", 38, 9), ("r", 38, 24)),
        )
    ),
)


def test_the_queue_a_target_does_not_report_is_the_one_it_keeps() -> None:
    """The engine loop's own queue, for a target that reports none, is the target's queue at
    every iteration: several preempted at once end up latest first (spec/eventlog.md 4.3)."""

    class Unreported(VLLMV1Scheduler):
        def schedule(self) -> ScheduledBatch:
            return replace(super().schedule(), waiting=None)

    reported, unreported = run(TWO_VICTIMS, VLLMV1Scheduler), run(TWO_VICTIMS, Unreported)
    assert any(len(event.preempted) > 1 for event in reported.events)
    assert [e.waiting for e in unreported.events] == [e.waiting for e in reported.events]
