"""The stateful test (checks/search/stateful.py): its driver is the engine, the reference
passes it, and broken schedulers fail it with the right id and a workload that replays the
failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvsched.checks.monitor.runtime import monitor_run
from kvsched.checks.mutants.batching import DecodesTwice, IgnoresBatchLimit
from kvsched.checks.mutants.paging import NeverReturnsPages
from kvsched.checks.search.explore import run_stateful
from kvsched.checks.search.stateful import state_machine, state_machine_test_case
from kvsched.checks.search.strategies import workloads
from kvsched.reference import POLICIES, ContinuousScheduler, SchedulerFault, StaticScheduler, run
from kvsched.reference.engine import SchedulerDriver, iteration_bound
from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.workload import (
    Limits,
    Request,
    Workload,
    arrival_order,
    load_workload,
    peak_pages,
)

# The reference schedulers run through the state machine as any user's suite would run theirs.
TestContinuousMachine = state_machine_test_case(ContinuousScheduler, "continuous")
TestStaticMachine = state_machine_test_case(StaticScheduler, "static")


class RaisesOnSecondRequest(ContinuousScheduler):
    """Raises from add_request() for the second request it is given (PROTO-1)."""

    def add_request(self, request: Request) -> None:
        if len(self.waiting) + len(self.running) >= 1:
            raise RuntimeError("only one request, please")
        super().add_request(request)


class KeepsOnePageFree(ContinuousScheduler):
    """A watermark of one page at admission: a declared extension, not a bug, but the reference
    admits differently."""

    def can_admit(self, request: Request) -> bool:
        peak = peak_pages(request, self.limits.page_size)
        fits = self.committed_pages + peak <= self.limits.pool_pages - 1
        return len(self.running) < self.limits.batch_limit and fits


def _driven(workload: Workload, factory: SchedulerFactory) -> tuple[IterationEvent, ...]:
    """The events of ``workload`` with arrivals delivered as section 3.1 says, by the driver."""
    driver = SchedulerDriver(factory, workload.limits)
    pending = arrival_order(workload.requests)
    events: list[IterationEvent] = []
    finished: set[str] = set()
    iteration = 0
    while len(finished) < len(workload.requests) and iteration < iteration_bound(workload):
        iteration += 1
        due = [r for r in pending if r.arrival < iteration]
        pending = pending[len(due) :]
        event = driver.step(iteration, due)
        if isinstance(event, SchedulerFault):
            break
        events.append(event)
        finished.update(event.finished)
    return tuple(events)


FACTORIES: list[SchedulerFactory] = [
    StaticScheduler,
    ContinuousScheduler,
    DecodesTwice,
    NeverReturnsPages,
    RaisesOnSecondRequest,
]


@given(workloads(), st.sampled_from(FACTORIES))
def test_the_driver_records_what_the_engine_records(
    workload: Workload, factory: SchedulerFactory
) -> None:
    assert _driven(workload, factory) == run(workload, factory).events


def test_a_constructor_that_raises_is_a_fault_not_a_crash() -> None:
    def refuses(limits: Limits) -> ContinuousScheduler:
        raise ValueError(f"cannot serve {limits}")

    driver = SchedulerDriver(refuses, Limits(1, 1, 1))
    fault = driver.step(1, [Request("a", 0, 0, 1)])
    assert isinstance(fault, SchedulerFault) and fault.call == "__init__"
    assert "ValueError: cannot serve" in fault.message


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_the_reference_passes_and_agrees_with_itself(policy: str) -> None:
    result = run_stateful(POLICIES[policy], policy, max_examples=30)
    assert result.clean and result.failure is None
    assert result.runs == 30


@pytest.mark.parametrize(
    ("mutant", "invariant", "requests"),
    [
        (DecodesTwice, "DEC-1", 1),
        (IgnoresBatchLimit, "BATCH-1", 2),
        (NeverReturnsPages, "PAGE-3", 1),
        (RaisesOnSecondRequest, "PROTO-1", 2),
    ],
)
def test_a_planted_bug_fails_the_state_machine(
    mutant: type[ContinuousScheduler], invariant: str, requests: int, tmp_path: Path
) -> None:
    result = run_stateful(mutant, "continuous")
    failure = result.failure
    assert failure is not None and failure.finding is not None
    assert failure.finding.invariant == invariant
    assert failure.summary.startswith(invariant)
    assert len(failure.workload.requests) == requests
    assert failure.reproduce.startswith("@reproduce_failure(")
    # The rules that failed are a workload: the engine run of the saved file fails the same way.
    saved = load_workload(failure.save(tmp_path / "stateful.json"))
    replayed = monitor_run(run(saved, mutant, policy="continuous"))
    assert replayed is not None
    assert (replayed.invariant, replayed.iteration) == (invariant, failure.finding.iteration)


def test_a_declared_extension_is_judged_on_the_invariants_only() -> None:
    watermark = TargetProperties(policy="continuous", watermark_pages=1)
    assert not state_machine(KeepsOnePageFree, "continuous", properties=watermark).config.compare
    assert state_machine(KeepsOnePageFree, "continuous").config.compare
    # Compared anyway, it disagrees with the reference in the first iteration it holds back.
    result = run_stateful(KeepsOnePageFree, "continuous", properties=watermark, compare=True)
    assert result.failure is not None and result.failure.finding is None
    assert "admitted [] where the reference continuous scheduler admitted ['a']" in (
        result.failure.summary
    )


def test_a_policy_without_reference_cannot_be_compared() -> None:
    assert not state_machine(ContinuousScheduler, "lifo").config.compare
    with pytest.raises(ValueError, match="no reference scheduler for policy 'lifo'"):
        state_machine(ContinuousScheduler, "lifo", compare=True)
