"""Shrinking keeps what a failure needs of a request beyond its sizes (a prefix group, a priority)
and drops what it does not (checks/search/shrink.py); the search's counterexamples are shrunk
again so that a corner bug is shown on a handful of requests."""

from __future__ import annotations

from kvsched.checks.mutants.corners import PriorityVictimRefundsTwice, RevivedHitsCountedFree
from kvsched.checks.mutants.engine import V1, TokenFromNothing
from kvsched.checks.search.corners import BOUNDARY_SHAPES, HIT_GROUP
from kvsched.checks.search.explore import search
from kvsched.checks.search.shrink import Spent, shrink_workload, smallest_failing
from kvsched.spec.workload import Limits, Request, Workload

HIT = Workload(
    "hit",
    Limits(2, 4, 9),
    (
        Request("x", 0, 3, 2),
        Request("y", 0, 8, 2, HIT_GROUP, 8),
        Request("z", 1, 5, 1, priority=3),
        Request("w", 3, 8, 2, HIT_GROUP, 8),
    ),
)


def test_a_prefix_the_failure_needs_is_kept_and_the_rest_dropped() -> None:
    def shares(workload: Workload) -> bool:
        grouped = [r for r in workload.requests if r.prefix_group and r.prefix_tokens]
        return len(grouped) >= 2

    smallest = shrink_workload(HIT, shares)
    assert [r.id for r in smallest.requests] == ["a", "b"]  # renamed, fields kept
    # each prompt shrank with its prefix, which stays within it (section 1.1)
    assert all(r.prefix_group == HIT_GROUP for r in smallest.requests)
    assert all(r.prompt_tokens == r.prefix_tokens == 1 for r in smallest.requests)
    assert all(r.priority == 0 for r in smallest.requests)


def test_a_priority_the_failure_needs_is_kept_and_lowered() -> None:
    def inverted(workload: Workload) -> bool:
        return any(r.priority >= 2 for r in workload.requests)

    smallest = shrink_workload(HIT, inverted)
    assert smallest.requests == (Request("a", 0, 0, 1, priority=2),)


def test_the_ci_search_shows_each_corner_bug_on_at_most_four_requests() -> None:
    for mutant in (PriorityVictimRefundsTwice, TokenFromNothing, RevivedHitsCountedFree):
        found = search(mutant, "continuous", properties=mutant.properties).counterexample
        assert found is not None and found.deterministic, mutant
        assert len(found.workload.requests) <= 4, (mutant, found.workload)


def test_smallest_failing_says_when_the_workload_no_longer_fails() -> None:
    shape = next(s for s in BOUNDARY_SHAPES if s.name == "full hit on a page multiple")
    assert smallest_failing(shape, "DEC-3", V1, "continuous", V1.properties) is None
    found = smallest_failing(
        shape, "DEC-3", TokenFromNothing, "continuous", TokenFromNothing.properties
    )
    assert found is not None and found[1].invariant == "DEC-3"
    assert len(found[0].requests) == 2


def test_a_spent_caller_budget_ends_the_shrink_with_the_smallest_so_far() -> None:
    calls: list[int] = []

    def fails_until_spent(workload: Workload) -> bool:
        calls.append(len(workload.requests))
        if len(calls) > 3:
            raise Spent
        return True

    smallest = shrink_workload(HIT, fails_until_spent)
    # three candidates kept, the fourth call spent; the renaming's call is the only one after
    assert len(calls) == 5
    assert len(smallest.requests) == calls[2]


def test_a_crowd_the_failure_needs_shrinks_to_alike_requests_in_few_runs() -> None:
    # A bug that shows only once 30 requests have come and one of them is large, as a learner's
    # that breaks after its hundredth finished request: every request of the crowd is needed,
    # and none of their sizes but the one's.
    crowd = Workload(
        "crowd",
        Limits(4, 4, 64),
        tuple(
            Request(f"r{i}", i % 7, 5 + (i * 7) % 23, 1 + (i * 5) % 9, priority=i % 3)
            for i in range(60)
        ),
    )
    runs: list[Workload] = []

    def needs_the_crowd(workload: Workload) -> bool:
        runs.append(workload)
        return len(workload.requests) >= 30 and any(r.prompt_tokens >= 5 for r in workload.requests)

    smallest = shrink_workload(crowd, needs_the_crowd)
    assert len(smallest.requests) == 30
    large = [r for r in smallest.requests if r.prompt_tokens]
    assert [r.prompt_tokens for r in large] == [5]
    assert all((r.arrival, r.output_tokens, r.priority) == (0, 1, 0) for r in smallest.requests)
    # Request by request, the floors and the drops cost a run each: 235 runs for the same
    # witness before the floors were tried in halves and a candidate alike but for its ids was
    # run once, 57 since.
    assert len(runs) <= 80, len(runs)
