"""The runtime monitor: checks every applicable invariant on every iteration, as the run goes.

:class:`Monitor` reads one :class:`~kvsched.spec.events.IterationEvent` at a time, in order, and
stops at the first violation with a :class:`~.findings.Finding`: the earliest iteration's, and of
several in that iteration the most specific (:func:`~.findings.most_specific`: a malformed answer,
then safety, conformance, liveness), whatever the order their checks run in. Once an iteration
has a finding, its remaining checks run too, to find any more specific one; a clean iteration
costs what it did. :func:`watch_run` then checks on to the end of the run for what followed it.

It applies the invariants of the declared policy (:func:`kvsched.spec.applicability.applicable`)
and reads the target's :class:`~kvsched.spec.properties.TargetProperties`, so a real engine's
chunked prefill, preemption, prefix sharing or reserve-ahead allocator is judged by what it
declares (spec/eventlog.md, section 4) instead of raising false alarms.

What it checks is the registry (:mod:`.registry`), filled by :mod:`.checklist`,
:mod:`.checklist_update` and the rules of their own modules (:mod:`.futile`, :mod:`.infeasible`,
:mod:`.fenced`, :mod:`.slots`): within an iteration the steps run in the spec's order
(:data:`kvsched.spec.vocabulary.STEPS`: the bound, preemption, admission, decode, page tables,
unused slots, completion and freeing), then the end-of-run checks. The work per iteration
follows what the iteration changed, never the pool or the workload: the request ledger
(:mod:`.requests`) and the page ledger (:mod:`.pages`) keep owner maps, counters and per-request
state up to date from what each event names, and the checks read them. This module needs neither
Hypothesis nor Z3.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

# Importing the checklist registers its checks, the schedule's and step's first.
from kvsched.checks.monitor import checklist as _checklist  # noqa: F401
from kvsched.checks.monitor import checklist_update as _checklist_update  # noqa: F401
from kvsched.checks.monitor import fenced as _fenced  # noqa: F401
from kvsched.checks.monitor import futile as _futile  # noqa: F401
from kvsched.checks.monitor import infeasible as _infeasible  # noqa: F401
from kvsched.checks.monitor import state_slots as _state_slots  # noqa: F401
from kvsched.checks.monitor.batch import BatchRules
from kvsched.checks.monitor.excuses import Excused
from kvsched.checks.monitor.findings import Finding, most_specific
from kvsched.checks.monitor.liveness import LivenessRules
from kvsched.checks.monitor.order import OrderRules
from kvsched.checks.monitor.pages import PageLedger
from kvsched.checks.monitor.prefix import PrefixContent
from kvsched.checks.monitor.registry import END_CHECKS, Check, RunEnd, iteration_plan
from kvsched.checks.monitor.requests import RequestLedger
from kvsched.checks.monitor.tokens import computed_tokens
from kvsched.reference.engine import Run, SchedulerFault
from kvsched.spec.applicability import applicable
from kvsched.spec.events import IterationEvent
from kvsched.spec.invariants import precedence
from kvsched.spec.properties import TargetProperties
from kvsched.spec.vocabulary import STEPS
from kvsched.spec.workload import Request, Workload

RECENT = 3
"""Iterations a finding carries: the violation's and the ones just before it."""

Later = Callable[[], IterationEvent]
"""An iteration's event made only if a finding carries it: a line a log reader took in
without making its event (checks/eventlog/steady_recent.py)."""


class Monitor:
    """Checks a run's events one iteration at a time; the first finding ends the watch.

    >>> monitor = Monitor(workload, "continuous")  # doctest: +SKIP
    >>> for event in run.events:                    # doctest: +SKIP
    ...     if finding := monitor.observe(event):
    ...         break
    ... else:
    ...     finding = monitor.finish(run.drained)
    """

    def __init__(
        self,
        workload: Workload,
        policy: str,
        properties: TargetProperties | None = None,
        all_findings: bool = False,
    ) -> None:
        declared = properties if properties is not None else TargetProperties(policy=policy)
        if policy and declared.policy and declared.policy != policy:
            raise ValueError(
                f"the target declares policy {declared.policy!r} but is checked as {policy!r}"
            )
        for page in declared.reserved_pages:
            if page >= workload.limits.pool_pages:
                raise ValueError(
                    f"reserved page {page} lies outside the pool of "
                    f"{workload.limits.pool_pages} pages"
                )
        self.policy = policy or declared.policy
        self.properties = declared
        self.limits = workload.limits
        # Conformance rules apply as declared: the policy's, or an admission order or chunking
        # mode the target declares (spec/semantics.md, section 8).
        self.applicable = {invariant.id for invariant in applicable(self.policy, declared)}
        self.requests = RequestLedger(workload, declared, self.applicable)
        self.pages = PageLedger(
            workload.limits, declared, self.requests.records, self.requests.tally
        )
        self.batch = BatchRules(self.requests, self.pages, workload.limits, self.applicable)
        self.order = OrderRules(self.requests, self.applicable)
        self.liveness = LivenessRules(self.requests, self.pages, self.applicable)
        sharing = declared.prefix_sharing and "PAGE-6" in self.applicable
        self.prefix = PrefixContent(workload.limits.page_size, sharing)
        self.requests.forgetters.append(self.order.forget)
        self.arrivals: list[str] = []
        """The requests that joined the queue in the iteration being checked, in queue order."""
        plan = iteration_plan()
        # The tokens computed in an iteration are known once admission is in (3.4).
        split = next((i for i, c in enumerate(plan) if c.step in _FROM_DECODE), len(plan))
        self.until_decode, self.from_decode = plan[:split], plan[split:]
        self.computed: Mapping[str, int] = {}
        """Tokens each request computed in the iteration being checked (from its decode step)."""
        self.iteration = 0
        self.recent: deque[IterationEvent | Later] = deque(maxlen=RECENT)
        self.finding: Finding | None = None
        self.all_findings = all_findings
        """Keep checking after a violation, for the first violation of every other invariant.
        A check that found one mostly stops where it found it, so later findings may follow from
        it; the schedule and the token checks, whose counts the rest of an iteration reads,
        finish their bookkeeping first. Set by :meth:`follow` once a run has its finding."""
        self.findings: dict[str, Finding] = {}
        """The first finding of each invariant, by iteration and, within one, most specific
        first."""
        self.stopped = 0
        """The iteration in which checking on after a finding stopped, its ledgers being beyond
        what a check could follow; 0 if it did not."""

    def declare(self, request: Request) -> None:
        """A request declared as it comes (spec/eventlog.md 8.7), after every request already
        known and before the iteration it may join."""
        self.requests.declare(request)
        self.order.declare(request.id)

    def observe(self, event: IterationEvent) -> Finding | None:
        """Check one iteration; ``None`` if it is clean. After a finding, returns that finding."""
        if self.finding is not None and (self.stopped or not self.all_findings):
            return self.finding
        self.begin(event.iteration)
        return self.judge(event)

    def begin(self, iteration: int) -> None:
        """An iteration's bookkeeping before any check: its number and its arrivals (3.1).
        Apart from :meth:`judge` so that a reader may look at the queue before it lowers a line."""
        if iteration != self.iteration + 1:
            raise ValueError(
                f"events must come in order: expected iteration "
                f"{self.iteration + 1}, got {iteration}"
            )
        self.iteration = iteration
        self.requests.records.begin()
        # 3.1: bookkeeping; arriving breaks nothing. A request that reached the scheduler
        # earlier, by an 'arrive', is not among them: it joined the queue then.
        self.arrivals = self.requests.arrive(iteration)
        for rid in self.arrivals:
            self.order.waiting(rid, iteration)

    def judge(self, event: IterationEvent) -> Finding | None:
        """Every check of the iteration :meth:`begin` started, in the spec's order."""
        self.recent.append(event)
        # The two loops are _first inlined: this runs once per iteration of every checked run.
        for check in self.until_decode:
            if (finding := check.run(self, event)) is not None:
                return self._check_on(event, check, finding)
        self.computed = computed_tokens(self.requests, event)
        for check in self.from_decode:
            if (finding := check.run(self, event)) is not None:
                return self._check_on(event, check, finding)
        return self.finding

    def _check_on(
        self, event: IterationEvent, check: Check[IterationEvent], finding: Finding
    ) -> Finding | None:
        """The rest of an iteration in which ``check`` found ``finding``: every later check runs,
        so that the iteration's most specific violation is named, not the first in step order.

        The ledgers may be left part-way by a check that found something, so a check after it
        may fail on them: checking on then stops there, with what it found so far (never a
        crash of kvsched where there is a finding to report)."""
        found = [self._settle(check, finding)]
        plan = self.until_decode + self.from_decode
        at = next(i for i, c in enumerate(plan) if c is check) + 1
        decoding = at > len(self.until_decode)  # self.computed is this iteration's already
        try:
            for later in plan[at:]:
                if not decoding and later.step in _FROM_DECODE:
                    self.computed = computed_tokens(self.requests, event)
                    decoding = True
                if (more := later.run(self, event)) is not None:
                    found.append(self._settle(later, more))
        except Exception:  # only ever after a finding: see the docstring
            self.stopped = event.iteration
        return self._keep(found)

    def finish(self, drained: bool, fault: SchedulerFault | None = None) -> Finding | None:
        """The end-of-run checks: the target kept answering (PROTO-1, when ``fault`` stopped the
        run), then every request finished (REQ-2 if the run drained, else LIVE-1)."""
        if self.finding is None or (self.all_findings and not self.stopped):
            end = RunEnd(drained, fault)
            found = [
                self._settle(check, finding)
                for check in END_CHECKS
                if (finding := check.run(self, end)) is not None
            ]
            if found:
                self._keep(found)
        return self.finding

    def follow(
        self, events: Iterable[IterationEvent], drained: bool, fault: SchedulerFault | None
    ) -> None:
        """Check on after the first finding, to the end of the run: the first violation of every
        other invariant, for :attr:`Finding.followed_by`. The ledgers after a violation are not
        what a correct run leaves, so a check may fail on them: checking on stops there."""
        self.all_findings = True
        try:
            for event in events:
                self.observe(event)
            if not self.stopped:
                self.finish(drained, fault)
        except Exception:  # after a finding: what was found so far stands
            self.stopped = self.iteration or 1

    def root_cause(self) -> Finding | None:
        """The first finding, with every later one of another invariant as what followed it."""
        first = self.finding
        if first is None:
            return None
        later = tuple(
            replace(other, recent=()) for other in self.findings.values() if other is not first
        )
        return replace(first, followed_by=later) if later else first

    def excused(self) -> Excused:
        """What the declarations excused so far (:mod:`.excuses`), frozen."""
        requests = self.requests
        finished = len(requests.finished)
        lesson_bound = requests.bound - requests.tally.allowance
        return requests.tally.excused(finished, max(0, self.iteration - lesson_bound))

    def _settle(self, check: Check[IterationEvent] | Check[RunEnd], finding: Finding) -> Finding:
        """``finding`` with the recent iterations, which ``check`` may report only under an id
        it registered."""
        if finding.invariant not in check.ids:
            raise RuntimeError(
                f"monitor check {check.name} reported {finding.invariant} but registered "
                f"only {', '.join(check.ids)}: add the id to its registration"
            )
        recent = tuple(e if isinstance(e, IterationEvent) else e() for e in self.recent)
        return replace(finding, recent=recent)

    def _keep(self, found: list[Finding]) -> Finding | None:
        """An iteration's findings (or the run end's), in the order their checks ran: the most
        specific is the run's first finding if it has none yet; each is its invariant's first
        unless one came earlier."""
        first = most_specific(found)
        for finding in sorted(found, key=lambda f: precedence(f.invariant)):  # stable
            self.findings.setdefault(finding.invariant, finding)
        if self.finding is None:
            self.finding = first
        return self.finding


_FROM_DECODE = frozenset(STEPS[STEPS.index("decode") :])


def monitor_run(run: Run, properties: TargetProperties | None = None) -> Finding | None:
    """The first finding over a whole run, or ``None`` if every applicable invariant held.

    The events are checked in order; then the end-of-run checks, a scheduler fault (the run
    stopped because the target raised or answered outside the protocol) first.
    """
    return watch_run(run, properties)[0]


def watch_run(
    run: Run, properties: TargetProperties | None = None
) -> tuple[Finding | None, Excused]:
    """:func:`monitor_run`'s finding, with what followed it on the same run, and what the
    declarations excused up to it."""
    monitor = Monitor(run.workload, run.policy, properties)
    events = iter(run.events)
    for event in events:
        if monitor.observe(event) is not None:
            break
    else:
        monitor.finish(run.drained, run.fault)
        return monitor.root_cause(), monitor.excused()
    excused = monitor.excused()  # up to the finding: checking on counts on
    monitor.follow(events, run.drained, run.fault)
    return monitor.root_cause(), excused
