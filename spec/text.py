"""How kvsched words its data for people: counts, ids, page lists, a workload, one iteration.

Every renderer (the verdict table and JUnit, ``kvsched replay``'s timeline, the monitor's
findings) takes its words from here, so a page list reads ``[0 1]`` everywhere and "1 pages"
nowhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvsched.spec.events import IterationEvent
from kvsched.spec.workload import Workload


def plural(count: int, noun: str) -> str:
    """``3 pages``, ``1 page``: a count with its noun."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def id_list(ids: Iterable[str]) -> str:
    """Request ids, space-separated."""
    return " ".join(ids)


def page_list(pages: Iterable[int]) -> str:
    """Page ids in brackets, space-separated: ``[0 1]``."""
    return "[" + " ".join(str(p) for p in pages) + "]"


def describe_workload(workload: Workload) -> list[str]:
    """A workload as sentences: the limits, then each request in declared order."""
    limits = workload.limits
    lines = [
        f"{plural(len(workload.requests), 'request')}; at most {limits.batch_limit} active at "
        f"once, pages of {plural(limits.page_size, 'token')}, "
        f"a pool of {plural(limits.pool_pages, 'page')}."
    ]
    for r in workload.requests:
        lines.append(
            f"{r.id}: arrives at time {r.arrival} (may join from iteration {r.arrival + 1}), "
            f"prompt of {plural(r.prompt_tokens, 'token')}, "
            f"wants {plural(r.output_tokens, 'output token')}."
        )
    return lines


def describe_event(event: IterationEvent) -> str:
    """One iteration as the monitor saw it, in one line."""
    parts = [f"iteration {event.iteration}:"]
    for rid in event.preempted:  # before anything else: a preemption frees pages for the rest
        released = [p for op in event.schedule if op.kind == "free" and op.request == rid
                    for p in op.pages]  # fmt: skip
        parts.append(f"{rid} preempted, frees page ids {page_list(released)}, back to the queue;")
    if event.admitted:
        parts.append(f"{id_list(event.admitted)} join;")
    parts.append(f"active {id_list(event.active) or 'nobody'};")
    parts.append(f"tokens for {id_list(event.decoded) or 'nobody'};")
    if event.page_tables:
        tables = ", ".join(f"{rid} {page_list(p)}" for rid, p in event.page_tables.items())
        parts.append(f"page ids {tables};")
    for rid in event.finished:
        parts.append(f"{rid} finishes, frees page ids {page_list(event.freed.get(rid, ()))};")
    free = f"{plural(event.free_pages, 'page')} free"
    parts.append(f"{free}; waiting {id_list(event.waiting)}" if event.waiting else free)
    return " ".join(parts)
