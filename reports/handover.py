"""The lesson's storyboard as facts read off two runs: what happens to the first freed slot.

Under static batching the first member of the first batch to finish leaves its slot idle until
the batch drains (BATCH-2) while requests wait; under continuous batching the head of the queue
takes that slot in the next iteration (BATCH-3). For the teaching trace: `a`, `b`, `c` form the
first batch, `a` finishes in iteration 14, `d` takes its slot in 15. The story (:mod:`.story`)
puts these facts in words and the timeline (:mod:`.gantt`) draws them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .collect import CaseRun


@dataclass(frozen=True)
class Handover:
    first_batch: tuple[str, ...]
    """Requests admitted in the first iteration that admitted any (static run), declared order."""
    first_pages: int | None
    """Pages in use in that iteration; None without per-iteration figures (fast path)."""
    early: str
    """The first member of the first batch to finish under static batching."""
    freed_static: int
    """Iteration in which ``early`` finishes under static batching."""
    drained_static: int
    """Iteration in which the first static batch drains."""
    waiting_static: tuple[str, ...]
    """Requests queued in iteration ``freed_static + 1`` under static batching."""
    freed_continuous: int | None
    """Iteration in which ``early`` finishes under continuous batching."""
    joined_continuous: tuple[str, ...]
    """Requests admitted in iteration ``freed_continuous + 1`` under continuous batching."""


def first_handover(static: CaseRun, continuous: CaseRun) -> Handover | None:
    """The facts above, or None if the static run admitted or finished nobody."""
    first = first_batch(static)
    ends = {s.id: s.finished for s in static.spans if s.id in first and s.finished}
    if not ends:
        return None
    early = min(ends, key=lambda rid: (ends[rid], first.index(rid)))
    freed = ends[early]
    after = freed + 1
    waiting = tuple(
        s.id
        for s in static.spans
        if s.arrival < after and (s.admitted is None or s.admitted > after)
    )
    freed_continuous = {s.id: s.finished for s in continuous.spans}.get(early)
    joined: tuple[str, ...] = ()
    if freed_continuous is not None:
        joined = tuple(s.id for s in continuous.spans if s.admitted == freed_continuous + 1)
    return Handover(
        first_batch=first,
        first_pages=_pages_in(static, next(s.admitted for s in static.spans if s.id == first[0])),
        early=early,
        freed_static=freed,
        drained_static=max(ends.values()),
        waiting_static=waiting,
        freed_continuous=freed_continuous,
        joined_continuous=joined,
    )


def first_batch(case: CaseRun) -> tuple[str, ...]:
    """Requests admitted in the first iteration that admitted any, in declared order."""
    admitted = [s.admitted for s in case.spans if s.admitted is not None]
    if not admitted:
        return ()
    start = min(admitted)
    return tuple(s.id for s in case.spans if s.admitted == start)


def _pages_in(case: CaseRun, iteration: int | None) -> int | None:
    if case.series is None or iteration is None:
        return None
    return case.series.pages_in_use[iteration - 1]
