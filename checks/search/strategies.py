"""Hypothesis strategies for workloads and limits that reach the corners of spec/semantics.md.

Uniformly random workloads almost never hit the cases where schedulers break: two requests that
arrive together, a prompt that ends exactly on a page boundary, a pool with not one page to spare.
So every size here is drawn from a mix of a corner value and a general range, and Hypothesis's own
bias towards boundary values does the rest. ``tests/test_strategies.py`` counts how often each
corner comes up, so a change that stops reaching one fails a test.

Corners reached (spec section in brackets):

- arrivals in bursts (several at one time, more than the batch holds) and after gaps (the engine
  idles between busy periods), with declared order differing from arrival order [3.1];
- zero-length prompts, prompts that exactly fill their pages, one-token outputs [2, 3.3];
- page size 1 and batch limit 1 [1];
- a pool exactly as large as the largest request's peak pages, too small for two requests at
  their peaks, and pools that runs fill exactly [3.2, PAGE-5].

A pool too small for even one request is an invalid workload (section 1, rejected by
``parse_workload``), not a scheduling corner, so the tightest pool drawn is the largest request's
peak. Every workload drawn is one ``parse_workload`` accepts.

Sizes stay small (at most 6 requests of at most 6 output tokens by default) so that one example,
run through the engine and judged by the monitor, takes milliseconds and shrinks to something a
learner can read.
"""

from __future__ import annotations

from itertools import accumulate

from hypothesis import strategies as st

from kvsched.spec.workload import Limits, Request, Workload, peak_pages

REQUEST_IDS = "abcdefghijklmnopqrstuvwxyz"
"""Request ids in declared order, as the lesson names its requests."""

MAX_PAGE_SIZE = 6
MAX_BATCH_LIMIT = 4


def page_sizes(max_page_size: int = MAX_PAGE_SIZE) -> st.SearchStrategy[int]:
    """Token slots per page; 1 (every token its own page) is the shrink target."""
    return st.integers(1, max_page_size)


def batch_limits(max_batch_limit: int = MAX_BATCH_LIMIT) -> st.SearchStrategy[int]:
    """Decode slots; 1 (one request at a time) is the shrink target."""
    return st.integers(1, max_batch_limit)


def prompt_tokens(page_size: int, max_tokens: int) -> st.SearchStrategy[int]:
    """Prompt lengths up to ``max_tokens``: empty, exactly filling whole pages, or anything."""
    full_pages = max_tokens // page_size
    if full_pages == 0:
        return st.integers(0, max_tokens)
    return st.one_of(
        st.just(0),
        st.integers(1, full_pages).map(lambda pages: pages * page_size),
        st.integers(0, max_tokens),
    )


def output_tokens(max_output: int = 6) -> st.SearchStrategy[int]:
    """Output lengths: one token (done in its admission iteration), or up to ``max_output``."""
    return st.one_of(st.just(1), st.integers(1, max_output))


def arrival_gaps(max_gap: int = 10) -> st.SearchStrategy[int]:
    """Time between consecutive arrivals: 0 (a burst), short, or long enough to drain the engine."""
    short = min(3, max_gap)
    return st.one_of(st.just(0), st.integers(0, short), st.integers(short, max_gap))


def limits(max_pool_pages: int = 12) -> st.SearchStrategy[Limits]:
    """Limits on their own, for tests that bring their own requests (the stateful test does)."""
    return st.builds(
        Limits,
        batch_limit=batch_limits(),
        page_size=page_sizes(),
        pool_pages=st.integers(1, max_pool_pages),
    )


@st.composite
def workloads(
    draw: st.DrawFn,
    max_requests: int = 6,
    max_output: int = 6,
    max_gap: int = 10,
    max_page_size: int = MAX_PAGE_SIZE,
    max_batch_limit: int = MAX_BATCH_LIMIT,
) -> Workload:
    """Valid workloads that reach the corners listed in the module docstring.

    Shrinks towards one request arriving at 0 with an empty prompt and one output token, in
    pages of one token, one decode slot, and a pool exactly as large as the largest request.
    """
    if not 1 <= max_requests <= len(REQUEST_IDS):
        raise ValueError(f"max_requests must be within 1..{len(REQUEST_IDS)}, got {max_requests}")
    page_size = draw(page_sizes(max_page_size))
    batch_limit = draw(batch_limits(max_batch_limit))
    shapes = draw(
        st.lists(
            st.tuples(
                arrival_gaps(max_gap),
                prompt_tokens(page_size, 3 * page_size),
                output_tokens(max_output),
            ),
            min_size=1,
            max_size=max_requests,
        )
    )
    arrivals: list[int] = []
    clock = 0
    for gap, _, _ in shapes:
        clock += gap
        arrivals.append(clock)
    # Shapes come in arrival order; the declared order is a permutation of it, so the tie rule of
    # 3.1 ("by arrival, ties in declared order") is exercised, not implied by construction.
    declared = draw(st.permutations(range(len(shapes))))
    requests = tuple(
        Request(REQUEST_IDS[position], arrivals[index], shapes[index][1], shapes[index][2])
        for position, index in enumerate(declared)
    )
    peaks = [peak_pages(r, page_size) for r in requests]
    largest, total = max(peaks), sum(peaks)
    # What the first k arrivals commit if admitted together (3.2); shapes are in arrival order.
    first_k = list(accumulate(-(-(prompt + output) // page_size) for _, prompt, output in shapes))
    # The tightest valid pool is the largest request's peak (section 1); a pool of exactly what the
    # first arrivals commit is filled to the last page; above the sum of all peaks it never binds.
    pool_pages = draw(
        st.one_of(
            st.just(largest),
            st.sampled_from(first_k).map(lambda pages: max(pages, largest)),
            st.integers(largest, total),
            st.integers(total, total + 3),
        )
    )
    return Workload(
        name="hypothesis",
        limits=Limits(batch_limit=batch_limit, page_size=page_size, pool_pages=pool_pages),
        requests=requests,
    )
