"""PAGE-7: under asynchronous scheduling, a page given back waits for the step in flight
(spec/semantics.md, section 8.3; spec/eventlog.md 4.10).

An engine that schedules step ``n + 1`` before step ``n``'s output is processed (vLLM's
``AsyncScheduler``) cannot reuse at once the pages a finish, an abort or a preemption gives back:
the step in flight may still write them, and a write that fills the new owner's pages (a KV
transfer from another instance, not ordered with the device's steps) races the stale one
(vLLM #45357, whose fix fences each free until the step in flight is processed). A line of the log
is one iteration as the engine runs it: a free of its schedule (a preemption) is made while the
step before is in flight, a free of its update (a finish, an abort) while its own successor is
already scheduled. So a page given back

- by a free of the schedule is not handed out again in the same schedule;
- by the update of iteration ``n`` is not handed out in iteration ``n + 1``,

as a fresh page. A prefix-cache hit on it is not: a hit takes only full pages, which the step in
flight no longer writes (it writes its tokens' slots in the last page of each table), and vLLM's
fix lets a fenced full page be hit. A page is given back when no request holds it afterwards: a
shared page one holder frees while another keeps it stays in use. It applies only where the
target declares ``async_scheduling``.

The fast path (checks/eventlog/steady.py) takes lines that allocate fresh pages and lines whose
finished requests free their tables. Under the declaration it declines every line that gives a
page back, so that this check records what it gave back, and judges the allocations of the lines
it takes against what earlier lines gave back (:func:`_not_just_given_back`).

The pages an update gave back are not room for the next iteration's schedule either: BATCH-3,
LIVE-2 and LIVE-4 read :meth:`~.pages.PageLedger.room`, which leaves them out, so a target that
waits for its fence is not told that the head of the queue fitted, and an iteration that computes
nothing while they wait grows LIVE-1's bound by one, as a preemption that computes nothing does.
The free count a target reports still counts them (PAGE-3: usable pages minus those in a
table).
"""

from __future__ import annotations

from collections.abc import Mapping

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.registry import Monitor, Steady, Tables, per_iteration
from kvsched.checks.monitor.steady_line import SteadyLine
from kvsched.spec.events import IterationEvent


def _reused(monitor: Monitor, n: int, allocated: Tables, shared: Tables) -> Finding | None:
    """The first allocation of iteration ``n`` taking fresh a page given back in iteration
    ``n - 1`` (``shared``: the pages taken by reference, which may be)."""
    given = monitor.pages.given_back
    if not given:
        return None
    for rid, pages in allocated.items():
        hits = shared.get(rid, ())
        for page in pages:
            if given.get(page, 0) == n - 1 and n > 1 and page not in hits:
                return Finding(
                    "PAGE-7",
                    n,
                    f"request {rid!r} got page {page} in iteration {n}, given back in iteration "
                    f"{n - 1}: the target declares asynchronous scheduling, so the step in "
                    "flight when it was given back may still write it, and it waits one more "
                    "iteration",
                    requests=(rid,),
                    pages=(page,),
                )
    return None


def _not_just_given_back(
    monitor: Monitor,
    n: int,
    allocated: Tables,
    tables: Tables,
    shared: Tables,
    cached: Mapping[str, int],
) -> Finding | None:
    # A steady line's allocations, judged against the pages earlier lines gave back: those
    # lines went through the full path under the declaration (_gives_nothing_back).
    if not monitor.properties.async_scheduling:
        return None
    return _reused(monitor, n, allocated, shared)


def _gives_nothing_back(monitor: Monitor, line: SteadyLine) -> bool:
    # A line whose finished requests give pages back to the pool: the full path records them.
    # A line that computes nothing may be waiting for the fence: the full path allows for it.
    # A preemption's pages, given back in the schedule, may not go to its allocations.
    return not monitor.properties.async_scheduling or (
        line.held >= line.scheduled and line.computed > 0 and not line.preempted
    )


def _taken_from_the_schedule(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """The first allocation of ``event``'s schedule taking fresh a page that a free earlier in
    the same schedule (a preemption) gave back to the pool."""
    n = event.iteration
    left: dict[int, str] = {}  # page -> the request whose free in this schedule let it go
    for op in event.schedule:
        if op.kind == "free":
            for page in op.pages:
                left[page] = op.request
        elif op.kind == "alloc" and left:
            rid = op.request
            hits = event.shared.get(rid, ())
            for page in op.pages:
                freer = left.get(page)
                if freer is None or page in hits:
                    continue
                return Finding(
                    "PAGE-7",
                    n,
                    f"request {rid!r} got page {page} in iteration {n}, which {freer!r} gave "
                    "back earlier in the same schedule: the target declares asynchronous "
                    f"scheduling, so the step in flight may still write it, and it waits until "
                    "that step is processed",
                    requests=(rid, freer),
                    pages=(page,),
                )
    return None


@per_iteration(
    "completion",
    "PAGE-7",
    steady=Steady(line=_gives_nothing_back, allocations=_not_just_given_back),
)
def freed_pages_wait_for_the_step_in_flight(
    monitor: Monitor, event: IterationEvent
) -> Finding | None:
    """PAGE-7, once the iteration's frees are counted: no page given back by the update of the
    iteration before, nor by a free earlier in this schedule, is handed out in this one; then
    what this one's update gave back is recorded."""
    if "PAGE-7" not in monitor.applicable:
        return None
    n = event.iteration
    finding = _reused(monitor, n, event.allocated, event.shared)
    finding = finding or _taken_from_the_schedule(monitor, event)
    pages_ledger = monitor.pages
    idle = not event.decoded and not event.preempted and not any(monitor.computed.values())
    if idle and any(at == n - 1 for at in pages_ledger.given_back.values()):
        # An iteration that may have waited for the fence: LIVE-1's bound, which assumes every
        # iteration computes, allows it, one per update that gave pages back, as the engine
        # loop's bound does (reference/bound.py).
        monitor.requests.bound += 1
        monitor.requests.tally.allowance += 1
        monitor.requests.tally.fenced_waits += 1
    holders = pages_ledger.holders
    # Kept for the iteration before (its fence, read by the room checks of this one) and this one.
    given = {page: at for page, at in pages_ledger.given_back.items() if at >= n - 1}
    pages_ledger.given_back = given
    for pages in event.freed.values():
        for page in pages:
            if page not in holders:
                given[page] = n
    return finding
