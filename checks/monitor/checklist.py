"""The monitor's checklist: every invariant check, registered by step and catalogue id.

Each function binds a rule of the ledgers (:mod:`.requests`, :mod:`.pages`, :mod:`.tokens`,
:mod:`.batch`) to the part of the event it judges. They are listed here in the order they run
within their step; the steps run in the spec's order (:data:`kvsched.spec.vocabulary.STEPS`).
Some checks also move the ledgers on (an admission joins the batch, a finished request leaves it),
so every check runs in every iteration and decides for itself what applies to the policy.
"""

from __future__ import annotations

from kvsched.checks.monitor.findings import Finding, request_list
from kvsched.checks.monitor.registry import Monitor, RunEnd, at_end, per_iteration
from kvsched.checks.monitor.schedule import check_schedule
from kvsched.checks.monitor.tokens import check_tokens
from kvsched.spec.events import IterationEvent


# The protocol ------------------------------------------------------------------------------------
@per_iteration("bound", "PROTO-1")
def declared_features_are_reported(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """A declaration the target's answers cannot back is a verdict on the target, not a crash
    of ours (an event log without 'computed' is refused as invalid when it is read)."""
    if event.computed is not None or not monitor.properties.computes_explicitly:
        return None
    return Finding(
        "PROTO-1",
        event.iteration,
        "the target declares chunked prefill, preemption or prefix sharing but did not report "
        "the tokens each request computed; set ScheduledBatch.computed (protocol version 2, "
        "spec/protocol.py) or drop the declaration",
    )


# 3.6 The iteration bound ---------------------------------------------------------------------
@per_iteration("bound", "LIVE-1")
def drains_by_the_bound(monitor: Monitor, event: IterationEvent) -> Finding | None:
    n, requests = event.iteration, monitor.requests
    if n <= requests.bound or requests.drained():
        return None
    left = requests.unfinished()
    return Finding(
        "LIVE-1",
        n,
        f"iteration {n} is past the bound {requests.bound} by which every correct scheduler "
        f"drains, and {request_list(left)} still have not finished",
        requests=tuple(left),
    )


# 3.2 The schedule in the engine's order (spec/eventlog.md 8.2) ------------------------------
@per_iteration(
    "preemption",
    *("REQ-1", "REQ-2", "BATCH-1", "BATCH-2", "BATCH-4", "PAGE-2", "PAGE-3", "PAGE-4", "PAGE-5"),
)
def schedule_in_the_engines_order(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """The event's schedule, operation by operation: arrivals, preemptions and their frees,
    admissions, pages. A version-1 line or an in-process run comes in version 1's fixed order
    (:func:`kvsched.spec.events.fixed_order`), so this one check judges every engine's."""
    batch = monitor.batch

    def limits(n: int) -> Finding | None:
        return batch.check_slots(n) or batch.check_commitment(n)

    finding = check_schedule(
        event.iteration,
        event.schedule,
        monitor.requests,
        monitor.pages,
        limits,
        keep_going=monitor.all_findings,
    )
    for op in event.schedule if finding is None else ():
        if op.kind in ("arrive", "preempt"):  # in the queue the declared order serves
            monitor.order.waiting(op.request)
    return finding


# 3.2 Admission --------------------------------------------------------------------------------
@per_iteration("admission", "BATCH-4")
def admitted_in_the_declared_order(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.order.check_admissions(event.iteration, event, monitor.arrivals)


# 3.4 Decode -----------------------------------------------------------------------------------
@per_iteration("decode", "REQ-2")
def batch_is_who_was_admitted(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.batch.check_members(event.iteration, event.active)


@per_iteration("decode", "DEC-1", "DEC-2", "DEC-3", "REQ-2")
def tokens_from_the_batch(monitor: Monitor, event: IterationEvent) -> Finding | None:
    finding = check_tokens(monitor.requests, event.iteration, event, monitor.computed)
    if finding is None:  # what LIVE-3 counts as progress, now that the KV is known
        monitor.liveness.count_progress(event.iteration, event, monitor.computed)
    return finding


@per_iteration("decode", "LIVE-3")
def preemption_makes_progress(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.liveness.check_thrash(event.iteration, event)


# 3.3 Page growth ------------------------------------------------------------------------------
@per_iteration("pages", "PAGE-3")
def every_table_is_reported(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """A request of the batch whose table the event leaves out holds nothing by its report:
    its pages left it unfreed. Checked after the step, so that a request dropped from the
    batch altogether is reported as lost (REQ-2) first."""
    tables, pages = event.page_tables, monitor.pages
    for rid in monitor.requests.active:
        if rid not in tables and (held := pages.tables.get(rid)):
            return pages.lose(event.iteration, rid, held)
    return None


@per_iteration("pages", "PAGE-6")
def cache_hits_read_their_own_prefix(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.prefix.check(event.iteration, event)


@per_iteration("pages", "PAGE-1")
def pages_cover_the_kv(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """Every active request's pages hold its KV, minimally or within its reservation."""
    requests, pages = monitor.requests, monitor.pages
    if monitor.properties.reserve_ahead:
        for rid in requests.active:
            most = requests.reservation(rid)
            finding = pages.coverage(event.iteration, rid, requests.kv[rid], most)
            if finding:
                return finding
        return None
    # Minimal pages, tested inline over the batch; coverage() words a request that fails.
    tables, kv, size = pages.tables, requests.kv, pages.page_size
    for rid in requests.active:
        if len(tables.get(rid, ())) != -(-kv[rid] // size):
            return pages.coverage(event.iteration, rid, kv[rid], None)
    return None


# What the batch leaves unused (3.2; eventlog.md 4.6) ------------------------------------------
@per_iteration("slots", "BATCH-1")
def tokens_within_the_budget(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.batch.check_budget(event.iteration, monitor.computed)


@per_iteration("slots", "BATCH-5")
def chunked_only_as_declared(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.order.check_chunking(event.iteration, event, monitor.computed)


@per_iteration("slots", "BATCH-3")
def no_idle_slot_while_the_head_fits(monitor: Monitor, event: IterationEvent) -> Finding | None:
    head = monitor.order.head(event)
    return monitor.batch.check_idle_slot(event.iteration, event, monitor.computed, head)


@per_iteration("slots", "LIVE-2")
def nothing_stranded_while_idle(monitor: Monitor, event: IterationEvent) -> Finding | None:
    head = monitor.order.head(event)
    return monitor.liveness.check_stranded(event.iteration, event, head, monitor.computed)


# 3.5 Completion and freeing ---------------------------------------------------------------------
@per_iteration("completion", "REQ-2")
def finished_once_at_the_last_token(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.requests.finish(event.iteration, event.decoded, event.finished)


@per_iteration("completion", "PAGE-3")
def freed_pages_were_held(monitor: Monitor, event: IterationEvent) -> Finding | None:
    # Preemption's frees were the schedule's: 'freed' holds the update's alone.
    for rid, freed in event.freed.items():
        why = "finished" if rid in event.finished else "freed"
        finding = monitor.pages.release(event.iteration, rid, freed, why)
        if finding:
            return finding
    return None


@per_iteration("completion", "PAGE-4")
def finished_requests_hold_no_page(monitor: Monitor, event: IterationEvent) -> Finding | None:
    for rid in event.finished:
        finding = monitor.pages.drop(event.iteration, rid, "finished")
        if finding:
            return finding
    return None


@per_iteration("completion", "PAGE-3")
def free_count_adds_up(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.pages.check_free(event.iteration, event.free_pages)


@per_iteration("completion", "BATCH-4")
def queue_as_the_target_reports_it(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """Keep the target's queue for the next iteration's admissions (no finding of its own)."""
    monitor.order.after(event)
    return None


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
