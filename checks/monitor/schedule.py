"""An iteration's scheduling, operation by operation, in the order the engine did it.

A version-2 event log (spec/eventlog.md) lists what the engine did while it scheduled an
iteration: arrivals, preemptions and the frees they cause, admissions, fresh and shared pages.
A version-1 line and an in-process run are lowered to the same operations in version 1's fixed
order (:func:`kvsched.spec.events.fixed_order`), so this is every event's schedule. The
order carries meaning a fixed order cannot: a request preempted and re-admitted in one iteration
releases its old pages before it takes new ones; a page freed by a preemption may go to a request
admitted after it, but not to one admitted before. Each operation is checked where it happens,
with the request and page ledgers' own checks; what follows the schedule (the step's tokens, the
finishes and their frees) is the monitor's usual work.
"""

from __future__ import annotations

from collections.abc import Callable

from kvsched.checks.monitor.findings import Finding, most_specific
from kvsched.checks.monitor.pages import PageLedger
from kvsched.checks.monitor.requests import RequestLedger
from kvsched.spec.events import Op
from kvsched.spec.vocabulary import assert_never


def check_schedule(
    n: int,
    ops: tuple[Op, ...],
    requests: RequestLedger,
    pages: PageLedger,
    check_limits: Callable[[int], Finding | None],
) -> Finding | None:
    """Apply iteration ``n``'s scheduling operations in order; the most specific violation, if
    any (:func:`~.findings.most_specific`), the first of those in the engine's order.

    A preempted request must have released every page by the time it is admitted again, or by
    the end of the schedule if it is not (PAGE-4): its frees may follow its ``preempt``.
    The operations after a violation are applied too, so that the rest of the iteration (and,
    checking on, of the run) is not judged on a schedule cut short; that costs nothing on a
    schedule without one.
    """
    found: list[Finding] = []
    try:
        _apply(n, ops, requests, pages, check_limits, found)
    except Exception:
        if not found:
            raise
        # Past a violation the ledgers may be part-way: what was found stands, never a crash.
    return most_specific(found) if found else None


def _apply(
    n: int,
    ops: tuple[Op, ...],
    requests: RequestLedger,
    pages: PageLedger,
    check_limits: Callable[[int], Finding | None],
    found: list[Finding],
) -> None:
    """:func:`check_schedule`'s operations, each violation appended to ``found``."""
    preempted: dict[str, None] = {}  # preempted in this schedule and not admitted again
    joined: dict[str, None] = {}  # admitted in this schedule: one static batch, not two
    for op in ops:
        rid, kind = op.request, op.kind
        finding: Finding | None = None
        match kind:
            case "arrive":
                finding = requests.arrive_now(n, rid)
            case "preempt":
                finding = requests.preempt(n, rid)
                preempted[rid] = None
            case "free":
                why = "preempted" if rid in preempted else "freed"
                finding = pages.release(n, rid, op.pages, why)
            case "admit":
                if rid in preempted:
                    del preempted[rid]
                    if dropped := pages.drop(n, rid, "was preempted and admitted again"):
                        found.append(dropped)
                # Admitted whatever it kept, then within the limits or not: each is its own rule.
                finding = requests.admit(n, (rid,), joined)
                if finding is not None:
                    found.append(finding)
                finding = check_limits(n)
                joined[rid] = None
            case "alloc" | "share":
                finding = pages.grow(n, rid, op.pages, kind == "share", requests.active)
            case "lose":
                finding = pages.lose(n, rid, op.pages)
            case _:
                assert_never(kind)
        if finding:
            found.append(finding)
    for rid in preempted:
        if finding := pages.drop(n, rid, "was preempted"):
            found.append(finding)
