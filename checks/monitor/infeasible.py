"""LIVE-5: a request no scheduler can hold is rejected, and blocks no one (spec/semantics.md 8.2).

A workload may allow requests whose peak pages exceed the pool (``allow_infeasible``, section
1.2): a prompt within the model's length but beyond the KV cache, as real traffic sends. No
scheduler can serve one. A correct engine finishes it without its output (REQ-2 lets it, from the
queue too), as its declared ``rejects_infeasible`` says: ``at-arrival``, in the iteration it
arrives; ``at-head`` (the default), by the end of the iteration after the one that leaves it at the
head of the queue, which is when an engine that fails it on its way to schedule it gets to it.
One that keeps it waiting at the head, retrying its allocation every step, blocks every request
behind it forever (vLLM #39734, head-of-line under fcfs): caught here one iteration after it
reached the head, not at the run's end by LIVE-1.

The head is the first of the queue the target reports after the iteration, or the ledger's
(arrival order, preempted requests first) when it reports none; under a priority or
shortest-first order the ledger's order is not the target's, so a log that reports no queue
there is not judged on ``at-head``. A request admitted and computing is at no head: an engine
may abort it from the batch later, and LIVE-1 bounds the run.
"""

from __future__ import annotations

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.registry import Monitor, Steady, per_iteration
from kvsched.checks.monitor.steady_line import SteadyLine
from kvsched.spec.events import IterationEvent
from kvsched.spec.vocabulary import NOT_ARRIVED
from kvsched.spec.workload import peak_pages


def _head(monitor: Monitor, event: IterationEvent) -> str | None:
    """The request at the head of the queue after ``event``, or ``None`` if the log cannot
    say (a heap order whose queue the target does not report)."""
    if event.waiting:
        return next(iter(event.waiting))
    if monitor.order.order in ("priority", "shortest-first"):
        return None
    return monitor.requests.head()


def _none_infeasible(monitor: Monitor, line: SteadyLine) -> bool:
    # A steady line may leave such a request waiting: only the full path follows it.
    return not monitor.requests.infeasible


@per_iteration("completion", "LIVE-5", steady=Steady(line=_none_infeasible))
def infeasible_requests_are_rejected(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """LIVE-5, once the iteration's finishes are counted: every request no scheduler can hold
    that is still unfinished is within its declared time."""
    pending = monitor.requests.infeasible
    if not pending or "LIVE-5" not in monitor.applicable:
        return None
    n, requests = event.iteration, monitor.requests
    at_arrival = monitor.properties.rejects_infeasible == "at-arrival"
    head = None if at_arrival else _head(monitor, event)
    for rid, since in pending.items():
        state = requests.status(rid)
        if state is None or state is NOT_ARRIVED:
            continue
        if at_arrival:
            why = "the target declares it rejects such a request in the iteration it arrives"
        elif 0 < since < n:
            why = (
                f"it has been at the head of the queue since iteration {since}, and the target "
                "declares it finishes such a request within the iteration after"
            )
        else:
            if rid == head:
                pending[rid] = n
            continue
        record = requests.live[rid]
        need = peak_pages(record.request, monitor.limits.page_size)
        behind = len(requests.queue) - 1 if rid in requests.queue else 0
        message = (
            f"request {rid!r} needs {need} pages at its peak and the pool has "
            f"{monitor.limits.pool_pages}, so no scheduler can serve it, yet it is still "
            f"{requests.where(rid)} "
            f"after iteration {n}: {why}" + (f"; {behind} more wait behind it" if behind else "")
        )
        return Finding("LIVE-5", n, message, requests=(rid,))
    return None
