"""What the plots draw, read from a run's events: spans per request and figures per iteration.

Iteration ``n`` runs from time ``n - 1`` to time ``n`` (spec/semantics.md, section 3), so a
request that arrives at ``t``, is admitted in iteration ``s`` and finishes in iteration ``f``
waits over ``[t, s - 1]`` and is active over ``[s - 1, f]`` on the time axis. The wasted slots
per iteration follow section 7.6; their peak and mean are exactly ``RunMetrics``'
``peak_wasted_slots`` and ``mean_wasted_slots`` (tests/cover/test_report.py holds the two together).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvsched.reference.efficiency import Meter
from kvsched.spec.events import IterationEvent
from kvsched.spec.workload import Workload


@dataclass(frozen=True)
class RequestSpan:
    """One request's life on the time axis; ``admitted``/``finished`` are iteration numbers."""

    id: str
    arrival: int
    admitted: int | None
    """Iteration of admission; None if the run ended first."""
    finished: int | None
    """Iteration of the last token; None if the run ended first."""

    @property
    def wait_end(self) -> float | None:
        return None if self.admitted is None else self.admitted - 1


@dataclass(frozen=True)
class IterationSeries:
    """Per-iteration figures, index ``i`` for iteration ``i + 1``."""

    active: tuple[int, ...]
    """Requests in the batch (decode slots in use)."""
    waiting: tuple[int, ...]
    """Arrived requests not admitted."""
    pages_in_use: tuple[int, ...]
    """Distinct pages in the active requests' tables (7.5)."""
    wasted_slots: tuple[int, ...]
    """Allocated but unfilled token slots (7.6)."""
    idle: tuple[int, ...] = ()
    """Slots idle while a fitting request waited: EFF-1 iteration by iteration, as
    :class:`~kvsched.reference.efficiency.Meter` counts it, so they add up to the figure the
    report's table gives (one definition, one number)."""


def request_spans(workload: Workload, events: Sequence[IterationEvent]) -> tuple[RequestSpan, ...]:
    """Spans in the workload's declared order."""
    admitted: dict[str, int] = {}
    finished: dict[str, int] = {}
    for event in events:
        for request_id in event.admitted:
            admitted.setdefault(request_id, event.iteration)
        for request_id in event.finished:
            finished.setdefault(request_id, event.iteration)
    return tuple(
        RequestSpan(r.id, r.arrival, admitted.get(r.id), finished.get(r.id))
        for r in workload.requests
    )


def iteration_series(workload: Workload, events: Sequence[IterationEvent]) -> IterationSeries:
    page_size = workload.limits.page_size
    prompts = {r.id: r.prompt_tokens for r in workload.requests}
    generated: dict[str, int] = {}
    wasted: list[int] = []
    idle: list[int] = []
    meter = Meter(workload)
    for event in events:
        counted = meter.idle
        meter.observe(event)
        idle.append(meter.idle - counted)
        for request_id in event.decoded:
            generated[request_id] = generated.get(request_id, 0) + 1
        # Section 7.6: slots allocated to a request beyond its context after this token.
        wasted.append(
            sum(
                max(len(table) * page_size - prompts.get(rid, 0) - generated.get(rid, 0), 0)
                for rid, table in event.page_tables.items()
            )
        )
    return IterationSeries(
        active=tuple(len(e.active) for e in events),
        waiting=tuple(len(e.waiting) for e in events),
        pages_in_use=tuple(e.pages_in_use for e in events),
        wasted_slots=tuple(wasted),
        idle=tuple(idle),
    )


def counts_from_spans(
    spans: Sequence[RequestSpan], iterations: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Requests in the batch and requests waiting per iteration, from the spans alone.

    The fast path keeps no per-iteration figures, but a request's span says when it waited and
    when it ran, which is all the crowd timeline draws. A request is active in iterations
    ``admitted..finished`` and waiting in every iteration from ``arrival + 1`` until it is
    admitted, as the stepped engine's events count them when nothing is preempted (the reference
    policies never preempt; tests/cover/test_report.py holds the two together).
    """
    import numpy as np

    active = np.zeros(iterations + 2, dtype=np.int64)
    waiting = np.zeros(iterations + 2, dtype=np.int64)
    for span in spans:
        start = min(span.arrival + 1, iterations + 1)
        admitted = span.admitted if span.admitted is not None else iterations + 1
        waiting[start] += 1
        waiting[max(admitted, start)] -= 1
        if span.admitted is not None:
            active[span.admitted] += 1
            finished = span.finished if span.finished is not None else iterations
            active[finished + 1] -= 1
    active_counts = np.cumsum(active)[1 : iterations + 1]
    waiting_counts = np.cumsum(waiting)[1 : iterations + 1]
    return tuple(int(a) for a in active_counts), tuple(int(w) for w in waiting_counts)
