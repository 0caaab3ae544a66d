"""The monitor's checklist, first half: the checks of an iteration's schedule and step,
registered by step and catalogue id (the bound, the schedule, admission, decode); the page
tables, the unused slots, completion and the run's end are in :mod:`.checklist_update`.

Each function binds a rule of the ledgers (:mod:`.requests`, :mod:`.pages`, :mod:`.tokens`,
:mod:`.batch`) to the part of the event it judges, with the predicates that say when a steady
line may go without it (:class:`~.registry.Steady`) right above it. They are listed in the order
they run within their step; the steps run in the spec's order
(:data:`kvsched.spec.vocabulary.STEPS`). Some checks also move the ledgers on (an admission joins
the batch, a finished request leaves it), so every check runs in every iteration and decides for
itself what applies to the policy.
"""

from __future__ import annotations

from kvsched.checks.monitor.findings import Finding, request_list
from kvsched.checks.monitor.registry import (
    FOREVER,
    Monitor,
    Steady,
    per_iteration,
)
from kvsched.checks.monitor.schedule import check_schedule
from kvsched.checks.monitor.steady_line import SteadyLine
from kvsched.checks.monitor.steady_request import SteadyRequest
from kvsched.checks.monitor.tokens import check_tokens
from kvsched.spec.events import IterationEvent
from kvsched.spec.vocabulary import NOT_ARRIVED


# The protocol ------------------------------------------------------------------------------------
# A version-2 line always reports what each request computed.
@per_iteration("bound", "PROTO-1", steady=Steady())
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


# 3.1 Arrival ----------------------------------------------------------------------------------
# A version-2 line names an arrival only by an 'arrive' operation, which a steady line has not.
@per_iteration("bound", "REQ-1", steady=Steady())
def arrivals_are_new(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """A request the event says arrived arrives now: by its time (3.1) or by an 'arrive'
    operation of the schedule, which that check judges. One that was already waiting, running
    or done arrived twice."""
    if not event.arrived:
        return None
    timed, by_operation = monitor.arrivals, None
    for rid in event.arrived:
        if rid in timed:
            continue
        if by_operation is None:
            by_operation = {op.request for op in event.schedule if op.kind == "arrive"}
        if rid in by_operation:
            continue
        state, n = monitor.requests.status(rid), event.iteration
        if state is not None and state is not NOT_ARRIVED:
            why = f"it is already {state}: a request arrives once"
        elif state is NOT_ARRIVED:
            why = "its arrival time has not come (3.1)"
        else:
            why = "it is not a request of the workload"
        message = f"request {rid!r} is reported arriving in iteration {n}, but {why}"
        return Finding("REQ-1", n, message, requests=(rid,))
    return None


# 3.6 The iteration bound ---------------------------------------------------------------------
def _within_the_bound(monitor: Monitor, line: SteadyLine) -> bool:
    # Not implied by the steady lines' tokens: lines before them may have spent the bound (an
    # undeclared chunked prefill's chunks, which produce no token).
    return line.iteration <= monitor.requests.bound or monitor.requests.drained()


@per_iteration("bound", "LIVE-1", steady=Steady(line=_within_the_bound))
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
def _admits_within_the_limits(monitor: Monitor, line: SteadyLine) -> bool:
    """A steady line's preemptions are declared (REQ-2), and the slots (BATCH-1), the pool's
    commitment (PAGE-5) and, under static batching, an empty batch (BATCH-2) hold for its
    admissions."""
    if line.preempted and not monitor.properties.preemption:
        return False
    if line.batch > monitor.limits.batch_limit:
        return False
    if not line.admitted:
        return True
    over = monitor.requests.committed + line.reserve > monitor.pages.usable
    if over and monitor.properties.admission == "peak":
        return False
    return "BATCH-2" not in monitor.applicable or line.batch == len(line.admitted)


# A steady line's schedule preempts requests of the batch, each giving back its whole table,
# admits waiting requests and allocates fresh pages of the pool, which its page holders take in
# lazily: who held a page before is the fast path's to tell. It moves the ledgers by the same
# calls as this check (RequestLedger.preempt, OrderRules.waiting).
STEADY_SCHEDULE = Steady(
    line=_admits_within_the_limits,
    counted="REQ-1/REQ-2 admissions of waiting requests and preemptions of running ones, "
    "PAGE-2..5 fresh pages and whole tables given back (steady_ops.py, steady.py, "
    "steady_pages.py)",
)


@per_iteration(
    "preemption",
    *("REQ-1", "REQ-2", "BATCH-1", "BATCH-2", "BATCH-4", "PAGE-2", "PAGE-3", "PAGE-4", "PAGE-5"),
    steady=STEADY_SCHEDULE,
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
    )
    for op in event.schedule if finding is None else ():
        if op.kind in ("arrive", "preempt"):  # in the queue the declared order serves
            monitor.order.waiting(op.request, event.iteration, op.kind == "preempt")
    return finding


# 3.2 Admission --------------------------------------------------------------------------------
def _admits_in_order(monitor: Monitor, line: SteadyLine) -> bool:
    if not line.admitted:
        return True
    if line.preempted:
        return False  # who a preemption lets be overtaken is the full path's to find
    order = monitor.order
    # Under fcfs and none the next admission's place is a pure function of the queue; a heap
    # order's admissions move its heap, which only the full path does.
    if order.order not in ("fcfs", "none"):
        return False
    return order.check_admitted(line.iteration, line.admitted, monitor.arrivals) is None


@per_iteration("admission", "BATCH-4", steady=Steady(line=_admits_in_order))
def admitted_in_the_declared_order(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.order.check_admissions(event.iteration, event, monitor.arrivals)


# 3.4 Decode -----------------------------------------------------------------------------------
# A version-2 event's batch is the one its admissions, preemptions and finishes built, which
# are those the ledger follows: a steady line's admits only waiting requests, so it leaves this
# check nothing to judge.
@per_iteration("decode", "REQ-2", steady=Steady())
def batch_is_who_was_admitted(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.batch.check_members(event.iteration, event.active)


def _kv_reaches_the_token(request: SteadyRequest) -> int:
    # DEC-3: the KV computed reaches the token just produced, all but that token itself; DEC-1:
    # and no further. A decode step adds one of each, so a request that holds it holds it on.
    # A chunk produces no token: DEC-1 alone, its KV within the tokens that exist.
    lag = request.prompt + request.generated - request.kv
    if not request.decodes:
        return FOREVER if lag >= 0 else -1
    return FOREVER if 0 <= lag <= 1 else -1


@per_iteration(
    "decode",
    *("DEC-1", "DEC-2", "DEC-3", "REQ-2"),
    steady=Steady(request=_kv_reaches_the_token),
)
def tokens_from_the_batch(monitor: Monitor, event: IterationEvent) -> Finding | None:
    finding = check_tokens(monitor.requests, event.iteration, event, monitor.computed)
    if finding is None:  # what LIVE-3 counts as progress, now that the KV is known
        monitor.liveness.count_progress(event.iteration, event, monitor.computed)
    return finding


# A steady line's batch is the requests that decode and those that compute (steady.py): none
# is left out, so BATCH-6 has nothing to judge there.
@per_iteration("decode", "BATCH-6", steady=Steady())
def the_batch_is_served_first(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.batch.check_served(event.iteration, event, monitor.computed)


def _progress_in_the_line(monitor: Monitor, line: SteadyLine) -> bool:
    # A preemption repeats one without progress when the request's stamp, the progress count
    # before its last preemption, is the count after this line. A stamp is at most the count
    # now, and every token the line produces adds one: only a stamp at the count now, in a line
    # that produces none, may be judged. The fast path stamps each preemption by the same call
    # (Records.preempted_again), once the line's progress is counted.
    if not line.preempted or line.produced > 0:
        return True
    records = monitor.requests.records
    live, progress = records.live, records.progress
    return all(live[rid].stamp != progress for rid in line.preempted)


@per_iteration("decode", "LIVE-3", steady=Steady(line=_progress_in_the_line))
def preemption_makes_progress(monitor: Monitor, event: IterationEvent) -> Finding | None:
    return monitor.liveness.check_thrash(event.iteration, event)
