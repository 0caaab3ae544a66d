"""Shrinking a failing fixed workload to the smallest one that still breaks the same invariant.

Hypothesis shrinks the workloads it generates; a violation found on the teaching trace, a seeded
family of a thousand requests or a user's ``--workload`` needs the same service, or a learner is
handed forty requests and a hundred iterations to read. This is a delta-debugger over the
workload's own structure, in passes that each run to their end before the next starts, repeated
while a round of them makes the workload smaller:

1. the horizon: the fewest requests, in arrival order, that still fail (a bisection), since
   nothing that arrives after a violation can cause it;
2. the limits: the smallest pool, batch limit and page size that still fail, each by a
   bisection (a smaller page size keeps every request's pages, in fewer tokens). Without it a
   family's find stops at 40 requests: each of them is needed to fill a pool of 113 pages and
   preempt, so no single request can go, and the budget was spent trying each;
3. sizes across all requests at once: every output, then every prompt, capped at a bisected
   value; the arrivals all at once, else without idle gaps;
4. the requests' numbers at their floors (one output token, no prompt, arrival 0, no shared
   prefix, no priority), all at once, else in halves, quarters, ... of the requests;
5. requests dropped in halves, quarters, ... then one by one (ddmin), each removal tried again
   where the last one succeeded, never from the start;
6. two requests neighbouring in arrival order merged into one carrying both prompts, where
   their pressure on the pool together is what fails;
7. each request's numbers (output, prompt, arrival, shared prefix, priority): the floor first,
   then by bisection when the requests are few.

A candidate is kept when ``still_fails`` holds on it. A candidate that differs from one already
seen to pass only in its requests' ids is not run again: in a crowd of alike requests, which a
bug that needs a hundred finished requests shrinks to, dropping any one of them is the same
candidate, and without this the drop pass spent a run on each. Every candidate is validated by
:func:`~kvsched.spec.workload.parse_workload`, so the result is a workload file
``kvsched check --workload`` accepts, and since runs are deterministic it fails the same way there.
The work is bounded by a number of candidate runs, not by time, so that every machine shrinks to
the same witness.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.registry import END_CHECKS
from kvsched.checks.monitor.runtime import Monitor, watch_run
from kvsched.reference.engine import Run, run
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.workload import (
    Limits,
    Request,
    Workload,
    WorkloadError,
    arrival_indices,
    parse_workload,
    peak_pages,
    workload_to_json,
)

BISECTED = 8
"""Requests few enough for every number of each to be bisected; more get one bold try each."""

DEFAULT_BUDGET = 400
"""Most candidate runs one shrink may spend; each is one engine run plus the monitor."""


class Spent(Exception):
    """Raised by a ``still_fails`` whose caller's own budget (of engine iterations, say) ran
    out: the shrink ends with the smallest workload found so far."""


def shrink_workload(
    workload: Workload, still_fails: Callable[[Workload], bool], budget: int = DEFAULT_BUDGET
) -> Workload:
    """The smallest workload found from ``workload`` on which ``still_fails`` holds."""
    shrinker = _Shrinker(workload, still_fails, budget)
    shrinker.shrink()
    return _renamed(shrinker.current, still_fails)


def violation(run: Run, invariant: str, properties: TargetProperties | None) -> Finding | None:
    """The run's first finding if ``invariant`` is violated anywhere in it, else None.

    The lock a shrink keeps: the violation found stays in every workload it passes through, so
    the shrink never drifts into a workload that fails for another reason only. It need not be
    the first violation there: on a smaller workload the same bug may show earlier under another
    rule (a re-prefill that drops a token is a stray chunk among a thousand requests, a page
    short among three), and the first is what names it. Only an invariant of :data:`END_IDS`
    reads the end of the run: any other may be judged on a run cut short (:func:`horizon`).
    """
    monitor = Monitor(run.workload, run.policy, properties, all_findings=True)
    for event in run.events:
        monitor.observe(event)
        if invariant in monitor.findings:
            return monitor.finding
    if invariant not in END_IDS:
        return None
    monitor.finish(run.drained, run.fault)
    return monitor.finding if invariant in monitor.findings else None


def horizon(finding: Finding) -> int | None:
    """Iterations enough for a shrink's candidates to show ``finding``'s violation again: the
    rest of a run (thousands of iterations of a family) is engine time spent after it. None for
    a violation only the end of a run shows."""
    if finding.invariant in END_IDS:
        return None
    return 4 * finding.iteration + 64


END_IDS = frozenset(i for check in END_CHECKS for i in check.ids)
"""The invariants an end-of-run check reports, which a run cut short cannot show."""


def smallest_failing(
    workload: Workload,
    invariant: str,
    factory: SchedulerFactory,
    policy: str,
    properties: TargetProperties | None = None,
) -> tuple[Workload, Finding] | None:
    """The smallest workload found from ``workload`` on which ``factory``'s scheduler still
    breaks ``invariant`` first, with the finding there; None if ``workload`` itself no longer
    does (a target that answers the same workload differently)."""
    last: list[Finding] = []

    def still_fails(candidate: Workload) -> bool:
        if properties is not None and properties.unservable(candidate):
            return False  # a pool the target's reserved pages leave too small
        finding = watch_run(run(candidate, factory, policy, properties=properties), properties)[0]
        if finding is None or finding.invariant != invariant:
            return False
        last.append(finding)
        return True

    if not still_fails(workload):
        return None
    smallest = shrink_workload(workload, still_fails)
    return (smallest, last[-1]) if still_fails(smallest) else (workload, last[0])


@dataclass
class _Shrinker:
    """The workload shrunk so far, and the runs spent on it."""

    current: Workload
    still_fails: Callable[[Workload], bool]
    budget: int
    runs: int = 0
    passed: set[_Shape] = field(default_factory=set)
    """The shapes of the candidates seen not to fail (:func:`_shape`)."""

    def shrink(self) -> None:
        # The bold passes first: a smaller pool and fewer tokens make requests droppable that
        # were needed before, and every run after them cheaper. The limits again after the
        # sizes: a pool can shrink to the largest request's peak only once that has shrunk.
        passes = (
            self._horizon,
            self._halves,
            self._limits,
            self._caps,
            self._limits,
            self._floors,
            self._drop,
            self._merge,
            self._numbers,
        )
        # The workload each pass last found nothing to shrink in: while it is still the current
        # one the pass would find nothing again, and a crowd the bug needs (every request of
        # it) is not tried request by request once more.
        settled: dict[int, Workload] = {}
        while self.runs < self.budget:
            before = _size(self.current)
            for index, shrink_pass in enumerate(passes):
                if settled.get(index) == self.current:
                    continue
                began = self.current
                shrink_pass()
                if self.current == began:
                    settled[index] = began
            if _size(self.current) == before:
                return

    def tried(self, candidate: Workload) -> bool:
        """Whether ``candidate`` is smaller, valid and still fails; if so it is kept."""
        if self.runs >= self.budget or _size(candidate) >= _size(self.current):
            return False
        shape = _shape(candidate)
        if shape in self.passed or not _valid(candidate):
            return False
        self.runs += 1
        try:
            fails = self.still_fails(candidate)
        except Spent:
            self.runs = self.budget
            return False
        if not fails:
            self.passed.add(shape)
            return False
        self.current = candidate
        return True

    def lowest(self, value: int, floor: int, made: Callable[[int], Workload]) -> None:
        """Lower one number of the current workload towards ``floor``: the floor itself first,
        then by bisection, assuming (and checking each step) that what fails at a value fails
        above it. ``made(v)`` is the current workload with the number set to ``v``."""
        if value <= floor or self.tried(made(floor)):
            return
        low, high = floor + 1, value  # ``high`` fails; below ``low`` nothing was seen to
        while low < high:
            middle = (low + high) // 2
            if self.tried(made(middle)):
                high = middle
            else:
                low = middle + 1

    def floor(self, value: int, floor: int, made: Callable[[int], Workload]) -> None:
        """Lower one number to ``floor`` or leave it: one run."""
        if value > floor:
            self.tried(made(floor))

    def requests(self, requests: Sequence[Request]) -> Workload:
        return replace(self.current, requests=tuple(requests))

    def request(self, index: int, changed: Callable[[Request], Request]) -> Workload:
        requests = list(self.current.requests)
        requests[index] = changed(requests[index])
        return self.requests(requests)

    def limits(self, **changes: int) -> Workload:
        return replace(self.current, limits=replace(self.current.limits, **changes))

    # passes ---------------------------------------------------------------------------------
    def _horizon(self) -> None:
        """Keep the first requests in arrival order only: a bisection on how many."""
        # The requests this pass began with: each kept candidate is a prefix of their arrival
        # order, so later counts keep their meaning.
        requests = self.current.requests
        order = arrival_indices(requests)

        def first(count: int) -> Workload:
            kept = sorted(order[:count])  # declared order, as the engine reads it
            return self.requests([requests[i] for i in kept])

        self.lowest(len(order), 1, first)

    def _limits(self) -> None:
        requests = self.current.requests
        # Below the largest request's peak the workload is invalid (section 1): no run needed.
        needed = max(peak_pages(r, self.current.limits.page_size) for r in requests)
        self.lowest(self.current.limits.pool_pages, needed, lambda v: self.limits(pool_pages=v))
        # Pages of one token, if that still fails, before the batch limit's bisection: every
        # request keeps its pages in fewer tokens, and each run of the bisection is shorter. A
        # page size that must stay larger is bisected after it, as it has to be: before it, a
        # preemption bug kept pages of 2 tokens.
        self.floor(self.current.limits.page_size, 1, self._paged)
        # More slots than requests are never used: the floor, one, is tried first anyway.
        self.lowest(self.current.limits.batch_limit, 1, lambda v: self.limits(batch_limit=v))
        self.lowest(self.current.limits.page_size, 1, self._paged)

    def _paged(self, page_size: int) -> Workload:
        """The current workload in pages of ``page_size`` tokens, every request (and shared
        prefix) holding as many pages as before, so the pool presses as it did: a page's worth
        of tokens becomes ``page_size`` tokens, a partly filled last page keeps at most that."""
        old = self.current.limits.page_size

        def scaled(tokens: int) -> int:
            full, rest = divmod(tokens, old)
            return full * page_size + min(rest, page_size)

        requests = [
            replace(
                r,
                prompt_tokens=scaled(r.prompt_tokens),
                output_tokens=max(1, scaled(r.output_tokens)),
                prefix_tokens=scaled(r.prefix_tokens),
            )
            for r in self.current.requests
        ]
        return replace(
            self.requests(requests), limits=replace(self.current.limits, page_size=page_size)
        )

    def _halves(self) -> None:
        """The coarse chunks of :meth:`_drop` (down to an eighth), before the limits: a run
        of hundreds of requests is what makes a shrink slow, and most of them can go at once."""
        self._drop(len(self.current.requests) // 8)

    def _drop(self, finest: int = 1) -> None:
        """Delta debugging over the requests: chunks of a half, a quarter, ... then single
        requests, each tried again at the same place after a removal succeeds."""
        chunk = len(self.current.requests) // 2
        while chunk >= max(1, finest) and self.runs < self.budget:
            start = 0
            while start < len(self.current.requests) and self.runs < self.budget:
                requests = self.current.requests
                kept = requests[:start] + requests[start + chunk :]
                if not (kept and self.tried(self.requests(kept))):
                    start += chunk
            chunk //= 2

    def _merge(self) -> None:
        """Two requests neighbouring in arrival order become one that arrives with the first and
        carries both prompts: the same pressure on the pool, one request fewer."""
        index = 0
        while index + 1 < len(self.current.requests) and self.runs < self.budget:
            order = arrival_indices(self.current.requests)
            first, second = sorted(order[index : index + 2])
            requests = list(self.current.requests)
            a, b = requests[first], requests[second]
            merged = replace(
                a,
                prompt_tokens=a.prompt_tokens + b.prompt_tokens,
                output_tokens=max(a.output_tokens, b.output_tokens),
                prefix_group=a.prefix_group if a.prefix_group == b.prefix_group else "",
                prefix_tokens=a.prefix_tokens if a.prefix_group == b.prefix_group else 0,
            )
            requests[first] = merged
            del requests[second]
            if not self.tried(self.requests(requests)):
                index += 1

    def _caps(self) -> None:
        """Every request at once, capped at one bisected value: a crowd whose sizes only add up
        to the pressure shrinks in a dozen runs, not a dozen per request. Arrivals all at once,
        else the earliest at 0 and no gaps between distinct arrival times."""
        self.lowest(
            max(r.output_tokens for r in self.current.requests),
            1,
            lambda v: self.requests(
                [replace(r, output_tokens=min(r.output_tokens, v)) for r in self.current.requests]
            ),
        )
        self.lowest(
            max(r.prompt_tokens for r in self.current.requests),
            0,
            lambda v: self.requests(
                [_prompt(r, min(r.prompt_tokens, v)) for r in self.current.requests]
            ),
        )
        self._arrivals()

    def _numbers(self) -> None:
        """Each request's numbers: by bisection when they are few, else only their floors."""
        thorough = len(self.current.requests) <= BISECTED
        for index in range(len(self.current.requests)):
            if index >= len(self.current.requests) or self.runs >= self.budget:
                return
            self._request(index, thorough)

    def _floors(self) -> None:
        """The requests' numbers at their floors, all of them at once, then one number at a
        time; where that fails, in halves of the requests, then quarters, down to the few that
        cannot take it. A crowd that is what fails shrinks to alike requests in a few dozen runs,
        where request by request it cost one run each, and the drop pass then tries each size
        of chunk once (:meth:`tried`)."""
        for changed in (
            _floored,
            lambda r: replace(r, output_tokens=1),
            lambda r: _prompt(r, 0),
            lambda r: replace(r, arrival=0),
            _unshared,
            lambda r: replace(r, priority=0),
        ):
            self._floored_in(0, len(self.current.requests), changed)

    def _floored_in(self, start: int, end: int, changed: Callable[[Request], Request]) -> None:
        requests = self.current.requests  # as many as when the pass began: it drops none
        if start >= end or self.runs >= self.budget:
            return
        lowered = [changed(r) for r in requests[start:end]]
        if lowered == list(requests[start:end]):
            return
        if self.tried(self.requests([*requests[:start], *lowered, *requests[end:]])):
            return
        if end - start > 1:
            middle = (start + end) // 2
            self._floored_in(start, middle, changed)
            self._floored_in(middle, end, changed)

    def _arrivals(self) -> None:
        requests = self.current.requests
        if self.tried(self.requests([replace(r, arrival=0) for r in requests])):
            return
        times = sorted({r.arrival for r in requests})
        rank = {t: i for i, t in enumerate(times)}
        self.tried(self.requests([replace(r, arrival=rank[r.arrival]) for r in requests]))

    def _request(self, index: int, thorough: bool) -> None:
        def request() -> Request:
            return self.current.requests[index]

        def output(v: int) -> Workload:
            return self.request(index, lambda r: replace(r, output_tokens=v))

        def prompt(v: int) -> Workload:
            return self.request(index, lambda r: _prompt(r, v))

        def arrival(v: int) -> Workload:
            return self.request(index, lambda r: replace(r, arrival=v))

        def prefix(v: int) -> Workload:
            return self.request(index, lambda r: replace(r, prefix_tokens=v))

        lower = self.lowest if thorough else self.floor
        lower(request().output_tokens, 1, output)
        lower(request().prompt_tokens, 0, prompt)
        lower(request().arrival, 0, arrival)
        dropped = self.request(index, _unshared)
        if request().prefix_group and not self.tried(dropped):
            lower(request().prefix_tokens, 0, prefix)
        sign = 1 if request().priority > 0 else -1

        def priority(v: int) -> Workload:  # towards 0 from either side
            return self.request(index, lambda r: replace(r, priority=sign * v))

        lower(abs(request().priority), 0, priority)
        if thorough:
            self._lighter(index)

    def _lighter(self, index: int) -> None:
        """The request's prompt, then its output, lowered with the pool, by bisection: the
        pool loses the pages the request no longer needs at its peak, so where the pool's
        pressure is the bug (a request that needs the whole pool), neither goes alone."""
        before = self.current.requests[index]
        self.lowest(before.prompt_tokens, 0, self._with_pool(index, lambda t: _prompt(before, t)))
        after = self.current.requests[index]
        self.lowest(
            after.output_tokens,
            1,
            self._with_pool(index, lambda t: replace(after, output_tokens=t)),
        )

    def _with_pool(
        self, index: int, smaller: Callable[[int], Request]
    ) -> Callable[[int], Workload]:
        """``smaller(v)`` in place of request ``index``, the pool less the peak pages it frees,
        both counted from the workload as it is now."""
        began, limits = self.current.requests[index], self.current.limits

        def made(value: int) -> Workload:
            request = smaller(value)
            freed = peak_pages(began, limits.page_size) - peak_pages(request, limits.page_size)
            requests = list(self.current.requests)
            requests[index] = request
            pool = replace(limits, pool_pages=max(1, limits.pool_pages - freed))
            return replace(self.current, requests=tuple(requests), limits=pool)

        return made


def _floored(request: Request) -> Request:
    """Every number of ``request`` at its floor."""
    return _unshared(replace(request, output_tokens=1, prompt_tokens=0, arrival=0, priority=0))


def _unshared(request: Request) -> Request:
    return replace(request, prefix_group="", prefix_tokens=0)


def _prompt(request: Request, tokens: int) -> Request:
    """``request`` with a prompt of ``tokens``: a shared prefix is part of the prompt (1.1), so
    a whole-prompt prefix shrinks with it."""
    return replace(request, prompt_tokens=tokens, prefix_tokens=min(request.prefix_tokens, tokens))


_Shape = tuple[Limits, tuple[Request, ...]]


def _shape(workload: Workload) -> _Shape:
    """A workload but its requests' ids (every other field of a request kept): two candidates
    of one shape run alike on a target that does not read ids."""
    return workload.limits, tuple(replace(r, id="") for r in workload.requests)


def _size(workload: Workload) -> tuple[int, int, int, int, int]:
    """Order on workloads: fewer requests, fewer tokens, earlier arrivals, smaller limits, then
    fewer and shorter shared prefixes and priorities nearer 0."""
    requests = workload.requests
    limits: Limits = workload.limits
    return (
        len(requests),
        sum(r.output_tokens + r.prompt_tokens for r in requests),
        sum(r.arrival for r in requests),
        limits.batch_limit + limits.pool_pages + limits.page_size,
        sum(bool(r.prefix_group) + r.prefix_tokens + abs(r.priority) for r in requests),
    )


def _valid(workload: Workload) -> bool:
    try:
        parse_workload(workload_to_json(workload))
    except WorkloadError:
        return False
    return True


def _renamed(workload: Workload, still_fails: Callable[[Workload], bool]) -> Workload:
    """Ids a, b, c ... in declared order, as the lesson names requests, if it still fails so."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    if len(workload.requests) > len(letters):
        return workload
    renamed = tuple(replace(r, id=letters[i]) for i, r in enumerate(workload.requests))
    candidate = replace(workload, requests=renamed)
    try:
        if candidate == workload or not still_fails(candidate):
            return workload
    except Spent:
        return workload
    return candidate
