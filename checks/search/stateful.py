"""A stateful test: Hypothesis drives a scheduler through arrivals and iterations, step by step.

:func:`state_machine` builds a ``RuleBasedStateMachine`` for any scheduler factory. Its rules are
the engine's moves: a request *arrives* (now or a few iterations from now), the engine *steps* one
iteration, or it *drains* the work it has. After every iteration the target's event goes to the
runtime monitor (``Monitor.observe``), so the spec's invariants are checked where they break, and
for the reference policies the target must also agree with the reference scheduler run in step as
the model: the same admissions in the same order and the same finishes in every iteration. (For a
third-party policy only the invariants apply: its admissions are its own business.)

Every rule sequence is a workload: a request declared at time ``t`` with delay ``d`` arrives at
``t + d``, and the driver delivers arrivals and iterates exactly as ``reference.engine.run`` does.
So a failure carries the workload so far, and ``kvsched replay`` of that workload reproduces it.

Each invariant id raises its own exception type, because Hypothesis tells failures apart by type
and place: shrinking a PAGE-3 failure then never slips into a different invariant's failure.
"""

from __future__ import annotations

import json
import sys
import unittest
from dataclasses import dataclass, replace
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import Monitor
from kvsched.checks.search.profiles import profile_settings
from kvsched.checks.search.strategies import (
    AXES,
    MAX_PAGE_SIZE,
    REQUEST_IDS,
    arrival_gaps,
    limits,
    output_tokens,
)
from kvsched.reference import POLICIES, SchedulerFault
from kvsched.reference.engine import SchedulerDriver, iteration_bound
from kvsched.spec.events import IterationEvent
from kvsched.spec.invariants import CATALOGUE
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.workload import Limits, Request, Workload, arrival_order, workload_to_json


class StatefulFailure(AssertionError):
    """The target failed the stateful test; ``workload`` replays the rules that got it there."""

    def __init__(self, summary: str, workload: Workload) -> None:
        document = json.dumps(workload_to_json(workload), indent=2)
        super().__init__(f"{summary}\nWorkload so far (save it to replay):\n{document}")
        self.summary = summary
        self.workload = workload


class InvariantViolated(StatefulFailure):
    """The monitor reported ``finding``. Subclassed once per invariant id (see module docstring)."""

    def __init__(self, finding: Finding, workload: Workload) -> None:
        summary = f"{finding.invariant} in iteration {finding.iteration}: {finding.message}"
        super().__init__(summary, workload)
        self.finding = finding


class ReferenceDisagreement(StatefulFailure):
    """The target admitted or finished differently from the reference scheduler of its policy."""


VIOLATION_TYPES: dict[str, type[InvariantViolated]] = {
    invariant.id: type(f"{invariant.id.replace('-', '')}Violated", (InvariantViolated,), {})
    for invariant in CATALOGUE
}


@dataclass(frozen=True)
class MachineConfig:
    """What a built state machine drives, and how."""

    factory: SchedulerFactory
    policy: str
    properties: TargetProperties | None
    compare: bool
    """Run the reference of ``policy`` in step and require the same admissions and finishes."""
    max_requests: int


class SchedulerMachine(RuleBasedStateMachine):
    """Drives ``config.factory``'s scheduler; :func:`state_machine` builds configured subclasses."""

    config: ClassVar[MachineConfig]
    runs: ClassVar[int] = 0
    """State machines of this configured class that ran to the end without failing."""

    def __init__(self) -> None:
        super().__init__()
        self.limits = Limits(1, 1, 1)  # replaced by start(), which always runs first
        self.requests: list[Request] = []
        self.events: list[IterationEvent] = []
        self.delivered: set[str] = set()
        self.finished: set[str] = set()
        self.iteration = 0
        self.target = SchedulerDriver(self.config.factory, self.limits)
        self.model: SchedulerDriver | None = None
        self.monitor: Monitor | None = None

    @initialize(chosen=limits())
    def start(self, chosen: Limits) -> None:
        self.limits = chosen
        self.target = SchedulerDriver(self.config.factory, chosen, self.config.properties)
        if self.config.compare:
            self.model = SchedulerDriver(POLICIES[self.config.policy], chosen)

    @precondition(lambda self: len(self.requests) < self.config.max_requests)
    @rule(
        delay=arrival_gaps(max_gap=6),
        copies=st.integers(1, 3),
        pages=st.integers(0, AXES["prompt_tokens"].small - 1),  # the remainder may fill one more
        remainder=st.one_of(st.just(0), st.integers(0, MAX_PAGE_SIZE - 1)),
        output=output_tokens(),
    )
    def arrive(self, delay: int, copies: int, pages: int, remainder: int, output: int) -> None:
        """``copies`` requests (a burst) arrive ``delay`` iterations from now, each with a prompt
        of ``pages`` full pages plus ``remainder`` tokens (0: the last page exactly filled),
        trimmed to fit the pool."""
        page_size = self.limits.page_size
        budget = self.limits.pool_pages * page_size  # tokens that fit the pool (section 1)
        prompt = min(pages * page_size + remainder % page_size, budget - 1)
        output = min(output, budget - prompt)
        for _ in range(min(copies, self.config.max_requests - len(self.requests))):
            request_id = REQUEST_IDS[len(self.requests)]
            self.requests.append(Request(request_id, self.now + delay, prompt, output))
        self.monitor = None  # the monitor's workload lacks the new requests; rebuilt on next use

    @precondition(lambda self: bool(self.requests))
    @rule()
    def step(self) -> None:
        # With nothing left to serve the engine would not run an iteration, so neither does this
        # rule; it stays enabled because Hypothesis needs some rule once all requests are in.
        if self.work_left():
            self.iterate()

    @precondition(lambda self: self.work_left())
    @rule()
    def drain(self) -> None:
        while self.work_left():
            self.iterate()

    def teardown(self) -> None:
        # Hypothesis calls teardown() in a finally block, also when a rule failed or when it
        # aborted the run for lack of data; end-of-run checks then would bury that exception.
        if sys.exc_info()[0] is not None:
            return
        while self.work_left():
            self.iterate()
        if self.requests:
            drained = set(self.finished) >= {r.id for r in self.requests}
            self.judge(self.current_monitor().finish(drained))
        type(self).runs += 1

    @property
    def now(self) -> int:
        """Iterations completed; a request arriving now joins the queue in the next one (3.1)."""
        return self.iteration

    def workload(self) -> Workload:
        return Workload("stateful", self.limits, tuple(self.requests))

    def work_left(self) -> bool:
        """Whether ``reference.engine.run`` would run another iteration of the workload so far."""
        if not self.requests or {r.id for r in self.requests} <= self.finished:
            return False
        return self.iteration < iteration_bound(self.workload())

    def iterate(self) -> None:
        self.iteration += 1
        due = self.due_arrivals()
        event = self.target.step(self.iteration, due)
        if isinstance(event, SchedulerFault):
            # The target raised or answered outside the protocol: the run ends here (PROTO-1).
            self.judge(self.current_monitor().finish(drained=False, fault=event))
            return
        self.judge(self.current_monitor().observe(event))
        self.events.append(event)
        self.finished.update(event.finished)
        if self.model is not None:
            expected = self.model.step(self.iteration, due)
            if isinstance(expected, IterationEvent):
                self.agree(event, expected)

    def due_arrivals(self) -> list[Request]:
        """Requests arriving before this iteration, by arrival then declared order (3.1)."""
        due = [
            r for r in self.requests if r.arrival < self.iteration and r.id not in self.delivered
        ]
        self.delivered.update(r.id for r in due)
        return arrival_order(due)

    def current_monitor(self) -> Monitor:
        if self.monitor is None:
            # Replaying the earlier events into a monitor that knows every request so far is
            # cheap at these sizes and keeps the check incremental between arrivals.
            self.monitor = Monitor(self.workload(), self.config.policy, self.config.properties)
            for event in self.events:
                self.judge(self.monitor.observe(event))
        return self.monitor

    def judge(self, finding: Finding | None) -> None:
        if finding is not None:
            violation = VIOLATION_TYPES.get(finding.invariant, InvariantViolated)
            raise violation(finding, self.workload())

    def agree(self, event: IterationEvent, expected: IterationEvent) -> None:
        """Same admissions in the same order, and the same finishes, as the reference."""
        reference = f"the reference {self.config.policy} scheduler"
        if tuple(event.admitted) != tuple(expected.admitted):
            summary = (
                f"iteration {event.iteration}: the target admitted {list(event.admitted)} where "
                f"{reference} admitted {list(expected.admitted)}"
            )
            raise ReferenceDisagreement(summary, self.workload())
        if sorted(event.finished) != sorted(expected.finished):
            summary = (
                f"iteration {event.iteration}: the target finished {sorted(event.finished)} where "
                f"{reference} finished {sorted(expected.finished)}"
            )
            raise ReferenceDisagreement(summary, self.workload())


def state_machine(
    factory: SchedulerFactory,
    policy: str,
    *,
    properties: TargetProperties | None = None,
    compare: bool | None = None,
    max_requests: int = 6,
) -> type[SchedulerMachine]:
    """A state machine class that drives ``factory``'s scheduler under ``policy``'s invariants.

    ``compare`` runs the reference scheduler of ``policy`` in step and requires the same
    admissions and finishes. By default it is on for a reference policy under the lesson model
    and off for a target that declares extensions in ``properties`` (a watermark, preemption,
    chunked prefill ...): those legitimately schedule differently, and only the invariants apply.
    """
    if compare is None:
        lesson_model = properties is None or replace(properties, policy="") == TargetProperties()
        compare = policy in POLICIES and lesson_model
    if compare and policy not in POLICIES:
        known = ", ".join(sorted(POLICIES))
        raise ValueError(f"no reference scheduler for policy {policy!r} to compare with ({known})")
    if not 1 <= max_requests <= len(REQUEST_IDS):
        raise ValueError(f"max_requests must be within 1..{len(REQUEST_IDS)}, got {max_requests}")
    config = MachineConfig(factory, policy, properties, compare, max_requests)
    name = f"{getattr(factory, '__name__', 'Target')}Machine"
    return type(name, (SchedulerMachine,), {"config": config, "runs": 0})


def state_machine_test_case(
    factory: SchedulerFactory,
    policy: str,
    profile: str | None = None,
    *,
    properties: TargetProperties | None = None,
    compare: bool | None = None,
) -> type[unittest.TestCase]:
    """The state machine as a ``unittest.TestCase`` class, for a user's own test suite.

    With ``profile`` the test runs under that profile's settings; without, under the loaded one
    (``pytest --hypothesis-profile``). ``properties`` and ``compare`` as in :func:`state_machine`.

    >>> TestMine = state_machine_test_case(MyScheduler, "continuous")  # doctest: +SKIP
    """
    machine = state_machine(factory, policy, properties=properties, compare=compare)
    test_case = machine.TestCase
    if profile is not None:
        test_case.settings = profile_settings(profile)
    return test_case
