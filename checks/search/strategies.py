"""Hypothesis strategies for workloads and limits that reach the corners of spec/semantics.md.

Uniformly random workloads almost never hit the cases where schedulers break: two requests that
arrive together, a prompt that ends exactly on a page boundary, a pool with not one page to spare.
So every size here is drawn from a mix of a corner value and a general range, and Hypothesis's own
bias towards boundary values does the rest. ``tests/quality/test_strategies.py`` counts how often
each corner comes up, so a change that stops reaching one fails a test.

Corners reached (spec section in brackets):

- arrivals in bursts (several at one time, more than the batch holds) and after gaps (the engine
  idles between busy periods), with declared order differing from arrival order [3.1];
- zero-length prompts, prompts that exactly fill their pages, one-token outputs [2, 3.3];
- page size 1 and batch limit 1 [1];
- a pool exactly as large as the largest request's peak pages, too small for two requests at
  their peaks, and pools that runs fill exactly [3.2, PAGE-5];
- shared prefixes (swarm feature ``shared_prefixes``): a few groups whose members share a prefix
  of a whole number of pages, the whole prompt, or any length, so that a prefix cache shares
  full pages, hits a partial last page and meets a group member whose prompt is all prefix
  [1.1, PAGE-6];
- the corners real engines broke at (:mod:`.corners`): priorities with inversions, prompts at
  and beside page multiples, whole-prompt prefix hits, pools within a page of a request's peak
  (swarm features ``priorities``, ``page_boundaries``, ``full_hits``, ``near_pool``), and
  ``long_runs`` of outputs from half the profile's longest up.

A pool too small for even one request is an invalid workload (section 1, rejected by
``parse_workload``), not a scheduling corner, so the tightest pool drawn is the largest request's
peak. Every workload drawn is one ``parse_workload`` accepts.

By default sizes stay small (at most 6 requests of at most 6 output tokens), so that one example
takes milliseconds and shrinks to something a learner can read. Bugs that need a crowd (a leak
only once 5 requests are active, a hang only once more than 5 wait) need larger workloads:
:func:`search_workloads` draws workloads sized by the Hypothesis profile
(:data:`SEARCH_SIZES`: in ``ci``, up to 64 requests, batch limits up to 32, pages up to 32 tokens
and outputs up to 64, within a budget of about 300 iterations and 3,000 request-iterations per
run, so that 100 examples stay a matter of seconds), drawn with swarm testing: each example
first switches :data:`FEATURES` on or off, so that some examples pile every kind of pressure
together. Every feature shrinks to off, and the size to the small corners.
"""

from __future__ import annotations

from itertools import accumulate

from hypothesis import strategies as st

from kvsched.checks.search.corners import boundary_prompts, full_hits, priorities, shared_prefixes
from kvsched.spec.vocabulary import Profile
from kvsched.spec.workload import Limits, Request, Workload, peak_pages

REQUEST_IDS = "abcdefghijklmnopqrstuvwxyz"
"""Request ids in declared order, as the lesson names its requests; then ``aa``, ``ab``, ..."""

FEATURES = (
    "bursts",
    "tight_pool",
    "long_prompts",
    "many_requests",
    "long_outputs",
    "shared_prefixes",
    "priorities",
    "page_boundaries",
    "full_hits",
    "near_pool",
    "long_runs",
)
"""What swarm testing switches on or off per example (:func:`workloads` with ``swarm``)."""

SEARCH_SIZES: dict[Profile, dict[str, int]] = {
    "ci": {
        "max_requests": 64,
        "max_batch_limit": 32,
        "max_page_size": 32,
        "max_output": 64,
        "max_iterations": 300,
    },
    "dev": {
        "max_requests": 128,
        "max_batch_limit": 64,
        "max_page_size": 32,
        "max_output": 128,
        "max_iterations": 1000,
    },
    "thorough": {
        "max_requests": 256,
        "max_batch_limit": 128,
        "max_page_size": 64,
        "max_output": 256,
        "max_iterations": 3000,
    },
}
"""Largest workload :func:`search_workloads` draws under each profile."""


LONG_RUN_REQUESTS = 4
"""The most requests the ``long_runs`` feature draws."""

WORK_PER_ITERATION_BUDGET = 10
"""Requests per iteration, on average, that the iteration budget pays for: iterations times
requests stays within this many times ``max_iterations``."""


def request_id(position: int) -> str:
    """The id of the request at ``position`` in declared order: a..z, then aa..zz, ..."""
    letters = ""
    position += 1
    while position:
        position, digit = divmod(position - 1, len(REQUEST_IDS))
        letters = REQUEST_IDS[digit] + letters
    return letters


MAX_PAGE_SIZE = 6
MAX_BATCH_LIMIT = 4


def page_sizes(max_page_size: int = MAX_PAGE_SIZE) -> st.SearchStrategy[int]:
    """Token slots per page; 1 (every token its own page) is the shrink target.

    Above the small default range, small sizes stay as likely as large ones, so the corners
    (page size 1) are still reached when the range grows.
    """
    return _small_or_any(1, MAX_PAGE_SIZE, max_page_size)


def batch_limits(max_batch_limit: int = MAX_BATCH_LIMIT) -> st.SearchStrategy[int]:
    """Decode slots; 1 (one request at a time) is the shrink target."""
    return _small_or_any(1, MAX_BATCH_LIMIT, max_batch_limit)


def _small_or_any(low: int, small: int, high: int) -> st.SearchStrategy[int]:
    if high <= small:
        return st.integers(low, high)
    return st.one_of(st.integers(low, small), st.integers(low, high))


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


def _within(
    shapes: list[tuple[int, int, int]], batch_limit: int, max_iterations: int
) -> list[tuple[int, int, int]]:
    """The first shapes whose serial length, last arrival plus decode work, fits the budget."""
    clock = tokens = 0
    for count, (gap, _, output) in enumerate(shapes):
        clock += gap
        tokens += output
        length = clock + -(-tokens // batch_limit)
        # A learner's state lists every request, so a run costs iterations x requests.
        if count and (
            length > max_iterations
            or length * (count + 1) > WORK_PER_ITERATION_BUDGET * max_iterations
        ):
            return shapes[:count]
    return shapes


def search_workloads(profile: Profile) -> st.SearchStrategy[Workload]:
    """The workloads a search draws under ``profile``: the corners, and swarm-tested crowds.

    One strategy, not a choice between a small and a large one: Hypothesis's targeting (the
    search aims at crowded runs) climbs from the examples it has, and would stay on the small
    side of such a choice.
    """
    return workloads(**SEARCH_SIZES[profile], swarm=True)


@st.composite
def workloads(
    draw: st.DrawFn,
    max_requests: int = 6,
    max_output: int = 6,
    max_gap: int = 10,
    max_page_size: int = MAX_PAGE_SIZE,
    max_batch_limit: int = MAX_BATCH_LIMIT,
    swarm: bool = False,
    max_iterations: int | None = None,
) -> Workload:
    """Valid workloads that reach the corners listed in the module docstring.

    With ``swarm``, each example first draws which :data:`FEATURES` it turns on. Shrinks towards
    every feature off and one request arriving at 0 with an empty prompt and one output token, in
    pages of one token, one decode slot, and a pool exactly as large as the largest request.
    ``max_iterations`` keeps the last arrivals only while a run stays about that short: a
    crowd in one decode slot would otherwise cost thousands of iterations per example.
    """
    if max_requests < 1:
        raise ValueError(f"max_requests must be at least 1, got {max_requests}")
    on = {f for f in FEATURES if draw(st.booleans())} if swarm else set()
    page_size = draw(page_sizes(max_page_size))
    batch_limit = draw(batch_limits(max_batch_limit))
    gaps = st.one_of(st.just(0), st.integers(0, 1)) if "bursts" in on else arrival_gaps(max_gap)
    prompt_pages = 16 if "long_prompts" in on else 3
    prompts = (
        boundary_prompts(page_size, prompt_pages)
        if "page_boundaries" in on
        else prompt_tokens(page_size, prompt_pages * page_size)
    )
    outputs = output_tokens(max_output if "long_outputs" in on else min(max_output, 6))
    most, fewest = max_requests, 1
    if "many_requests" in on:
        fewest = max(1, max_requests // 2)
    elif "long_runs" in on:  # long by its outputs: a few requests keep its iterations cheap
        most = min(most, LONG_RUN_REQUESTS)
        outputs = st.integers(max(1, max_output // 2), max_output)
    shapes = draw(st.lists(st.tuples(gaps, prompts, outputs), min_size=fewest, max_size=most))
    if max_iterations is not None:
        shapes = _within(shapes, batch_limit, max_iterations)
    arrivals: list[int] = []
    clock = 0
    for gap, _, _ in shapes:
        clock += gap
        arrivals.append(clock)
    # Shapes come in arrival order; the declared order is a permutation of it, so the tie rule of
    # 3.1 ("by arrival, ties in declared order") is exercised, not implied by construction.
    declared = draw(st.permutations(range(len(shapes))))
    requests = tuple(
        Request(request_id(position), arrivals[index], shapes[index][1], shapes[index][2])
        for position, index in enumerate(declared)
    )
    if "shared_prefixes" in on:
        requests = draw(shared_prefixes(requests, page_size))
    if "full_hits" in on:
        requests = draw(full_hits(requests, page_size, prompt_pages))
    if "priorities" in on:
        requests = draw(priorities(requests))
    peaks = [peak_pages(r, page_size) for r in requests]
    largest, total = max(peaks), sum(peaks)
    # What the first k arrivals commit if admitted together (3.2); shapes are in arrival order,
    # and requests[p] is shape declared[p].
    by_shape = sorted(range(len(requests)), key=declared.__getitem__)
    first_k = list(accumulate(peak_pages(requests[p], page_size) for p in by_shape))
    # The tightest valid pool is the largest request's peak (section 1); a pool of exactly what the
    # first arrivals commit is filled to the last page; above the sum of all peaks it never binds.
    tight = [
        st.just(largest),
        st.sampled_from(first_k).map(lambda pages: max(pages, largest)),
    ]
    roomy = (
        [] if "tight_pool" in on else [st.integers(largest, total), st.integers(total, total + 3)]
    )
    if "near_pool" in on:
        tight, roomy = [st.sampled_from((largest, largest + 1))], []
    pool_pages = draw(st.one_of(*tight, *roomy))
    return Workload(
        name="hypothesis",
        limits=Limits(batch_limit=batch_limit, page_size=page_size, pool_pages=pool_pages),
        requests=requests,
    )
