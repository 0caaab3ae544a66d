"""The workload strategies: always valid, reaching every corner they promise
(checks/search/strategies.py).

The corner test counts, over the first examples a derandomized run draws, how many reach each
corner; several are judged on the reference run of the workload (an idle gap, a pool filled to the
last page), since that is where a corner matters. A strategy change that stops reaching a corner
often enough fails it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import providers

from kvsched.checks.search.strategies import (
    SEARCH_SIZES,
    limits,
    request_id,
    search_workloads,
    workloads,
)
from kvsched.reference import POLICIES, run
from kvsched.spec.events import IterationEvent
from kvsched.spec.workload import Limits, Request, Workload, parse_workload, peak_pages
from kvsched.spec.workload import workload_to_json as to_json

SAMPLE = 200
"""Examples drawn for the corner counts."""
AT_LEAST = 10
"""Every corner must come up in at least this many of them (1 in 20)."""


@given(workloads())
def test_every_workload_is_one_the_loader_accepts(workload: Workload) -> None:
    assert parse_workload(to_json(workload)) == workload
    largest = max(peak_pages(r, workload.limits.page_size) for r in workload.requests)
    assert largest <= workload.limits.pool_pages  # section 1: every request fits the pool


@given(workloads(max_requests=2, max_output=2, max_gap=1, max_page_size=2, max_batch_limit=1))
def test_the_size_bounds_hold(workload: Workload) -> None:
    assert 1 <= len(workload.requests) <= 2
    assert all(r.output_tokens <= 2 for r in workload.requests)
    assert max(r.arrival for r in workload.requests) <= len(workload.requests)  # gaps <= 1
    assert workload.limits.page_size <= 2 and workload.limits.batch_limit == 1


@given(limits())
def test_limits_are_valid(drawn: Limits) -> None:
    assert min(drawn.batch_limit, drawn.page_size, drawn.pool_pages) >= 1


def test_no_requests_is_refused() -> None:
    with pytest.raises(ValueError, match="max_requests"):
        find(workloads(max_requests=0), lambda _: True)


def test_request_ids_go_on_past_z() -> None:
    ids = [request_id(i) for i in range(800)]
    assert ids[:3] == ["a", "b", "c"] and ids[25:28] == ["z", "aa", "ab"] and ids[702] == "aaa"
    assert len(set(ids)) == len(ids)


def test_shrinks_to_the_simplest_workload() -> None:
    simplest = find(workloads(), lambda _: True, settings=settings(database=None))
    assert simplest.limits == Limits(batch_limit=1, page_size=1, pool_pages=1)
    assert simplest.requests == (Request("a", 0, 0, 1),)


def _events(workload: Workload) -> tuple[IterationEvent, ...]:
    return run(workload, POLICIES["continuous"]).events


def _gap(workload: Workload) -> bool:
    """The engine idles between two busy iterations: a later arrival finds it drained."""
    busy = [e.iteration for e in _events(workload) if e.active]
    return any(not e.active for e in _events(workload) if busy[0] < e.iteration < busy[-1])


def _arrivals(workload: Workload) -> Counter[int]:
    return Counter(r.arrival for r in workload.requests)


CORNERS: dict[str, Callable[[Workload], bool]] = {
    "two requests arrive together": lambda w: max(_arrivals(w).values()) >= 2,
    "a burst larger than the batch": lambda w: max(_arrivals(w).values()) > w.limits.batch_limit,
    "a gap with nothing active": _gap,
    "declared order is not arrival order": lambda w: (
        [r.arrival for r in w.requests] != sorted(r.arrival for r in w.requests)
    ),
    "a zero-length prompt": lambda w: any(r.prompt_tokens == 0 for r in w.requests),
    "a prompt exactly filling pages of 2+ tokens": lambda w: (
        w.limits.page_size >= 2
        and any(r.prompt_tokens and r.prompt_tokens % w.limits.page_size == 0 for r in w.requests)
    ),
    "a one-token output": lambda w: any(r.output_tokens == 1 for r in w.requests),
    "page size 1": lambda w: w.limits.page_size == 1,
    "batch limit 1": lambda w: w.limits.batch_limit == 1,
    "a pool exactly the largest request's peak, 2+ requests": lambda w: (
        len(w.requests) >= 2
        and w.limits.pool_pages == max(peak_pages(r, w.limits.page_size) for r in w.requests)
    ),
    "a pool filled to its last page by 2+ requests": lambda w: any(
        e.pages_in_use == w.limits.pool_pages and len(e.page_tables) >= 2 for e in _events(w)
    ),
    "a batch of 2+ committing exactly the whole pool": lambda w: any(
        len(e.active) >= 2
        and sum(peak_pages(w.request(r), w.limits.page_size) for r in e.active)
        == w.limits.pool_pages
        for e in _events(w)
    ),
    "a request held back by pages, not slots": lambda w: any(
        e.waiting and len(e.active) < w.limits.batch_limit for e in _events(w)
    ),
}


def _shared_full_page(workload: Workload) -> bool:
    """Two members of one group share at least one full page of their prompts."""
    shared: dict[str, list[int]] = {}
    for r in workload.requests:
        if r.prefix_group:
            shared.setdefault(r.prefix_group, []).append(r.prefix_tokens)
    return any(
        len(lengths) >= 2 and min(lengths) >= workload.limits.page_size
        for lengths in shared.values()
    )


SEARCH_CORNERS: dict[str, Callable[[Workload], bool]] = {
    "two members of a prefix group share a full page": _shared_full_page,
    "a group member whose whole prompt is its prefix": lambda w: any(
        r.prefix_group and r.prompt_tokens and r.prefix_tokens == r.prompt_tokens
        for r in w.requests
    ),
}
"""Corners only the search's swarm features reach."""


def _sample(count: int, strategy: st.SearchStrategy[Workload] | None = None) -> list[Workload]:
    """``count`` workloads, the same in every process: derandomized, and drawn without the
    constants Hypothesis collects from the local modules loaded so far (tests included), which
    would make the sample depend on what an xdist worker ran before (a count of 18 crowded runs
    in a process of its own was 9 in a CI worker)."""
    drawn: list[Workload] = []

    @settings(max_examples=count, derandomize=True, database=None, phases=[Phase.generate])
    @given(workloads() if strategy is None else strategy)
    def collect(workload: Workload) -> None:
        drawn.append(workload)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(providers, "_get_local_constants", providers.Constants)
        providers.CONSTANTS_CACHE.cache.clear()
        try:
            collect()
        finally:
            providers.CONSTANTS_CACHE.cache.clear()
    return drawn


@pytest.mark.parametrize("search", [False, True], ids=["small", "ci search"])
def test_every_corner_is_reached_often(search: bool) -> None:
    sample = _sample(SAMPLE, search_workloads("ci") if search else None)
    assert len(sample) == SAMPLE
    corners = CORNERS | SEARCH_CORNERS if search else CORNERS
    reached = {name: sum(1 for w in sample if corner(w)) for name, corner in corners.items()}
    rare = {name: count for name, count in reached.items() if count < AT_LEAST}
    assert not rare, f"corners reached in fewer than {AT_LEAST} of {SAMPLE} examples: {rare}"


def test_the_ci_search_reaches_realistic_sizes() -> None:
    sample = _sample(SAMPLE, search_workloads("ci"))
    assert SEARCH_SIZES["ci"]["max_batch_limit"] >= 32 and SEARCH_SIZES["ci"]["max_output"] >= 64
    # The ranges reach the sizes above; a 200-example sample comes close to each bound.
    assert max(w.limits.batch_limit for w in sample) >= 24
    assert max(len(w.requests) for w in sample) >= 48
    assert max(w.limits.page_size for w in sample) >= 24
    assert max(r.output_tokens for w in sample for r in w.requests) >= 48
    # swarm testing: crowds (5+ active at once) and long queues (6+ waiting) both come up
    runs = [_events(w) for w in sample]
    crowds = sum(1 for events in runs if max(len(e.active) for e in events) >= 5)
    queues = sum(1 for events in runs if max(len(e.waiting) for e in events) > 5)
    assert min(crowds, queues) >= AT_LEAST, (crowds, queues)


def test_larger_profiles_search_larger_workloads() -> None:
    ci, dev, thorough = (SEARCH_SIZES[p] for p in ("ci", "dev", "thorough"))
    for key in ci:
        assert ci[key] <= dev[key] <= thorough[key], key
    assert ci != thorough


def test_corners_combine() -> None:
    # A burst beyond the batch onto a pool with no page to spare, prompts on page boundaries.
    def combined(workload: Workload) -> bool:
        return (
            CORNERS["a burst larger than the batch"](workload)
            and CORNERS["a pool exactly the largest request's peak, 2+ requests"](workload)
            and CORNERS["a prompt exactly filling pages of 2+ tokens"](workload)
        )

    found = find(workloads(), combined, settings=settings(database=None, derandomize=True))
    assert combined(found)
    assert len(found.requests) == 2  # shrunk: a burst of two into a batch of one
