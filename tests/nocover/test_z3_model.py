"""The Z3 model of each reference scheduler gives the reference's own numbers
(checks/proofs/model.py).

The proofs in checks/proofs/induction.py are about the model; these tests tie the model to the code
it claims to describe: on concrete workloads, the model's trajectory (who is admitted, who decodes,
pages per request, who finishes, free pages, who waits, iteration by iteration) must equal the
events of kvsched.reference.run, exactly."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from kvsched.checks.proofs.model import BROKEN, Rules
from kvsched.checks.proofs.simulate import first_violation, trajectory
from kvsched.checks.search.strategies import workloads
from kvsched.reference import POLICIES, run
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import Limits, Request, Workload

POLICY_NAMES = ("static", "continuous")


def reference_trajectory(workload: Workload, policy: str) -> list[tuple[Any, ...]]:
    events = run(workload, POLICIES[policy], policy).events
    return [
        (
            e.iteration,
            e.admitted,
            e.active,
            {rid: len(pages) for rid, pages in e.page_tables.items()},
            e.finished,
            e.free_pages,
            e.waiting,
        )
        for e in events
    ]


def model_trajectory(workload: Workload, rules: Rules) -> list[tuple[Any, ...]]:
    return [
        (m.iteration, m.admitted, m.active, m.pages, m.finished, m.free_pages, m.waiting)
        for m in trajectory(workload, rules)
    ]


def workload(limits: tuple[int, int, int], *requests: tuple[str, int, int, int]) -> Workload:
    return Workload("t", Limits(*limits), tuple(Request(*r) for r in requests))


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_the_teaching_trace_gives_the_lessons_schedule(policy: str) -> None:
    teaching = load_teaching_trace()
    assert model_trajectory(teaching, Rules(policy)) == reference_trajectory(teaching, policy)


@pytest.mark.parametrize("policy", POLICY_NAMES)
@settings(max_examples=20)
@given(w=workloads(max_requests=5, max_output=5))
def test_the_model_follows_the_reference_iteration_by_iteration(policy: str, w: Workload) -> None:
    assert model_trajectory(w, Rules(policy)) == reference_trajectory(w, policy)


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICY_NAMES)
@settings(max_examples=100)
@given(w=workloads(max_requests=8, max_output=8))
def test_the_model_follows_the_reference_on_many_workloads(policy: str, w: Workload) -> None:
    assert model_trajectory(w, Rules(policy)) == reference_trajectory(w, policy)


def test_declared_order_matters_only_for_arrival_ties() -> None:
    # Declared out of arrival order, with a tie: the model numbers requests as the engine queues
    # them, so the run is the same whatever the declaration order.
    w = workload((1, 1, 4), ("late", 3, 0, 2), ("tie-b", 0, 0, 1), ("tie-a", 0, 1, 2))
    for policy in POLICY_NAMES:
        steps = model_trajectory(w, Rules(policy))
        assert steps == reference_trajectory(w, policy)
        assert [s[1] for s in steps if s[1]] == [("tie-b",), ("tie-a",), ("late",)]


def test_the_pool_binding_holds_the_head_and_everyone_behind_it() -> None:
    # Pool of 3 pages of 1 token: a (peak 3) fills it, so b waits for it although a slot is free.
    w = workload((2, 1, 3), ("a", 0, 1, 2), ("b", 0, 0, 1), ("c", 0, 0, 1))
    steps = model_trajectory(w, Rules("continuous"))
    assert steps == reference_trajectory(w, "continuous")
    assert steps[0][1] == ("a",) and steps[0][6] == ("b", "c")
    assert steps[2][1] == ("b", "c")


@settings(max_examples=10)
@given(w=workloads(max_requests=4, max_output=4))
def test_the_model_obeys_the_catalogue_on_concrete_workloads(w: Workload) -> None:
    for policy in POLICY_NAMES:
        assert first_violation(w, Rules(policy)) is None


@pytest.mark.slow
def test_the_model_obeys_the_catalogue_on_the_teaching_trace() -> None:
    teaching = load_teaching_trace()
    for policy in POLICY_NAMES:
        assert first_violation(teaching, Rules(policy)) is None


def test_static_admitting_mid_batch_is_continuous_batching() -> None:
    # The broken static variant only opens admission mid-batch: it must then run exactly as the
    # reference continuous scheduler, and break BATCH-2 where the two policies part.
    broken = BROKEN["static-admits-mid-batch"]
    teaching = load_teaching_trace()
    assert model_trajectory(teaching, broken) == reference_trajectory(teaching, "continuous")
    violation = first_violation(teaching, broken)
    assert violation is not None and violation[1] == "no-mid-batch-admission"


def test_a_leaking_scheduler_breaks_page_4_in_the_iteration_it_finishes() -> None:
    w = workload((1, 2, 4), ("a", 0, 1, 2), ("b", 0, 0, 1))
    assert first_violation(w, BROKEN["finished-keeps-pages"]) == (2, "only-active-hold")
    assert first_violation(w, Rules("continuous")) is None
