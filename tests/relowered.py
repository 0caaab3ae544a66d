"""Events edited by hand, lowered again as version 1 is: a test that changes an event's tables or
admissions gets the schedule (and the allocations) that follow from them, as the engine and the
version-1 reader would have lowered them (:func:`kvsched.spec.events.fixed_order`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from kvsched.spec.events import IterationEvent, fixed_order


def relowered(events: Iterable[IterationEvent]) -> tuple[IterationEvent, ...]:
    """Each event's schedule and allocations made again from its fields, in order. A preempted
    request releases what ``freed`` lists for it, as in version 1, or else the pages its
    schedule's frees named."""
    before: dict[str, tuple[int, ...]] = {}
    lowered = []
    for event in events:
        frees = {op.request: op.pages for op in event.schedule if op.kind == "free"}
        released = {
            rid: tuple(event.freed[rid]) if rid in event.freed else frees.get(rid, ())
            for rid in event.preempted
        }
        schedule, gained = fixed_order(
            before, event.preempted, released, event.admitted, event.page_tables, event.shared
        )
        freed = {rid: pages for rid, pages in event.freed.items() if rid not in released}
        lowered.append(replace(event, schedule=schedule, allocated=gained, freed=freed))
        before = lowered[-1].tables_after()
    return tuple(lowered)
