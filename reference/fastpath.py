"""Event-jumping replay of the reference policies (spec/semantics.md, sections 3, 5 and 7).

The engine loop (:mod:`.engine`) steps one iteration at a time and records an event for each,
which a third-party scheduler needs. To replay a large trace with the *reference* policies,
:func:`replay` computes the same per-request results and the same :class:`~.metrics.RunMetrics`
without stepping, by jumping from one event to the next:

- a **completion** (3.5) frees a slot and the finished request's committed pages;
- an **arrival** (3.1) matters only if the waiting queue is empty and admission is open (5.1,
  5.2): otherwise the head of the queue is blocked, and stays blocked until a completion, since
  admission looks at committed peak pages (3.2), never at the pages currently taken;
- a **page-boundary crossing** (3.3) changes pages in use and wasted slots (7.5, 7.6) only.

Between two admission or completion events the batch is fixed: a *stretch*. In a stretch every
member gains one token per iteration, so every ``page_size`` iterations each gains exactly one
page. Hence pages in use only grow within a stretch (its peak is its last iteration's), and wasted
slots repeat with period ``page_size``: at most ``page_size`` iterations of a stretch need
evaluating, each weighted by how often it recurs. Nothing is kept per iteration; per request, its
admission iteration, in an array. Strict FCFS admits in arrival order, so the waiting queue is a
range of the arrival order, two integers however long it grows. :func:`replay_columns` reads the
requests as columns (:mod:`.columns`) and keeps no Python object a request.
``tests/cover/test_fastpath.py`` checks with Hypothesis that every result equals the stepped loop's
(:func:`.engine.run` with :func:`.metrics.compute_metrics`).
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from kvsched.spec.workload import Workload, WorkloadError, pages_for

from .columns import Columns, Waits, columns_of
from .engine import Run
from .fastpath_scope import REFERENCE_POLICIES, invalid_workload, policy_scope, replay_scope
from .metrics import RunMetrics, admission_iterations, percentile

__all__ = [
    "REFERENCE_POLICIES",
    "FastRun",
    "RequestResult",
    "replay",
    "replay_columns",
    "replay_scope",
]


@dataclass(frozen=True)
class RequestResult:
    """What happened to one request."""

    admitted: int
    """Iteration in which it joined the batch (3.2)."""
    finished: int
    """Iteration in which it produced its last token (3.5): ``admitted + output_tokens - 1``."""
    wait: int
    """``admitted - 1 - arrival`` (7.3)."""
    pages: int
    """Most pages it held: those of its last iteration (3.3)."""


@dataclass(frozen=True)
class FastRun:
    """A replay's per-request iterations (declared order) and its metrics (section 7)."""

    workload: Workload
    policy: str
    admitted: Sequence[int]
    finished: Sequence[int]
    metrics: RunMetrics

    def result(self, index: int) -> RequestResult:
        """The result of the request declared at ``index``."""
        request = self.workload.requests[index]
        return RequestResult(
            admitted=self.admitted[index],
            finished=self.finished[index],
            wait=self.admitted[index] - 1 - request.arrival,
            pages=pages_for(
                request.prompt_tokens + request.output_tokens, self.workload.limits.page_size
            ),
        )

    def results(self) -> dict[str, RequestResult]:
        """Every request's result by id (builds one object per request: for small runs)."""
        return {r.id: self.result(i) for i, r in enumerate(self.workload.requests)}


def stepped_results(run: Run) -> dict[str, RequestResult]:
    """The same per-request results read off a stepped run's events, to compare with a replay."""
    admitted = admission_iterations(run.events)
    finished: dict[str, int] = {}
    pages: dict[str, int] = {}
    for event in run.events:
        finished.update(dict.fromkeys(event.finished, event.iteration))
        for request_id, table in event.page_tables.items():
            pages[request_id] = max(pages.get(request_id, 0), len(table))
    arrival = {r.id: r.arrival for r in run.workload.requests}
    return {
        rid: RequestResult(s, finished[rid], s - 1 - arrival[rid], pages[rid])
        for rid, s in admitted.items()
        if rid in finished
    }


class _Batch:
    """The active requests as the sums that pages in use and wasted slots need (3.3, 7.5, 7.6).

    A member admitted in iteration ``s`` with ``p`` prompt tokens has context ``n + offset`` in
    iteration ``n``, where ``offset = p + 1 - s`` (section 2: prompt plus the tokens produced so
    far, this iteration's included). It takes a new page in each iteration whose token is the first
    of a page, the iterations ``n`` with ``n % page_size == (1 - offset) % page_size``; members are
    counted by that residue in ``crossing``.
    """

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.size = 0
        self.offsets = 0
        self.pages = 0
        """Pages the members hold in the iteration last advanced to."""
        self.crossing = [0] * page_size

    def join(self, prompt: int, iteration: int) -> None:
        """Admitted in ``iteration``: takes the pages of its prompt plus one token (3.3)."""
        offset = prompt + 1 - iteration
        self.size += 1
        self.offsets += offset
        self.pages += pages_for(prompt + 1, self.page_size)
        self.crossing[(1 - offset) % self.page_size] += 1

    def leave(self, prompt: int, peak: int, admitted: int) -> None:
        """Finished in the iteration last advanced to, holding its ``peak`` pages (3.5)."""
        offset = prompt + 1 - admitted
        self.size -= 1
        self.offsets -= offset
        self.pages -= peak
        self.crossing[(1 - offset) % self.page_size] -= 1

    def advance(self, iteration: int) -> None:
        """Move the members from ``iteration - 1`` to ``iteration``: some cross a page boundary."""
        self.pages += self.crossing[iteration % self.page_size]

    def wasted(self, iteration: int) -> int:
        """Slots taken but not filled, summed over the members (7.6)."""
        return self.page_size * self.pages - (self.size * iteration + self.offsets)


@dataclass
class Tally:
    busy: int = 0
    peak_pages: int = 0
    peak_wasted: int = 0
    total_wasted: int = 0
    last: int = 0
    """The last busy iteration (7.1): the stretches come in order."""

    def stretch(self, batch: _Batch, first: int, last: int) -> None:
        """Account iterations ``first..last``, all with ``batch`` as it is at ``first``."""
        period = batch.page_size
        pages_at_last = 0
        for iteration in range(first, min(last, first + period - 1) + 1):
            if iteration > first:
                batch.advance(iteration)
            wasted = batch.wasted(iteration)  # the same in iteration + period, + 2 period, ...
            self.peak_wasted = max(self.peak_wasted, wasted)
            self.total_wasted += wasted * ((last - iteration) // period + 1)
            if (last - iteration) % period == 0:
                # Each member takes one page per period of iterations.
                pages_at_last = batch.pages + batch.size * ((last - iteration) // period)
        batch.pages = pages_at_last
        self.busy += last - first + 1
        self.last = last
        self.peak_pages = max(self.peak_pages, pages_at_last)  # pages only grow in a stretch


def replay(workload: Workload, policy: str) -> FastRun:
    """Run a reference policy over ``workload`` by jumping from event to event.

    Raises :class:`~kvsched.spec.workload.WorkloadError` for a workload the loader would refuse,
    and :class:`~kvsched.spec.scope.OutOfScope` for a policy it does not model
    (:func:`.scope.replay_scope` says beforehand).
    """
    problem = invalid_workload(workload)
    if problem:  # invalid input, as the loader would say (section 1), not a question of scope
        raise WorkloadError(problem)
    policy_scope(policy).require("the event-jumping replay")
    columns = columns_of(workload)
    admitted, tally = _jump(columns, policy)
    finished = array("q", map(_last_iteration, admitted, columns.output))
    return FastRun(workload, policy, admitted, finished, metrics_of(columns, admitted, tally))


def replay_columns(columns: Columns, policy: str) -> RunMetrics:
    """:func:`replay`'s metrics from columns, in memory that grows by 16 bytes a request
    beside the columns, and no Python object a request (a generated family's columns, or a
    loaded workload's: those are valid)."""
    policy_scope(policy).require("the event-jumping replay")
    admitted, tally = _jump(columns, policy)
    return metrics_of(columns, admitted, tally)


def _last_iteration(admitted: int, output: int) -> int:
    return admitted + output - 1  # 3.5


def _jump(columns: Columns, policy: str) -> tuple[array[int], Tally]:
    limits = columns.limits
    page_size, pool = limits.page_size, limits.pool_pages
    arrivals, prompts, outputs = columns.arrival, columns.prompt, columns.output
    order = columns.arrival_order()
    size = len(columns)
    admitted = array("q", bytes(8 * size))
    # Strict FCFS (BATCH-4) admits in arrival order, so the queue is the positions of ``order``
    # from ``head`` to ``arrived``: two integers, however long it grows.
    head = arrived = 0
    ending: list[tuple[int, int]] = []  # heap of (finish iteration, request) for the batch
    committed = 0  # peak pages of the batch (3.2)
    batch = _Batch(page_size)
    tally = Tally()
    continuous = policy == "continuous"
    iteration = 1
    while True:
        # 3.5, at the end of the previous iteration: the finished leave and free their pages.
        while ending and ending[0][0] < iteration:
            _, index = heapq.heappop(ending)
            peak = pages_for(prompts[index] + outputs[index], page_size)
            batch.leave(prompts[index], peak, admitted[index])
            committed -= peak
        batch.advance(iteration)  # 3.3 for those who stay
        # 3.1 Arrival.
        while arrived < size and arrivals[order[arrived]] < iteration:
            arrived += 1
        # 3.2 Admission, when the policy opens it (5.1, 5.2).
        if continuous or batch.size == 0:
            while head < arrived and batch.size < limits.batch_limit:
                index = order[head]
                peak = pages_for(prompts[index] + outputs[index], page_size)
                if committed + peak > pool:
                    break
                head += 1
                admitted[index] = iteration
                heapq.heappush(ending, (iteration + outputs[index] - 1, index))  # 3.5
                committed += peak
                batch.join(prompts[index], iteration)
        if batch.size == 0:  # idle until the next arrival (a valid head always fits: section 1)
            if arrived == size:
                break
            iteration = arrivals[order[arrived]] + 1
            continue
        # The batch is fixed until its first member finishes, or until the next arrival if that
        # arrival could be admitted at once.
        last = ending[0][0]
        if continuous and head == arrived < size:
            last = min(last, arrivals[order[arrived]])
        tally.stretch(batch, iteration, last)
        iteration = last + 1
    return admitted, tally


def metrics_of(columns: Columns, admitted: array[int], tally: Tally) -> RunMetrics:
    """Section 7 from the replay, with compute_metrics' arithmetic so floats match bit for bit:
    the same integers in the same order, the percentiles by the same numpy call."""
    import numpy as np  # as metrics.percentile does, only when a replay needs it

    waits = array("q", bytes(8 * len(admitted)))  # 8 bytes a request, written in place
    into = np.frombuffer(waits, np.int64)
    np.subtract(np.frombuffer(admitted, np.int64), np.frombuffer(columns.arrival, np.int64), into)
    into -= 1
    del into  # an array still exported would forbid resizing ``waits``: none is left
    tokens = sum(columns.output)
    busy = tally.busy
    method = columns.percentile_method
    return RunMetrics(
        iterations=tally.last,
        busy_iterations=busy,
        tokens=tokens,
        utilization=tokens / (columns.limits.batch_limit * busy),
        waits=Waits(columns.ids, waits),
        p50_wait=percentile(waits, 50, method),
        p95_wait=percentile(waits, 95, method),
        percentile_method=method,
        max_wait=max(waits),
        mean_wait=sum(waits) / len(waits),
        peak_pages=tally.peak_pages,
        peak_wasted_slots=tally.peak_wasted,
        mean_wasted_slots=tally.total_wasted / busy,
    )
