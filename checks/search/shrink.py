"""Shrinking a failing fixed workload to the smallest one that still breaks the same invariant.

Hypothesis shrinks the workloads it generates; a violation found on the teaching trace or on a
user's ``--workload`` needs the same service, or a learner is handed nine requests and a hundred
iterations to read. This is a greedy delta-debugger over the workload's own structure: drop
requests (in halves, quarters, ... then one by one), then lower every number (output and prompt
lengths, arrival times, the limits) and drop what a request carries beyond its sizes (its prefix
group, its priority), keep any change after which ``still_fails`` holds, and
repeat until a pass changes nothing. Every candidate is validated by
:func:`~kvsched.spec.workload.parse_workload`, so the result is a workload file
``kvsched check --workload`` accepts, and since runs are deterministic it fails the same way there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import watch_run
from kvsched.reference.engine import run
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.workload import (
    Limits,
    Request,
    Workload,
    WorkloadError,
    parse_workload,
    workload_to_json,
)

DEFAULT_BUDGET = 400
"""Most candidate runs one shrink may spend; each is one engine run plus the monitor."""


def shrink_workload(
    workload: Workload, still_fails: Callable[[Workload], bool], budget: int = DEFAULT_BUDGET
) -> Workload:
    """The smallest workload found from ``workload`` on which ``still_fails`` holds."""
    current = workload
    runs = 0
    progress = True
    while progress and runs < budget:
        progress = False
        for candidate in _candidates(current):
            if runs >= budget:
                break
            if not _valid(candidate) or _size(candidate) >= _size(current):
                continue
            runs += 1
            if still_fails(candidate):
                current = candidate
                progress = True
                break  # restart from the smaller workload: earlier passes may apply again
    return _renamed(current, still_fails)


def smallest_failing(
    workload: Workload,
    invariant: str,
    factory: SchedulerFactory,
    policy: str,
    properties: TargetProperties | None = None,
) -> tuple[Workload, Finding] | None:
    """The smallest workload found from ``workload`` on which ``factory``'s scheduler still
    breaks ``invariant``, with the finding there; None if ``workload`` itself no longer does (a
    target that answers the same workload differently)."""
    last: list[Finding] = []

    def still_fails(candidate: Workload) -> bool:
        if properties is not None and properties.unservable(candidate.requests, candidate.limits):
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


def _candidates(workload: Workload) -> Iterator[Workload]:
    requests = workload.requests
    # Halves, then quarters, ... of the requests first: a file of a hundred requests shrinks in
    # a few dozen runs, not one run per request (delta debugging).
    chunk = len(requests) // 2
    while chunk >= 2:
        for start in range(0, len(requests), chunk):
            kept = requests[:start] + requests[start + chunk :]
            if kept:
                yield replace(workload, requests=kept)
        chunk //= 2
    if len(requests) > 1:
        for index in reversed(range(len(requests))):
            yield replace(workload, requests=requests[:index] + requests[index + 1 :])
    earliest = min(r.arrival for r in requests)
    if earliest > 0:
        shifted = tuple(replace(r, arrival=r.arrival - earliest) for r in requests)
        yield replace(workload, requests=shifted)
    for index, request in enumerate(requests):
        for changed in _smaller_requests(request):
            yield replace(workload, requests=(*requests[:index], changed, *requests[index + 1 :]))
    limits = workload.limits
    for field in ("batch_limit", "pool_pages", "page_size"):
        for value in _smaller(getattr(limits, field), 1):
            yield replace(workload, limits=replace(limits, **{field: value}))


def _smaller_requests(request: Request) -> Iterator[Request]:
    for value in _smaller(request.output_tokens, 1):
        yield replace(request, output_tokens=value)
    for value in _smaller(request.prompt_tokens, 0):
        # A shared prefix is part of the prompt (1.1): a whole-prompt prefix shrinks with it.
        yield replace(request, prompt_tokens=value, prefix_tokens=min(request.prefix_tokens, value))
    for value in _smaller(request.arrival, 0):
        yield replace(request, arrival=value)
    if request.prefix_group:
        yield replace(request, prefix_group="", prefix_tokens=0)
        for value in _smaller(request.prefix_tokens, 0):
            yield replace(request, prefix_tokens=value)
    if request.priority:  # towards 0, boldest first: 0, half way, one nearer
        nearer = request.priority - (1 if request.priority > 0 else -1)
        for value in sorted({0, int(request.priority / 2), nearer}, key=abs):
            yield replace(request, priority=value)


def _smaller(value: int, floor: int) -> list[int]:
    """Values below ``value`` to try, boldest first: the floor, the halfway point, one less."""
    options = [floor, floor + (value - floor) // 2, value - 1]
    return sorted({v for v in options if floor <= v < value})


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
    if candidate == workload or not still_fails(candidate):
        return workload
    return candidate
