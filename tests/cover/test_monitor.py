"""The runtime monitor on the lesson model: clean on the reference, each invariant id caught.

Every mutant below breaks exactly one rule of spec/semantics.md; the monitor must name that rule,
the iteration and the requests or pages involved. Extensions for real engines are tested in
test_monitor_engines.py.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from kvsched.checks.monitor.runtime import monitor_run
from kvsched.checks.mutants.batching import (
    DecodesTwice,
    FinishesTwice,
    IgnoresBatchLimit,
    StaticAdmitsMidBatch,
    TokenForWaitingRequest,
)
from kvsched.checks.mutants.paging import KeepsPagesOnFinish, LeakOnFinish
from kvsched.reference import POLICIES, ContinuousScheduler, StaticScheduler, run
from kvsched.reference.scheduler import Sequence
from kvsched.spec.protocol import ScheduledBatch
from kvsched.spec.teaching import TEACHING_TRACE, load_teaching_trace
from kvsched.spec.workload import Limits, Request, Workload, pages_for, peak_pages


def workload(limits: tuple[int, int, int], *requests: tuple[str, int, int, int]) -> Workload:
    return Workload("test", Limits(*limits), tuple(Request(*r) for r in requests))


# Two slots, pages of 4, 8 pages: a and b start together; c waits for a slot.
W = workload((2, 4, 8), ("a", 0, 5, 3), ("b", 0, 2, 6), ("c", 1, 3, 2))


def random_workload(rng: random.Random) -> Workload:
    page_size = rng.choice([1, 2, 4, 16])
    requests = [
        Request(f"r{i}", rng.randint(0, 8), rng.choice([0, page_size, rng.randint(0, 40)]),
                rng.choice([1, rng.randint(1, 12)]))
        for i in range(rng.randint(1, 8))
    ]  # fmt: skip
    peak = max(peak_pages(r, page_size) for r in requests)
    pool = rng.choice([peak, peak + 1, rng.randint(peak, 3 * peak)])
    return Workload("random", Limits(rng.randint(1, 4), page_size, pool), tuple(requests))


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_reference_checks_clean_on_varied_workloads(policy: str) -> None:
    rng = random.Random(policy)
    for _ in range(150):
        w = random_workload(rng)
        assert monitor_run(run(w, POLICIES[policy])) is None, w


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_reference_checks_clean_on_the_teaching_trace(policy: str) -> None:
    if not TEACHING_TRACE.exists():
        pytest.skip("the teaching trace is not reconstructed yet")
    result = run(load_teaching_trace(), POLICIES[policy])
    assert result.drained
    assert monitor_run(result) is None


# Mutants of the reference, one broken rule each -------------------------------------------------
# A bug planted exactly as in the mutant zoo comes from there (kvsched.checks.mutants). The ones
# below differ from the zoo's on purpose: each shows on W or a smaller workload with the exact
# iteration, requests and pages the table expects.


class OffByOnePages(ContinuousScheduler):
    def _grow(self, seq: Sequence) -> None:  # forgets this iteration's token (PAGE-1)
        missing = pages_for(seq.request.prompt_tokens + seq.generated, 4) - len(seq.pages)
        if missing > 0:
            seq.pages += type(seq.pages)(self.pool.allocate(seq.request.id, missing))


class SecondOwner(ContinuousScheduler):
    def schedule(self) -> ScheduledBatch:  # b's table also lists a's first page (PAGE-2)
        batch = super().schedule()
        tables = dict(batch.page_tables)
        if "a" in tables and "b" in tables:
            tables["b"] = (*tables["b"], tables["a"][0])
        return replace(batch, page_tables=tables)


class IgnoresPages(ContinuousScheduler):
    def can_admit(self, request: Request) -> bool:  # overcommits the pool (PAGE-5)
        return len(self.running) < self.limits.batch_limit


class SkipsOne(ContinuousScheduler):
    def schedule(self) -> ScheduledBatch:  # DEC-1 (exactly one, 3.4)
        batch = super().schedule()
        return replace(batch, decode=batch.decode[1:])


class DropsRequest(ContinuousScheduler):
    def schedule(self) -> ScheduledBatch:  # b vanishes from the batch in iteration 2 (REQ-2)
        self.running = [s for s in self.running if not (s.request.id == "b" and s.generated)]
        return super().schedule()


class ContinuousIdles(ContinuousScheduler):
    def admission_open(self) -> bool:  # BATCH-3: waits for the batch to drain
        return not self.running


class NewestFirst(ContinuousScheduler):
    def add_request(self, request: Request) -> None:  # BATCH-4
        self.waiting.appendleft(request)


class NeverAdmits(StaticScheduler):
    def admission_open(self) -> bool:  # LIVE-2 (stranded), and LIVE-1 at the end
        return False


class RaisesInIteration3(ContinuousScheduler):
    calls = 0

    def schedule(self) -> ScheduledBatch:  # PROTO-1
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("scheduler exploded")
        return super().schedule()


# (mutant, policy, workload, expected id, iteration, requests, pages)
MUTANTS: list[tuple[Any, str, Workload, str, int, tuple[str, ...], tuple[int, ...]]] = [
    (OffByOnePages, "continuous", workload((1, 4, 4), ("a", 0, 4, 2)), "PAGE-1", 1, ("a",), ()),
    (SecondOwner, "continuous", W, "PAGE-2", 1, ("b", "a"), (0,)),
    (LeakOnFinish, "continuous", W, "PAGE-3", 3, ("a",), (0, 1)),
    (KeepsPagesOnFinish, "continuous", W, "PAGE-4", 3, ("a",), (0, 1)),
    (IgnoresPages, "continuous", workload((2, 4, 2), ("a", 0, 0, 8), ("b", 0, 0, 8)), "PAGE-5",
     1, ("a", "b"), ()),
    (IgnoresBatchLimit, "continuous", W, "BATCH-1", 2, ("a", "b", "c"), ()),
    (DecodesTwice, "continuous", W, "DEC-1", 1, ("a",), ()),
    (SkipsOne, "continuous", W, "DEC-1", 1, ("a",), ()),
    (TokenForWaitingRequest, "continuous", W, "DEC-2", 2, ("c",), ()),
    (DropsRequest, "continuous", workload((2, 4, 8), ("a", 0, 5, 3), ("b", 0, 2, 6)), "REQ-2",
     2, ("b",), ()),
    (FinishesTwice, "continuous", W, "REQ-2", 4, ("a",), ()),
    (StaticAdmitsMidBatch, "static", W, "BATCH-2", 4, ("c", "b"), ()),
    (ContinuousIdles, "continuous", W, "BATCH-3", 4, ("c",), ()),
    (NewestFirst, "continuous", workload((1, 4, 8), ("a", 0, 1, 1), ("b", 0, 1, 1)), "BATCH-4",
     1, ("b", "a"), ()),
    (NeverAdmits, "static", W, "LIVE-2", 1, ("a",), ()),
    (RaisesInIteration3, "continuous", W, "PROTO-1", 3, (), ()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("mutant", "policy", "w", "invariant", "iteration", "requests", "pages"),
    MUTANTS,
    ids=[m[0].__name__ for m in MUTANTS],
)
def test_each_mutant_is_caught_with_its_id_iteration_requests_and_pages(
    mutant: Any, policy: str, w: Workload, invariant: str, iteration: int,
    requests: tuple[str, ...], pages: tuple[int, ...],
) -> None:  # fmt: skip
    finding = monitor_run(run(w, mutant, policy=policy))
    assert finding is not None
    assert (finding.invariant, finding.iteration) == (invariant, iteration), finding.message
    assert finding.requests == requests
    assert finding.pages == pages
    assert finding.message and str(finding).startswith(invariant)
    assert 1 <= len(finding.recent) <= 3
    if invariant == "PROTO-1":  # the fault's iteration recorded no event
        assert finding.recent[-1].iteration == iteration - 1
    elif iteration:
        assert finding.recent[-1].iteration == iteration


def test_admission_before_arrival_is_req_1() -> None:
    # The run admits b in iteration 1; a workload where b arrives at time 3 makes that early.
    result = run(W, ContinuousScheduler)
    later = replace(W, requests=(W.requests[0], replace(W.requests[1], arrival=3), W.requests[2]))
    finding = monitor_run(replace(result, workload=later))
    assert finding is not None
    assert (finding.invariant, finding.iteration, finding.requests) == ("REQ-1", 1, ("b",))


def test_batch_3_counts_an_exact_fit_as_a_fit() -> None:
    # a (2 peak pages) finishes in iteration 2; c's 3 peak pages then exactly fill the pool
    # beside b's 3, so the reference admits c in iteration 3 and the idler does not.
    w = workload((2, 4, 6), ("a", 0, 4, 2), ("b", 0, 4, 6), ("c", 0, 8, 2))
    assert monitor_run(run(w, ContinuousScheduler)) is None
    finding = monitor_run(run(w, ContinuousIdles))
    assert finding is not None and (finding.invariant, finding.iteration) == ("BATCH-3", 3)


def test_policy_decides_which_invariants_apply() -> None:
    # Static-like idling is BATCH-3 under "continuous" and fine under "static".
    assert monitor_run(run(W, ContinuousIdles, policy="static")) is None
    # A policy of its own gets only the invariants that apply to any policy.
    assert monitor_run(run(W, NewestFirst, policy="my-policy")) is None
