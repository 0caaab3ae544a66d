"""The event-jumping replay gives exactly the stepped loop's results and metrics.

For every workload and both reference policies, ``fastpath.replay`` must agree with
``engine.run`` + ``compute_metrics`` on every request (admission, finish, wait, pages) and on every
metric of section 7, floats bit for bit. Hypothesis draws the workloads; the tight pools, where
the peak-page commitment of section 3.2 decides admission, get a strategy of their own.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, event, find, given, settings
from hypothesis import strategies as st

from kvsched.checks.search.strategies import workloads
from kvsched.reference import POLICIES, compute_metrics, run
from kvsched.reference.families import FAMILIES, generate
from kvsched.reference.fastpath import RequestResult, replay, stepped_results
from kvsched.spec.scope import OutOfScope
from kvsched.spec.teaching import PUBLISHED, load_teaching_trace
from kvsched.spec.workload import Limits, Request, Workload, WorkloadError, peak_pages

policies = st.sampled_from(sorted(POLICIES))


def assert_same_as_stepped(workload: Workload, policy: str) -> None:
    stepped = run(workload, POLICIES[policy])
    assert stepped.drained
    fast = replay(workload, policy)
    assert fast.results() == stepped_results(stepped)
    assert fast.metrics == compute_metrics(workload, stepped.events)


def commitment_binds(workload: Workload) -> bool:
    """Whether, under continuous batching, a request waited with a slot free: pages held it back."""
    stepped = run(workload, POLICIES["continuous"])
    limit = workload.limits.batch_limit
    return any(e.waiting and len(e.active) < limit for e in stepped.events)


@st.composite
def tight_workloads(draw: st.DrawFn) -> Workload:
    """Many requests, long outputs, a pool between the largest peak and half the sum of peaks.

    Long outputs make stretches of a fixed batch longer than a page, so the periodic accounting
    of wasted slots is exercised; the tight pool makes admission wait on committed pages (3.2).
    """
    page_size = draw(st.integers(1, 8))
    batch_limit = draw(st.integers(1, 8))
    shapes = draw(
        st.lists(
            st.tuples(st.integers(0, 6), st.integers(0, 40), st.integers(1, 40)),
            min_size=1,
            max_size=20,
        )
    )
    clock, requests = 0, []
    for index, (gap, prompt, output) in enumerate(shapes):
        clock += gap
        requests.append(Request(f"q{index}", clock, prompt, output))
    peaks = [peak_pages(r, page_size) for r in requests]
    pool = draw(st.integers(max(peaks), max(max(peaks), sum(peaks) // 2)))
    limits = Limits(batch_limit=batch_limit, page_size=page_size, pool_pages=pool)
    return Workload("tight", limits, tuple(requests))


@given(workloads(max_requests=12, max_output=30, max_gap=40), policies)
def test_replay_matches_stepped_loop(workload: Workload, policy: str) -> None:
    assert_same_as_stepped(workload, policy)


@given(tight_workloads(), policies)
def test_replay_matches_stepped_loop_in_tight_pools(workload: Workload, policy: str) -> None:
    event(f"commitment binds: {commitment_binds(workload)}")
    assert_same_as_stepped(workload, policy)


def test_tight_strategy_reaches_the_commitment_rule() -> None:
    # Guards the strategy above: if it stopped producing pools that hold a request back while a
    # slot is free, the property would silently stop covering section 3.2. (find raises if not.)
    quick = settings(max_examples=200, derandomize=True, database=None, phases=[Phase.generate])
    found = find(tight_workloads(), commitment_binds, settings=quick)
    assert commitment_binds(found)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_teaching_trace(policy: str) -> None:
    workload = load_teaching_trace()
    assert_same_as_stepped(workload, policy)
    assert replay(workload, policy).metrics.iterations == PUBLISHED[policy].iterations


SOME_FAMILIES = ["poisson-long-tight", "bursty-heavy-tight", "bursty-short-roomy"]


@pytest.mark.parametrize("family", SOME_FAMILIES)
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_families(family: str, policy: str) -> None:
    assert_same_as_stepped(generate(family, 200, seed=7), policy)


def test_result_of_one_request() -> None:
    # a arrives at 0 and runs iterations 1-3; b arrives at 0, waits for a's pages, runs 4-5.
    limits = Limits(batch_limit=2, page_size=4, pool_pages=2)
    workload = Workload("two", limits, (Request("a", 0, 4, 3), Request("b", 0, 1, 2)))
    fast = replay(workload, "continuous")
    assert fast.result(0) == RequestResult(admitted=1, finished=3, wait=0, pages=2)
    assert fast.result(1) == RequestResult(admitted=4, finished=5, wait=3, pages=1)
    assert fast.metrics.peak_pages == 2


def test_rejects_an_unknown_policy() -> None:
    with pytest.raises(OutOfScope, match=r"'round-robin' is not a reference policy.*stepped"):
        replay(load_teaching_trace(), "round-robin")


def test_rejects_a_request_that_never_fits() -> None:
    limits = Limits(batch_limit=1, page_size=4, pool_pages=1)
    workload = Workload("big", limits, (Request("a", 0, 4, 1),))
    with pytest.raises(WorkloadError, match=r"request #0 \('a'\): needs 2 pages"):
        replay(workload, "static")


def test_every_family_replays_within_the_invariants() -> None:
    # At a size where the stepped loop would take seconds per family: what must hold anyway.
    for name in FAMILIES:
        workload = generate(name, 2000, seed=1)
        limits = workload.limits
        for policy in POLICIES:
            metrics = replay(workload, policy).metrics
            assert metrics.tokens == sum(r.output_tokens for r in workload.requests)
            assert metrics.peak_pages <= limits.pool_pages  # PAGE-5, by the commitment of 3.2
            assert metrics.peak_wasted_slots < limits.batch_limit * limits.page_size  # PAGE-1
            assert 0 < metrics.utilization <= 1  # BATCH-1
            assert metrics.p50_wait <= metrics.p95_wait <= metrics.max_wait
