"""The engine loop: runs any scheduler over a workload, one iteration at a time (section 3).

The engine plays the model runner. It hands arrived requests to the scheduler, asks it for the
iteration's batch, produces one token per decode entry, reports the tokens back, and records what
it saw as an :class:`~kvsched.spec.events.IterationEvent`. It judges nothing: whether the events
obey the invariants is for the monitor in ``kvsched.checks``. What it does refuse is a scheduler
that raises or answers with something that is not a well-formed batch or outcome; the run then
stops with a :class:`SchedulerFault` (PROTO-1), never with a traceback of ours.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvsched.spec.events import IterationEvent, fixed_order
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, SchedulerFactory, StepOutcome
from kvsched.spec.workload import Limits, Request, Workload, arrival_order

from .bound import RunBound
from .record import Records
from .tracebacks import describe_failure
from .version2 import malformed_slots, malformed_version_2
from .waiting import WaitingQueue


@dataclass(frozen=True)
class SchedulerFault:
    """The scheduler under test raised, or answered outside the protocol (PROTO-1)."""

    iteration: int
    call: str
    message: str


@dataclass(frozen=True)
class Run:
    """Everything a run produced: the events, and why it stopped if it did not drain."""

    workload: Workload
    policy: str
    events: tuple[IterationEvent, ...]
    fault: SchedulerFault | None = None
    """Set when the scheduler raised or broke the protocol; the events stop before it."""
    drained: bool = True
    """False when the iteration bound (section 3.6) was reached with work left (LIVE-1)."""


def iteration_bound(workload: Workload) -> int:
    """The last iteration by which any correct scheduler has drained (section 3.6): even one
    request at a time, every request is done ``output_tokens`` iterations after the later of its
    arrival and the previous request's completion."""
    last_arrival = max((r.arrival for r in workload.requests), default=0)
    return last_arrival + sum(r.output_tokens for r in workload.requests)


def run(
    workload: Workload,
    scheduler_factory: SchedulerFactory,
    policy: str = "",
    max_iterations: int | None = None,
    properties: TargetProperties | None = None,
) -> Run:
    """Run ``scheduler_factory(workload.limits)`` over ``workload`` until it drains or the bound.

    The bound is the lesson's (3.6) plus what ``properties`` earn (:class:`.bound.RunBound`).
    """
    allowance = RunBound(workload, properties) if max_iterations is None else None
    bound = iteration_bound(workload) if max_iterations is None else max_iterations
    policy = policy or getattr(scheduler_factory, "policy", "") or _name(scheduler_factory)
    driver = SchedulerDriver(scheduler_factory, workload.limits, properties)
    if driver.fault is not None:
        return Run(workload, policy, (), fault=driver.fault, drained=False)
    joining = arrivals_by_iteration(workload.requests)
    if isinstance(driver.scheduler, Foreseeing):
        driver.scheduler.foresee(joining, bound)
    finished_ever: set[str] = set()
    events: list[IterationEvent] = []
    iteration = 0
    while len(finished_ever) < len(workload.requests) and iteration < bound:
        iteration += 1
        outcome = driver.step(iteration, joining.get(iteration, ()))
        if isinstance(outcome, SchedulerFault):
            return Run(workload, policy, tuple(events), fault=outcome, drained=False)
        events.append(outcome)
        finished_ever.update(outcome.finished)
        if allowance is not None:  # before the loop's test: this iteration may earn the next
            allowance.observe(outcome, driver.records, driver.restarted)
            bound = max(bound, allowance.value)
    drained = len(finished_ever) == len(workload.requests)
    return Run(workload, policy, tuple(events), drained=drained)


def arrivals_by_iteration(requests: Sequence[Request]) -> dict[int, tuple[Request, ...]]:
    """The requests handed to the scheduler before each iteration, in admission order, by
    iteration. 3.1 Arrival: a request with arrival time t may join from iteration t + 1 on; the
    scheduler cannot admit what it has not been handed (REQ-1)."""
    joining: dict[int, list[Request]] = {}
    for request in arrival_order(requests):
        joining.setdefault(max(request.arrival + 1, 1), []).append(request)
    return {iteration: tuple(group) for iteration, group in joining.items()}


class Foreseeing:
    """A scheduler adapter of kvsched's own that :func:`run` tells, before the first iteration,
    which requests it will hand over before each iteration and the last iteration it may run.

    Only kvsched's learner adapter derives from it, and the deadline's wrapper that a check puts
    around every target, which tells that adapter alone: a scheduler under test is not told the
    future. A learner in another process is then run several iterations per round trip, each
    iteration still asked for by this loop, with the very arrivals this loop hands over.
    """

    def foresee(self, joining: Mapping[int, Sequence[Request]], last: int) -> None:
        """``joining``: :func:`arrivals_by_iteration`; ``last``: the run's bound when it starts."""


class SchedulerDriver:
    """One scheduler under the engine's loop, one iteration per :meth:`step`.

    :func:`run` decides the arrivals from a workload; the stateful tests in ``kvsched.checks``
    decide them between iterations. Both drive the scheduler through this one loop body.
    """

    def __init__(
        self, factory: SchedulerFactory, limits: Limits, declared: TargetProperties | None = None
    ) -> None:
        self.scheduler: Any = None
        self.fault: SchedulerFault | None = None
        """Set once the scheduler raised or broke the protocol; the driver stops there."""
        try:
            self.scheduler = factory(limits)
        except Exception as error:  # a third-party constructor may raise anything: PROTO-1
            self.fault = SchedulerFault(0, "__init__", describe_failure(error))
        self.members: list[str] = []  # the batch, in admission order
        self.waiting = WaitingQueue()
        self.tables: dict[str, tuple[int, ...]] = {}
        # The page tables schedule() returned last, as returned: a tuple is immutable, so one
        # handed back again unchanged (the common case) needs no second validation.
        self.checked: dict[str, Any] = {}
        # Output tokens each request still owes: the model, not the scheduler, knows when a
        # request stops (an EOS or max_tokens), and says so in ModelOutput.stopped.
        self.owed: dict[str, int] = {}
        self.requeued: list[str] = []  # preempted, waiting again at the queue's head
        # Declared "tail" (SGLang's retraction), a preempted request rejoins behind every one
        # waiting then: the queue is a plain list, as the shared arrival order holds each once.
        tail = declared is not None and declared.requeue == "tail"
        self.tail: list[str] | None = [] if tail else None
        self.records = Records(declared, limits.page_size)
        """The run's records, moved once an iteration by the batch the scheduler returned: a
        fold restart makes a request owe more tokens (spec/eventlog.md 4.3.1), and the run's
        bound grows by what each preemption lost (:class:`.bound.RunBound`)."""
        self.restarted: dict[str, tuple[int, int]] = {}
        """The latest iteration's preemptions: the KV tokens each lost and the prompt tokens its
        restart moved to its output (:meth:`Records.preempt`)."""
        self.finishing: Sequence[str] = ()  # finished in the latest iteration, records still live

    def step(self, iteration: int, arrivals: Sequence[Request]) -> IterationEvent | SchedulerFault:
        """Hand over ``arrivals`` (in admission order), then run iteration ``iteration``."""
        if self.fault is not None:
            return self.fault
        records = self.records
        for request_id in self.finishing:  # a reader of the last event (the bound) is done
            records.finish(request_id)
        self.finishing = ()
        arrived: list[str] = []
        for request in arrivals:
            fault = _call(self.scheduler, "add_request", iteration, request)
            if isinstance(fault, SchedulerFault):
                return self._stop(fault)
            arrived.append(request.id)
            self.waiting.arrive(request.id)
            if self.tail is not None:
                self.tail.append(request.id)
            self.owed[request.id] = request.output_tokens
            records.declare(request)

        batch = _call(self.scheduler, "schedule", iteration)
        problem = (
            batch if isinstance(batch, SchedulerFault) else _malformed_batch(batch, self.checked)
        )
        if problem:
            return self._stop(_fault(problem, iteration, "schedule"))
        self.checked = dict(batch.page_tables)
        # Each preempted one to the queue's head, in turn: several end up latest first, as
        # vLLM's and nano-vllm's appendleft leave them (spec/eventlog.md 4.3).
        for request_id in batch.preempted:
            if request_id in self.members:
                self.members.remove(request_id)
            if self.tail is not None:
                self.tail.append(request_id)
            else:
                self.requeued.insert(0, request_id)
        for request_id in batch.admitted:
            if request_id not in self.members:
                self.members.append(request_id)
            if self.tail is not None and request_id in self.tail:
                self.tail.remove(request_id)
            if request_id in self.requeued:
                self.requeued.remove(request_id)
            else:
                self.waiting.admit(request_id)
        page_tables = {rid: tuple(pages) for rid, pages in batch.page_tables.items()}
        shared = {rid: tuple(pages) for rid, pages in batch.shared.items()}
        released = {rid: tuple(pages) for rid, pages in batch.preempt_freed.items()}
        schedule, allocated = fixed_order(
            self.tables,
            batch.preempted,
            released,
            batch.admitted,
            page_tables,
            shared,
        )

        # 3.4 Decode: the model produces one token per decode entry.
        tokens = dict(Counter(batch.decode))
        self._follow(batch)
        for rid, count in tokens.items():
            self.owed[rid] = self.owed.get(rid, count + 1) - count  # unknown: not stopped
        output = ModelOutput(tokens, tuple(rid for rid in tokens if self.owed[rid] <= 0))
        outcome = _call(self.scheduler, "update_from_output", iteration, output)
        problem = outcome if isinstance(outcome, SchedulerFault) else _malformed_outcome(outcome)
        if problem:
            return self._stop(_fault(problem, iteration, "update_from_output"))

        event = IterationEvent(
            iteration=iteration,
            arrived=tuple(arrived),
            admitted=tuple(batch.admitted),
            active=tuple(self.members),
            decoded=tuple(batch.decode),
            finished=tuple(outcome.finished),
            page_tables=page_tables,
            allocated=allocated,
            freed={rid: tuple(pages) for rid, pages in outcome.freed.items()},
            free_pages=outcome.free_pages,
            waiting=self._waiting(batch),
            schedule=schedule,
            computed=None if batch.computed is None else dict(batch.computed),
            cached=dict(batch.cached),
            shared=shared,
            preempted=tuple(batch.preempted),
            slots=None if batch.slots is None else dict(batch.slots),
            slots_after=None if outcome.slots is None else dict(outcome.slots),
            free_slots=outcome.free_slots,
        )
        # 3.5 Completion: finished requests leave the batch; their pages are already released.
        self.finishing = event.finished
        self.tables = event.tables_after()
        for request_id in outcome.finished:
            if request_id in self.members:
                self.members.remove(request_id)
        return event

    def _follow(self, batch: ScheduledBatch) -> None:
        """The records moved by the iteration's schedule, as the model runner sees it: what
        each preemption's restart moves to the output is owed as more output tokens (under
        recompute nothing moves; the rule is :meth:`TargetProperties.moved_on_restart`)."""
        records, owed = self.records, self.owed
        records.begin()
        self.restarted = restarted = {rid: records.preempt(rid) for rid in batch.preempted}
        for rid, (_, moved) in restarted.items():
            if moved and rid in owed:
                owed[rid] += moved
        for rid in batch.admitted:
            records.admit(rid)
        records.count(batch.computed or {}, batch.cached, batch.decode)

    def _waiting(self, batch: ScheduledBatch) -> Sequence[str]:
        """The queue as the target reports it, else arrival order, preempted ones first (or,
        declared, where they rejoined it)."""
        if batch.waiting is not None:
            return tuple(batch.waiting)
        if self.tail is not None:
            return tuple(self.tail)
        return (*self.requeued, *self.waiting.view()) if self.requeued else self.waiting.view()

    def _stop(self, fault: SchedulerFault) -> SchedulerFault:
        self.fault = fault
        return fault


def _fault(problem: SchedulerFault | str, iteration: int, call: str) -> SchedulerFault:
    return (
        problem if isinstance(problem, SchedulerFault) else SchedulerFault(iteration, call, problem)
    )


def _call(scheduler: Any, method: str, iteration: int, *args: Any) -> Any:
    try:
        return getattr(scheduler, method)(*args)
    except Exception as error:  # the scheduler under test may raise anything: a finding
        # An adapter (the learner's) names the function the user wrote, not the protocol's.
        call = getattr(error, "call", method)
        return SchedulerFault(
            iteration, call if isinstance(call, str) else method, describe_failure(error)
        )


def _malformed_batch(batch: Any, checked: Mapping[str, Any]) -> str:
    if not isinstance(batch, ScheduledBatch):
        return f"schedule() must return a ScheduledBatch, got {type(batch).__name__}"
    names = ["admitted", "decode", "preempted"] + ([] if batch.waiting is None else ["waiting"])
    for name in names:
        value = getattr(batch, name)
        if not isinstance(value, tuple | list) or not all(isinstance(x, str) for x in value):
            return f"ScheduledBatch.{name} must be a sequence of request ids, got {value!r}"
    return (
        _malformed_pages("ScheduledBatch.page_tables", batch.page_tables, checked)
        or malformed_version_2(batch)
        or malformed_slots("ScheduledBatch", batch.slots)
    )


def _malformed_outcome(outcome: Any) -> str:
    if not isinstance(outcome, StepOutcome):
        return f"update_from_output() must return a StepOutcome, got {type(outcome).__name__}"
    finished = outcome.finished
    if not isinstance(finished, tuple | list) or not all(isinstance(x, str) for x in finished):
        return f"StepOutcome.finished must be a sequence of request ids, got {finished!r}"
    if isinstance(outcome.free_pages, bool) or not isinstance(outcome.free_pages, int):
        return f"StepOutcome.free_pages must be an int, got {outcome.free_pages!r}"
    return _malformed_pages("StepOutcome.freed", outcome.freed) or malformed_slots(
        "StepOutcome", outcome.slots, outcome.free_slots
    )


def _malformed_pages(where: str, tables: Any, checked: Mapping[str, Any] | None = None) -> str:
    """Why ``tables`` is not a mapping of request ids to page ids, or "" if it is.

    A table that is the very tuple ``checked`` holds for its request was validated in an earlier
    iteration and cannot have changed since; only the others are read page by page.
    """
    if not isinstance(tables, Mapping):
        return f"{where} must map request ids to page ids, got {type(tables).__name__}"
    for rid, pages in tables.items():
        if not isinstance(rid, str):
            return f"{where} has a key that is not a request id: {rid!r}"
        if checked and type(pages) is tuple and checked.get(rid) is pages:
            continue
        if not isinstance(pages, tuple | list) or not _page_ids(pages):
            return f"{where}[{rid!r}] must be a sequence of integer page ids, got {pages!r}"
    return ""


_PLAIN_INT = frozenset({int})


def _page_ids(pages: tuple[Any, ...] | list[Any]) -> bool:
    # Plain ints, the usual case, are recognised in C; an int subclass other than bool is a page
    # id too, but rare enough to be read one by one.
    return _PLAIN_INT.issuperset(map(type, pages)) or all(
        isinstance(p, int) and not isinstance(p, bool) for p in pages
    )


def _name(factory: Any) -> str:
    return str(getattr(factory, "__name__", type(factory).__name__))
