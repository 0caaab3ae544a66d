"""The monitor's registry: every invariant check, filed under the catalogue ids it reports.

A check is a function of the monitor and one iteration's event (or of the run's end) that returns
the first :class:`~.findings.Finding` it sees, or ``None``. It registers with a decorator naming
the step of the iteration it belongs to (:data:`kvsched.spec.vocabulary.STEPS`) and every id it
may report::

    @per_iteration("admission", "BATCH-1")
    def slots_within_the_batch_limit(monitor: Monitor, event: IterationEvent) -> Finding | None:
        ...

The monitor (:mod:`.runtime`) runs the steps in the spec's order and, within a step, the checks in
the order they were registered (:mod:`.checklist`, top to bottom). A new invariant therefore
touches the catalogue, its row in spec/semantics.md and one registered function; the registry test
holds the three in step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kvsched.checks.monitor.batch import BatchRules
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.liveness import LivenessRules
from kvsched.checks.monitor.order import OrderRules
from kvsched.checks.monitor.pages import PageLedger
from kvsched.checks.monitor.prefix import PrefixContent
from kvsched.checks.monitor.requests import RequestLedger
from kvsched.reference.engine import SchedulerFault
from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.vocabulary import STEPS, Step


class Monitor(Protocol):
    """What a check reads of the monitor (:class:`.runtime.Monitor`): its ledgers as of the step
    the check runs in."""

    requests: RequestLedger
    pages: PageLedger
    batch: BatchRules
    order: OrderRules
    liveness: LivenessRules
    prefix: PrefixContent
    arrivals: list[str]
    """The requests that joined the queue in this iteration, in queue order."""
    properties: TargetProperties
    computed: Mapping[str, int]
    """Tokens each request computed in this iteration; set from the ``decode`` step on."""
    iteration: int
    all_findings: bool
    """Whether checking goes on after a violation."""


@dataclass(frozen=True)
class RunEnd:
    """What the end-of-run checks see: whether the run drained, and why it stopped if not."""

    drained: bool
    fault: SchedulerFault | None = None
    """The target raised or answered outside the protocol, which stopped the run."""


Subject = TypeVar("Subject", IterationEvent, RunEnd)


@dataclass(frozen=True)
class Check(Generic[Subject]):
    """One registered check: the ids it may report, and where it runs."""

    name: str
    step: Step | None
    """Its step within an iteration; ``None`` for an end-of-run check."""
    ids: tuple[str, ...]
    run: Callable[[Monitor, Subject], Finding | None]


ITERATION_CHECKS: dict[Step, list[Check[IterationEvent]]] = {step: [] for step in STEPS}
END_CHECKS: list[Check[RunEnd]] = []

IterationFn = Callable[[Monitor, IterationEvent], "Finding | None"]
EndFn = Callable[[Monitor, RunEnd], "Finding | None"]


def per_iteration(step: Step, *ids: str) -> Callable[[IterationFn], IterationFn]:
    """Register a check run in every iteration, at ``step``, that may report ``ids``."""
    if step not in ITERATION_CHECKS:
        raise ValueError(f"unknown step {step!r}; the steps are {', '.join(STEPS)}")

    def register(function: IterationFn) -> IterationFn:
        ITERATION_CHECKS[step].append(Check(_name(function, ids), step, ids, function))
        return function

    return register


def at_end(*ids: str) -> Callable[[EndFn], EndFn]:
    """Register a check run once after the last iteration that may report ``ids``."""

    def register(function: EndFn) -> EndFn:
        END_CHECKS.append(Check(_name(function, ids), None, ids, function))
        return function

    return register


def _name(function: Callable[..., object], ids: tuple[str, ...]) -> str:
    if not ids:
        raise ValueError(f"{function.__name__} registers no invariant id")
    return function.__name__


def iteration_plan() -> tuple[Check[IterationEvent], ...]:
    """Every per-iteration check, in the order the monitor runs them."""
    return tuple(check for step in STEPS for check in ITERATION_CHECKS[step])


def registered_ids() -> dict[str, tuple[str, ...]]:
    """Each id any check may report, with the names of the checks that report it."""
    by_id: dict[str, list[str]] = {}
    checks = [(check.name, check.ids) for check in iteration_plan()]
    checks += [(check.name, check.ids) for check in END_CHECKS]
    for name, ids in checks:
        for invariant in ids:
            by_id.setdefault(invariant, []).append(name)
    return {invariant: tuple(names) for invariant, names in by_id.items()}
