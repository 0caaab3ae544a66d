"""The runtime monitor: checks every applicable invariant on every iteration, as the run goes.

:class:`Monitor` reads one :class:`~kvsched.spec.events.IterationEvent` at a time, in order, and
stops at the first violation with a :class:`~.findings.Finding`. It applies the
invariants of the declared policy (:func:`kvsched.spec.invariants.applicable`) and reads the
target's :class:`~kvsched.spec.properties.TargetProperties`, so a real engine's chunked prefill,
preemption, prefix sharing or reserve-ahead allocator is judged by what it declares
(spec/eventlog.md, section 4) instead of raising false alarms.

The work per iteration follows what the iteration changed, never the pool or the workload: the
request ledger (:mod:`.requests`) and the page ledger (:mod:`.pages`) keep owner
maps, counters and per-request state up to date from what each event names; the token checks
(:mod:`.tokens`) and the batch rules (:mod:`.batch`) read them. Within an iteration
the checks run in the order of section 3: preemption, admission (3.2), the batch and its tokens
(3.4), the page tables (3.3), completion and freeing (3.5). This module needs neither Hypothesis
nor Z3.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

from kvsched.checks.monitor.batch import BatchRules
from kvsched.checks.monitor.findings import Finding, request_list
from kvsched.checks.monitor.pages import PageLedger
from kvsched.checks.monitor.requests import RequestLedger
from kvsched.checks.monitor.schedule import check_schedule
from kvsched.checks.monitor.tokens import check_tokens, computed_tokens
from kvsched.reference.engine import Run, SchedulerFault
from kvsched.spec.events import IterationEvent
from kvsched.spec.invariants import applicable
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Workload

PROPOSED_IDS = ("DEC-3",)
"""Ids the monitor checks that are proposed for the catalogue; each applies to every policy.
DEC-3: a request produces a token only from KV computed in that iteration, once its prompt (and,
after preemption, its earlier output) is computed: only the real-engine extensions can break it."""

RECENT = 3
"""Iterations a finding carries: the violation's and the ones just before it."""


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
        self, workload: Workload, policy: str, properties: TargetProperties | None = None
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
        self.checks = {invariant.id for invariant in applicable(self.policy)} | set(PROPOSED_IDS)
        self.requests = RequestLedger(workload, declared, self.checks)
        self.pages = PageLedger(workload.limits, declared)
        self.batch = BatchRules(self.requests, self.pages, workload.limits, self.checks)
        self.iteration = 0
        self.recent: deque[IterationEvent] = deque(maxlen=RECENT)
        self.finding: Finding | None = None

    def observe(self, event: IterationEvent) -> Finding | None:
        """Check one iteration; ``None`` if it is clean. After a finding, returns that finding."""
        if self.finding is not None:
            return self.finding
        if event.iteration != self.iteration + 1:
            raise ValueError(
                f"events must come in order: expected iteration "
                f"{self.iteration + 1}, got {event.iteration}"
            )
        if event.computed is None and self.properties.computes_explicitly:
            raise ValueError(
                f"iteration {event.iteration}: a target declaring chunked prefill, "
                "preemption or prefix sharing must report 'computed' tokens"
            )
        self.iteration = event.iteration
        self.recent.append(event)
        finding = self._check(event)
        if finding is not None:
            self.finding = replace(finding, recent=tuple(self.recent))
        return self.finding

    def finish(self, drained: bool) -> Finding | None:
        """End-of-run checks: every request finished (REQ-2 if the run drained, else LIVE-1).

        No page is held once every request finished: each request's release was checked in its
        finishing iteration (PAGE-4), so a drained run that got here holds none.
        """
        if self.finding is not None:
            return self.finding
        unfinished = self.requests.unfinished()
        finding: Finding | None = None
        if unfinished and drained:
            finding = Finding(
                "REQ-2",
                0,
                f"the run drained but {request_list(unfinished)} never finished: lost",
                requests=tuple(unfinished),
            )
        elif unfinished:
            finding = Finding(
                "LIVE-1",
                0,
                f"the run stopped after iteration {self.iteration} without finishing "
                f"{request_list(unfinished)}; every correct scheduler drains this workload by "
                f"iteration {self.requests.bound}",
                requests=tuple(unfinished),
            )
        if finding is not None:
            self.finding = replace(finding, recent=tuple(self.recent))
        return self.finding

    def _check(self, event: IterationEvent) -> Finding | None:
        n, requests, pages = event.iteration, self.requests, self.pages
        if n > requests.bound and requests.finished < len(requests.requests):
            left = requests.unfinished()
            return Finding(
                "LIVE-1",
                n,
                f"iteration {n} is past the bound {requests.bound} by "
                f"which every correct scheduler drains, and {request_list(left)} still "
                "have not finished",
                requests=tuple(left),
            )
        requests.arrive(n)
        ordered = event.schedule is not None
        if event.schedule is not None:
            finding = check_schedule(n, event.schedule, requests, pages, self.batch.check_limits)
        else:
            finding = self._schedule_v1(n, event)
        if finding:
            return finding
        computed = computed_tokens(requests, event)
        finding = (
            requests.check_batch(n, event.active)
            or check_tokens(requests, n, event, computed)
            or (None if ordered else pages.update(n, event, requests.active))
            or self._coverage(n)
            or self.batch.check_budget(n, computed)
            or self.batch.check_idle_slot(n, event, computed)
            or requests.finish(n, event)
        )
        if finding:
            return finding
        for rid, freed in event.freed.items():
            if ordered or rid not in event.preempted:  # v1: a preemption's frees came first
                why = "finished" if rid in event.finished else "freed"
                finding = pages.release(n, rid, freed, why)
                if finding:
                    return finding
        for rid in event.finished:
            finding = pages.drop(n, rid, "finished")
            if finding:
                return finding
        return pages.check_free(n, event.free_pages)

    def _schedule_v1(self, n: int, event: IterationEvent) -> Finding | None:
        """Version 1's fixed order: preemptions with their frees, then admissions."""
        requests, pages = self.requests, self.pages
        for rid in event.preempted:
            finding = (
                requests.preempt(n, rid)
                or pages.release(n, rid, event.freed.get(rid, ()), "preempted")
                or pages.drop(n, rid, "was preempted")
            )
            if finding:
                return finding
        return requests.admit(n, event.admitted) or self.batch.check_limits(n)

    def _coverage(self, n: int) -> Finding | None:
        """PAGE-1 for every active request: its pages hold its KV, minimally or as reserved."""
        reserve = self.properties.reserve_ahead
        for rid in self.requests.active:
            most = self.requests.reservation(rid) if reserve else None
            finding = self.pages.coverage(n, rid, self.requests.kv[rid], most)
            if finding:
                return finding
        return None


def monitor_run(run: Run, properties: TargetProperties | None = None) -> Finding | None:
    """The first finding over a whole run, or ``None`` if every applicable invariant held.

    The events are checked in order; then a scheduler fault (the run stopped because the target
    raised or answered outside the protocol) is PROTO-1; then the end-of-run checks.
    """
    monitor = Monitor(run.workload, run.policy, properties)
    for event in run.events:
        finding = monitor.observe(event)
        if finding is not None:
            return finding
    if run.fault is not None:
        return fault_finding(run.fault, monitor)
    return monitor.finish(run.drained)


def fault_finding(fault: SchedulerFault, monitor: Monitor) -> Finding:
    """PROTO-1: the run stopped because the target raised or answered outside the protocol."""
    return Finding(
        "PROTO-1",
        fault.iteration,
        f"{fault.call}() failed: {fault.message}",
        recent=tuple(monitor.recent),
    )
