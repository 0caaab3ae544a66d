"""The monitor's checklist, second half: the page tables, what the batch leaves unused,
completion and freeing, and the run's end (:mod:`.checklist` has the schedule and the step; the
same conventions hold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kvsched.checks.monitor.findings import Finding, request_list
from kvsched.checks.monitor.registry import (
    FOREVER,
    Monitor,
    RunEnd,
    Steady,
    Tables,
    at_end,
    per_iteration,
)
from kvsched.checks.monitor.steady_line import SteadyLine
from kvsched.checks.monitor.steady_request import SteadyRequest
from kvsched.spec.events import IterationEvent


# 3.3 Page growth ------------------------------------------------------------------------------
# A version-2 event shows every table the operations built.
@per_iteration("pages", "PAGE-3", steady=Steady())
def every_table_is_reported(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """A request of the batch whose table the event leaves out holds nothing by its report:
    its pages left it unfreed. Checked after the step, so that a request dropped from the
    batch altogether is reported as lost (REQ-2) first."""
    tables, requests = event.page_tables, monitor.requests
    if tables.keys() >= requests.active.keys():  # every table shown, as most events show them
        return None
    for rid in requests.active:
        if rid not in tables and (held := requests.live[rid].table):
            return monitor.pages.lose(event.iteration, rid, held)
    return None


@per_iteration("bound", "PAGE-6", steady=Steady())
def preempted_pages_keep_what_was_computed(
    monitor: Monitor, event: IterationEvent
) -> Finding | None:
    """A preempted request's pages hold what its KV reached before the iteration, frozen
    before the schedule's preemption forgets that KV; a later hit may take only that (PAGE-6).
    Never a finding of its own: the fast path freezes a steady line's by the same call
    (PrefixContent.release)."""
    if event.preempted and monitor.prefix.enabled:
        live = monitor.requests.live
        for rid in event.preempted:
            if (record := live.get(rid)) is not None:
                monitor.prefix.release(record, record.table)
    return None


def _hits_read_their_prefix(
    monitor: Monitor,
    n: int,
    allocated: Tables,
    tables: Tables,
    shared: Tables,
    cached: Mapping[str, int],
) -> Finding | None:
    # Every allocation names what its fresh pages are to hold, or takes pages holding its prefix
    # as far as their writers computed it. A record the fast path counts lazily shows less KV
    # than was computed, never more: a clean line may be declined, a bad one never taken in.
    live = monitor.requests.live
    return monitor.prefix.check(n, allocated, tables, shared, cached, live)


@per_iteration("pages", "PAGE-6", steady=Steady(allocations=_hits_read_their_prefix))
def cache_hits_read_their_own_prefix(monitor: Monitor, event: IterationEvent) -> Finding | None:
    tables, shared = event.page_tables, event.shared
    return _hits_read_their_prefix(
        monitor, event.iteration, event.allocated, tables, shared, event.cached
    )


def _covered_until_the_page_is_full(request: SteadyRequest) -> int:
    # Minimal now, and for every token its pages still have room for: the next one needs a
    # page more, which the line that computes it must allocate. More pages than the KV needs
    # (a reservation ahead, or a violation) is the full path's to judge.
    size = request.page_size
    if request.held != -(-request.kv // size):
        return -1
    return request.held * size - request.kv


@per_iteration("pages", "PAGE-1", steady=Steady(request=_covered_until_the_page_is_full))
def pages_cover_the_kv(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """Every active request's pages hold its KV, minimally or within its reservation."""
    requests, pages = monitor.requests, monitor.pages
    if monitor.properties.reserve_ahead:
        for rid in requests.active:
            most = requests.reservation(rid)
            finding = pages.coverage(event.iteration, rid, requests.live[rid].kv, most)
            if finding:
                return finding
        return None
    # Minimal pages, tested inline over the batch; coverage() words a request that fails.
    live, size = requests.live, pages.page_size
    for rid in requests.active:
        record = live[rid]
        kv = record.kv
        if len(record.table) != -(-kv // size):
            return pages.coverage(event.iteration, rid, kv, None)
    return None


# What the batch leaves unused (3.2; eventlog.md 4.6) ------------------------------------------
def _within_the_token_budget(monitor: Monitor, line: SteadyLine) -> bool:
    budget = monitor.properties.token_budget
    return budget is None or line.computed <= budget


@per_iteration("slots", "BATCH-1", steady=Steady(line=_within_the_token_budget))
def tokens_within_the_budget(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.batch.check_budget(event.iteration, monitor.computed)


def _chunked_as_declared(monitor: Monitor, line: SteadyLine) -> bool:
    return monitor.order.chunks_allowed(line.chunks)


@per_iteration("slots", "BATCH-5", steady=Steady(line=_chunked_as_declared))
def chunked_only_as_declared(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.order.check_chunking(event.iteration, event, monitor.computed)


def _no_idle_slot(monitor: Monitor, line: SteadyLine) -> bool:
    """A full batch, an empty queue, or a head that can join neither by budget nor by pages
    leaves BATCH-3 nothing to judge. Otherwise the full path judges it, also where a
    declaration excuses the slot (checks/monitor/excuses.py)."""
    if "BATCH-3" not in monitor.applicable:
        return True
    if line.batch >= monitor.limits.batch_limit or not line.queued:
        return True
    if line.preempted:  # an iteration that preempts leaves a slot free by design
        return True
    if monitor.order.order not in ("fcfs", "none"):
        return False  # the head a heap order serves next is the full path's to find
    free = monitor.pages.usable - line.scheduled
    committed = monitor.requests.committed + line.reserve
    return monitor.batch.head_cannot_join(line.head, free, committed, line.spent, line.computed)


@per_iteration("slots", "BATCH-3", steady=Steady(line=_no_idle_slot))
def no_idle_slot_while_the_head_fits(monitor: Monitor, event: IterationEvent) -> Finding | None:
    if not monitor.batch.slot_free():  # a full batch: the queue's head is not even looked up
        return None
    head = monitor.order.head(event)
    return monitor.batch.check_idle_slot(event.iteration, event, monitor.computed, head)


def _not_idle(monitor: Monitor, line: SteadyLine) -> bool:
    # An iteration that preempts strands no one: it made room for the batch (LIVE-4's to judge).
    return line.batch > 0 or bool(line.preempted)


@per_iteration("slots", "LIVE-2", steady=Steady(line=_not_idle))
def nothing_stranded_while_idle(monitor: Monitor, event: IterationEvent) -> Finding | None:
    if monitor.requests.active:  # only an idle batch can strand the queue
        return None
    head = monitor.order.head(event)
    return monitor.liveness.check_stranded(event.iteration, event, head, monitor.computed)


# 3.5 Completion and freeing ---------------------------------------------------------------------
def _finished_at_its_last_token(request: SteadyRequest) -> int:
    # Finished exactly at its last token; decoding on, the line of its last token must finish it.
    left = request.output - request.generated
    if (left == 0) != request.finishes:
        return -1
    return left - 1 if left else FOREVER


@per_iteration(
    "completion",
    "REQ-2",
    steady=Steady(request=_finished_at_its_last_token),
)
def finished_once_at_the_last_token(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.requests.finish(event.iteration, event.decoded, event.finished)


def _frees_only_what_it_holds(given: Tables, tables: Tables) -> bool:
    # Each page given back once, and in the giver's table.
    for rid, pages in given.items():
        held = tables.get(rid, ())
        if pages != held and (len(set(pages)) != len(pages) or not set(held) >= set(pages)):
            return False
    return True


@per_iteration("completion", "PAGE-3", steady=Steady(frees=_frees_only_what_it_holds))
def freed_pages_were_held(monitor: Monitor, event: IterationEvent) -> Finding | None:
    # Preemption's frees were the schedule's: 'freed' holds the update's alone.
    for rid, freed in event.freed.items():
        why = "finished" if rid in event.finished else "freed"
        finding = monitor.pages.release(event.iteration, rid, freed, why)
        if finding:
            return finding
    return None


def _frees_all_it_holds(given: Tables, tables: Tables) -> bool:
    # A request finished in a steady line gives back every page it holds (the pages of one
    # that finishes without giving any back are given back as nothing).
    for rid, held in tables.items():
        pages = given.get(rid, ())
        if pages != held and not set(pages) >= set(held):
            return False
    return True


@per_iteration("completion", "PAGE-4", steady=Steady(frees=_frees_all_it_holds))
def finished_requests_hold_no_page(monitor: Monitor, event: IterationEvent) -> Finding | None:
    for rid in event.finished:
        finding = monitor.pages.drop(event.iteration, rid, "finished")
        if finding:
            return finding
    return None


def _free_count_adds_up(monitor: Monitor, line: SteadyLine) -> bool:
    return line.free_pages == monitor.pages.usable - line.held


@per_iteration("completion", "PAGE-3", steady=Steady(line=_free_count_adds_up))
def free_count_adds_up(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.pages.check_free(
        event.iteration, event.free_pages, event, monitor.requests.where
    )


def _each_once(
    queue: Mapping[str, None],
    reported: Sequence[str],
    leaving: Sequence[str],
    joining: Sequence[str] = (),
) -> bool:
    """Whether ``reported``, as long as ``queue`` less ``leaving`` and with ``joining``, holds
    each of those once: all different, all waiting or joining and none leaving (so one listed
    twice in place of another, or a request that runs in place of one that waits, is not taken
    for the queue)."""
    listed = set(reported)
    if len(listed) != len(reported) or not listed.isdisjoint(leaving):
        return False
    return queue.keys() >= (listed.difference(joining) if joining else listed)


def _queue_adds_up(monitor: Monitor, line: SteadyLine) -> bool:
    # The line's preempted requests join the queue (RequestLedger.preempt) as it is judged.
    if not line.reported:
        return True
    return line.reported == line.waiting and _each_once(
        monitor.requests.queue, line.queue, line.admitted, line.preempted
    )


@per_iteration("completion", "REQ-2", steady=Steady(line=_queue_adds_up))
def the_queue_holds_every_waiting_request(
    monitor: Monitor, event: IterationEvent
) -> Finding | None:
    """A queue the target reports holds each request that arrived and is neither in the batch
    nor finished, once: as many as wait, and every one of them (one listed twice in place of
    another leaves that one out). An empty one says nothing: a log may leave the field out."""
    reported, queue = event.waiting, monitor.requests.queue
    if not reported or (len(reported) == len(queue) and _each_once(queue, reported, ())):
        return None
    n, listed = event.iteration, set(reported)
    lost = [rid for rid in queue if rid not in listed]
    if lost:
        return Finding(
            "REQ-2",
            n,
            f"{request_list(lost)} arrived and neither ran nor finished, but the queue the "
            f"target reported after iteration {n} leaves them out: lost",
            requests=tuple(lost),
        )
    extra = [rid for rid in listed if rid not in queue] or sorted(listed)
    return Finding(
        "REQ-2",
        n,
        f"the queue the target reported after iteration {n} lists {len(reported)} requests "
        f"for the {len(queue)} that wait ({request_list(extra[:5])} not waiting, or listed "
        "twice)",
        requests=tuple(extra[:5]),
    )


def _queue_follows(monitor: Monitor, line: SteadyLine) -> bool:
    return monitor.order.follows(line.queue, line.admitted, monitor.arrivals, line.preempted)


# The fast path keeps a steady line's queue by the same call (OrderRules.keep).
@per_iteration("completion", "BATCH-4", steady=Steady(line=_queue_follows))
def the_queue_in_the_declared_order(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """Under fcfs, the queue the target reports stands in the order its requests joined it;
    kept for the next iteration's admissions."""
    return monitor.order.after(event)


# End of the run ---------------------------------------------------------------------------------
@at_end("PROTO-1")
def the_target_kept_answering(monitor: Monitor, end: RunEnd) -> Finding | None:
    """The run stopped because the target raised or answered outside the protocol."""
    fault = end.fault
    if fault is None:
        return None
    return Finding("PROTO-1", fault.iteration, f"{fault.call}() failed: {fault.message}")


@at_end("REQ-2", "LIVE-1")
def every_request_finished(monitor: Monitor, end: RunEnd) -> Finding | None:
    """Lost if the run drained without it (REQ-2), starved if the run stopped first (LIVE-1).

    No page is held once every request finished: each request's release was checked in its
    finishing iteration (PAGE-4), so a drained run that got here holds none.
    """
    unfinished = monitor.requests.unfinished()
    if not unfinished:
        return None
    if end.drained:
        return Finding(
            "REQ-2",
            0,
            f"the run drained but {request_list(unfinished)} never finished: lost",
            requests=tuple(unfinished),
        )
    return Finding(
        "LIVE-1",
        0,
        f"the run stopped after iteration {monitor.iteration} without finishing "
        f"{request_list(unfinished)}; every correct scheduler drains this workload by "
        f"iteration {monitor.requests.bound}",
        requests=tuple(unfinished),
    )
