"""The monitor's registry: every invariant check, filed under the catalogue ids it reports.

A check is a function of the monitor and one iteration's event (or of the run's end) that returns
the first :class:`~.findings.Finding` it sees, or ``None``. It registers with a decorator naming
the step of the iteration it belongs to (:data:`kvsched.spec.vocabulary.STEPS`), every id it
may report, and when a steady line may skip it::

    def _no_idle_slot(monitor: Monitor, line: SteadyLine) -> bool:
        return line.batch >= monitor.limits.batch_limit or not line.queued

    @per_iteration("slots", "BATCH-3", steady=Steady(line=_no_idle_slot))
    def no_idle_slot_while_the_head_fits(monitor: Monitor, event: IterationEvent) -> ...:
        ...

The monitor (:mod:`.runtime`) runs the steps in the spec's order and, within a step, the checks in
the order they were registered (:mod:`.checklist`, then :mod:`.checklist_update`, top to bottom). A
new invariant therefore touches the catalogue, its row in spec/semantics.md and one registered
function with its :class:`Steady` declaration; the registry test holds them in step.

Every per-iteration check also says, with its :class:`Steady`, when the event-log checker's fast
path (checks/eventlog/steady.py) may take a line in without running it: on which steady lines,
for which requests they name, and on which allocations, as predicates beside the check. What a
log declares reaches a predicate through the monitor it reads, so a predicate that cannot judge
a declaration's lines declines them, and no log is kept off the fast path as a whole. The fast
path decides from those alone whether a check would have work on a line; a check it has no
predicate for is one whose work its lazy counts carry (``counted`` says which), so that what is
still owed to the predicates is seen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

from kvsched.checks.monitor.batch import BatchRules
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.liveness import LivenessRules
from kvsched.checks.monitor.order import OrderRules
from kvsched.checks.monitor.pages import PageLedger
from kvsched.checks.monitor.prefix import PrefixContent
from kvsched.checks.monitor.requests import RequestLedger
from kvsched.checks.monitor.steady_line import SteadyLine
from kvsched.checks.monitor.steady_request import SteadyRequest
from kvsched.reference.engine import SchedulerFault
from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.vocabulary import STEPS, Step
from kvsched.spec.workload import Limits


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
    limits: Limits
    applicable: set[str]
    """The ids of the invariants that apply to the declared policy and design."""
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


Tables = Mapping[str, tuple[int, ...]]
AllocationCheck = Callable[
    [Monitor, int, Tables, Tables, Tables, Mapping[str, int]], "Finding | None"
]
LinePredicate = Callable[[Monitor, SteadyLine], bool]
RequestPredicate = Callable[[SteadyRequest], int]
FreesPredicate = Callable[[Tables, Tables], bool]

FOREVER: Final = 1 << 60
"""A request predicate's horizon when steady decoding never gives its check work. ``Final``, so
that compiled code inlines it, and below 2**62, so that it holds it, and a clock plus it,
unboxed: each comparison with it is then a machine comparison, not a call on a boxed int."""


@dataclass(frozen=True)
class Steady:
    """When a steady line may go without a check (the fast path's only say in it)."""

    line: LinePredicate | None = None
    """Whether a steady line may skip it; ``None``: every steady line may, its shape excluding
    what the check looks for."""
    request: RequestPredicate | None = None
    """For a request the line names: how many more lines it may decode in, one token each,
    without a line naming it before the check has work on it again; negative if the check has
    work on it in this line. ``None``: the check never has work on a steadily decoding
    request."""
    allocations: AllocationCheck | None = None
    """The check on an iteration's allocations alone, where it reads nothing else of an event:
    ``(monitor, iteration, allocated, tables, shared, cached)``, with ``tables`` those of the
    requests allocated, after the schedule. The fast path runs it on every steady line that
    allocates instead of declining the line, so it returns at once in a log where it has no
    work. ``None``: the check has no work on a steady line's allocations."""
    frees: FreesPredicate | None = None
    """For a steady line that finishes requests: whether the check may skip what they gave
    back, ``(given, tables)``, with ``tables`` those of the requests finished, after the
    line's schedule. ``None``: the check has no work on what a steady line's finished
    requests give back."""
    counted: str = ""
    """What of the check the fast path's own counts carry instead (lazy tokens, deferred page
    holders), to be moved into predicates; empty when the predicates say everything."""


@dataclass(frozen=True)
class Check(Generic[Subject]):
    """One registered check: the ids it may report, and where it runs."""

    name: str
    step: Step | None
    """Its step within an iteration; ``None`` for an end-of-run check."""
    ids: tuple[str, ...]
    run: Callable[[Monitor, Subject], Finding | None]
    steady: Steady | None = None
    """When the fast path may skip it (per-iteration checks); ``None`` for an end-of-run check."""


ITERATION_CHECKS: dict[Step, list[Check[IterationEvent]]] = {step: [] for step in STEPS}
END_CHECKS: list[Check[RunEnd]] = []

IterationFn = Callable[[Monitor, IterationEvent], "Finding | None"]
EndFn = Callable[[Monitor, RunEnd], "Finding | None"]


def per_iteration(step: Step, *ids: str, steady: Steady) -> Callable[[IterationFn], IterationFn]:
    """Register a check run in every iteration, at ``step``, that may report ``ids``, and when a
    steady line may skip it (``steady``)."""
    if step not in ITERATION_CHECKS:
        raise ValueError(f"unknown step {step!r}; the steps are {', '.join(STEPS)}")

    def register(function: IterationFn) -> IterationFn:
        check = Check(_name(function, ids), step, ids, function, steady)
        ITERATION_CHECKS[step].append(check)
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
