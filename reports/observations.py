"""What a run's figures mean, said only when the run shows it: memory binds, the queue grows.

Utilization counts decode slots, so a continuous run held back by a full KV pool reads "47%"
although nothing more could run; pool occupancy beside it says why. Waits that grow with every
arrival mean an overloaded queue, whose P95 depends on how long the run is. Idle slots while
requests wait mean BATCH-2 under the reference's static batching and a head of the queue that
does not fit the free pages under its continuous batching; for a scheduler under test they are
measured, not explained. Every sentence here is computed from the run it describes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import numbers
from .collect import CaseRun
from .series import counts_from_spans

MEMORY_BINDS_SHARE = 0.25
"""The pool is said to bind when at least this share of the iterations open to admission left
the batch short of its limit while requests waited."""
BACKLOG_QUARTER_RATIO = 4.0
"""Waits grow with the workload when the last quarter of arrivals waits this many times as long
as the first quarter, on average..."""
BACKLOG_MIN_WAIT = 10.0
"""...and at least this many iterations longer, so a few iterations of jitter are no backlog."""


@dataclass(frozen=True)
class Occupancy:
    """KV pages in use over the pool, as fractions."""

    peak: float
    mean: float | None
    """Over the busy iterations; None without per-iteration figures (the fast path)."""


def occupancy(case: CaseRun) -> Occupancy:
    pool = case.workload.limits.pool_pages
    peak = case.metrics.peak_pages / pool if pool else 0.0
    series = case.series
    if series is None or not pool:
        return Occupancy(peak, None)
    pairs = zip(series.pages_in_use, series.active, strict=True)
    busy = [pages for pages, active in pairs if active]
    return Occupancy(peak, float(np.mean(busy)) / pool if busy else 0.0)


def active_and_waiting(case: CaseRun) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per iteration: requests in the batch and requests waiting, from the series or spans."""
    if case.series is not None:
        return case.series.active, case.series.waiting
    return counts_from_spans(case.spans, case.metrics.iterations)


def idle_slot_iterations(case: CaseRun) -> int | None:
    """EFF-1, the table's idle slot-iterations; None for a fast-path run, which keeps no pages
    to tell whether the head of the queue fitted."""
    if case.efficiency is not None:
        return case.efficiency.idle_slot_iterations
    return None if case.series is None else sum(case.series.idle)


def idle_slots(case: CaseRun) -> tuple[int, ...]:
    """Per iteration, the slots drawn red: EFF-1's where the run kept its events; for a
    fast-path run, every free slot while a request waited (:func:`idle_slot_words` names it so)."""
    if case.series is not None:
        return case.series.idle
    active, waiting = active_and_waiting(case)
    limit = case.workload.limits.batch_limit
    return tuple((limit - a) if w else 0 for a, w in zip(active, waiting, strict=True))


def memory_binds(case: CaseRun) -> str:
    """A sentence when the KV pool, not the batch limit, held a reference run back; else empty.

    The reference policies admit a request only if its peak pages fit beside the batch's
    (BATCH-1, PAGE-5), so a batch that stays below its limit while requests wait, in an
    iteration where admission was open, is one whose head did not fit the pool. Admission is
    open in every iteration under continuous batching, and under static batching only in those
    that form a batch. A scheduler under test gets no such sentence: why it left slots free is
    its own.
    """
    if case.under_test or case.problem:
        return ""
    limit = case.workload.limits.batch_limit
    active, waiting = active_and_waiting(case)
    admitted = np.bincount(
        [s.admitted for s in case.spans if s.admitted is not None], minlength=len(active) + 1
    )
    open_iterations = [
        i for i in range(len(active)) if active[i] and (case.policy != "static" or admitted[i + 1])
    ]
    short = [i for i in open_iterations if waiting[i] and active[i] < limit]
    if not short or len(short) < MEMORY_BINDS_SHARE * len(open_iterations):
        return ""
    seen = occupancy(case)
    mean = "" if seen.mean is None else f" (mean {numbers.percent(seen.mean)})"
    return (
        f"**Memory binds `{case.policy}`**: in {numbers.count(len(short))} of "
        f"{numbers.counted(len(open_iterations), 'iteration')} open to admission the batch "
        f"stayed below its limit of {numbers.count(limit)} while requests waited, because the "
        "head of the queue did not fit its peak pages beside the batch's. Utilization "
        f"({numbers.percent(case.metrics.utilization)}) counts decode slots; the KV pool, not the "
        f"batch limit, is what ran out. Pages in use peaked at {numbers.percent(seen.peak)} of "
        f"the pool{mean}: admission reserves each request's peak pages before it needs them."
    )


def backlog(case: CaseRun) -> str:
    """A sentence when waits grow with the workload (an overloaded queue); else empty."""
    waits = [case.metrics.waits[s.id] for s in case.spans if s.id in case.metrics.waits]
    quarter = len(waits) // 4
    if quarter < 5:
        return ""
    first = float(np.mean(waits[:quarter]))
    last = float(np.mean(waits[-quarter:]))
    if last < BACKLOG_QUARTER_RATIO * first or last - first < BACKLOG_MIN_WAIT:
        return ""
    _, waiting = active_and_waiting(case)
    return (
        f"**Waits grow with the workload under `{case.policy}`**: the last quarter of arrivals "
        f"waited {numbers.fixed(last, 1)} iterations on average, the first quarter "
        f"{numbers.fixed(first, 1)}, and the queue peaked at "
        f"{numbers.counted(max(waiting, default=0), 'request')}. Requests arrived faster than "
        "they were served, so this P95 wait depends on how many requests the run holds, not on "
        "the scheduler alone: compare it only with runs of the same length."
    )


def idle_slot_words(case: CaseRun) -> str:
    """What the red slots of one case are, true of this run, with the table's number."""
    count = idle_slot_iterations(case)
    if count is None:  # not EFF-1, so not called by its name
        free = sum(idle_slots(case))
        return (
            f"`{case.policy}`: {numbers.counted(free, 'free slot-iteration')} while a request "
            "waited (the fast path keeps no pages, so idle slot-iterations, EFF-1, are not "
            "measured)"
        )
    if count == 0:
        return f"`{case.policy}` left no slot idle while a fitting request waited"
    measured = f"`{case.policy}`: {numbers.counted(count, 'idle slot-iteration')}"
    if case.problem:
        return f"{measured}, in a run that did not complete ({case.problem})"
    if case.under_test:
        return (
            f"{measured}, measured for the scheduler under test and not explained here: "
            "`kvsched check` says whether they break BATCH-3"
        )
    if case.policy == "static":
        return f"{measured}, the slots of finished members held until the batch drains (BATCH-2)"
    return (
        f"{measured}, while the head of the queue did not fit its peak KV pages beside the "
        "batch's (BATCH-3 allows it)"
    )
