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
  ``long_runs`` of outputs from half the profile's longest up;
- the far end of every axis: priorities of either sign up to the contract's bound, and far
  workloads (:func:`far_workloads`): block tables of hundreds to thousands of pages, prompts of
  a whole pool, in shared prefixes and whole-prompt hits as long, arriving after idle gaps of
  up to half the iteration budget [1, 1.1, 3.1].

A pool too small for even one request is an invalid workload (section 1, rejected by
``parse_workload``), not a scheduling corner, so the tightest pool drawn is the largest request's
peak. Every workload drawn is one ``parse_workload`` accepts.

Every range is written down once, in :data:`AXES`: one axis per field of a request and of the
limits, each with its small range and its far end under each profile. By default sizes stay in
the small ranges (at most 6 requests of at most 6 output tokens), so that one example takes
milliseconds and shrinks to something a learner can read. Bugs that need a crowd (a leak only
once 5 requests are active, a hang only once more than 5 wait) need larger workloads:
:func:`search_workloads` draws workloads sized by the Hypothesis profile (:data:`SEARCH_SIZES`:
in ``ci``, up to 64 requests, batch limits up to 32, pages up to 32 tokens and outputs up to 64,
within a budget of about 300 iterations and 3,000 request-iterations per run, so that 100
examples stay a matter of seconds), drawn with swarm testing: each example first switches
:data:`FEATURES` on or off, so that some examples pile every kind of pressure together. Every
feature shrinks to off, and the size to the small corners. Bugs that need a long context (a
block table wrong past 256 pages) need far workloads, one example in :data:`FAR_SHARE` of a
search (:mod:`.explore`); they shrink to the fewest pages that still fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate

from hypothesis import strategies as st

from kvsched.checks.search.corners import (
    LONG_CONTEXT_PAGES,
    PREFIX_GROUPS,
    boundary_prompts,
    full_hits,
    priorities,
    shared_prefixes,
)
from kvsched.spec.request_fields import MAX_PRIORITY
from kvsched.spec.vocabulary import PROFILE_NAMES, Profile
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


@dataclass(frozen=True)
class Axis:
    """One field of a workload (spec/workload.py: :class:`Request`, :class:`Limits`) as the search
    draws it: every example may draw from ``low`` to ``small``, where Hypothesis shrinks to and
    bugs are read most easily, and a share of examples reach ``far``, the far end each profile
    draws by design, within what the contract allows (spec/bounds.py) and the profile's budget
    pays for."""

    unit: str
    """What the numbers count, where it is not the field's own value."""
    low: int
    small: int
    far: tuple[int, ...]
    """The far end under each of :data:`PROFILE_NAMES`, in its order: ci, dev, thorough."""

    def far_end(self, profile: Profile) -> int:
        return self.far[PROFILE_NAMES.index(profile)]


ITERATIONS = (300, 1000, 3000)
"""The iterations a run of a search may last under each profile, about (:func:`_within`)."""

AXES: dict[str, Axis] = {
    # Request
    "id": Axis(
        "requests: ids are positions in declared order, a..z, aa, ...", 1, 6, (64, 128, 256)
    ),
    "arrival": Axis(
        "iterations, as gaps between arrivals: the far end one idle gap of half the budget",
        0,
        10,
        tuple(iterations // 2 for iterations in ITERATIONS),
    ),
    "prompt_tokens": Axis(
        "pages of the drawn page size; the far end is a whole pool", 0, 3, (2048, 4096, 8192)
    ),
    "output_tokens": Axis("tokens", 1, 6, (64, 128, 256)),
    "prefix_group": Axis(
        "groups of shared prefixes, the whole-prompt hits' among them",
        0,
        1,
        (len(PREFIX_GROUPS) + 1,) * 3,
    ),
    "prefix_tokens": Axis("pages, at most the member's prompt", 0, 3, (2048, 4096, 8192)),
    "priority": Axis("either sign: the far end is the contract's bound", 0, 3, (MAX_PRIORITY,) * 3),
    # Limits
    "batch_limit": Axis("decode slots", 1, 4, (32, 64, 128)),
    "page_size": Axis("tokens per page", 1, 6, (32, 32, 64)),
    "pool_pages": Axis("pages; the far end holds whole-pool prompts", 1, 12, (2048, 4096, 8192)),
}
"""The axes of a workload: one per field of :class:`Request` and :class:`Limits`, each written
down here once; the strategies below and :data:`SEARCH_SIZES` take their ranges from it, and
tests/cover/test_axes.py fails on a field without one."""

SEARCH_SIZES: dict[Profile, dict[str, int]] = {
    profile: {
        "max_requests": AXES["id"].far_end(profile),
        "max_batch_limit": AXES["batch_limit"].far_end(profile),
        "max_page_size": AXES["page_size"].far_end(profile),
        "max_output": AXES["output_tokens"].far_end(profile),
        "max_iterations": ITERATIONS[PROFILE_NAMES.index(profile)],
        "far_gap": AXES["arrival"].far_end(profile),
        "max_priority": AXES["priority"].far_end(profile),
    }
    for profile in PROFILE_NAMES
}
"""Largest workload :func:`search_workloads` draws under each profile, from :data:`AXES`."""


LONG_RUN_REQUESTS = 4
"""The most requests the ``long_runs`` feature draws."""

LONG_CONTEXT_REQUESTS = 3
"""The most requests of a far workload (:func:`far_workloads`): its block tables run to
thousands of pages, which every iteration lists (and a hosted target sends), so a few keep it
cheap."""

FAR_SHARE = 10
"""One example in this many of a search is a far workload (:func:`far_workloads`), drawn on its
own (:mod:`.explore`), so that the share does not depend on how Hypothesis's generation and
targeting happen to spread their examples: inside one strategy, a switch on for one draw in four
gave 1 to 19 far workloads in 100 examples, by the seed."""

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


MAX_PAGE_SIZE = AXES["page_size"].small
MAX_BATCH_LIMIT = AXES["batch_limit"].small

BUILT = 1024
"""Strategies kept per builder below, by their parameters: a draw builds its strategies from
what it drew before (the page size, the features), and a strategy built anew is validated anew
by Hypothesis on its first draw. The same strategy draws the same values from the same choices,
so keeping them changes nothing drawn; the bound keeps a long session's memory in check."""


@lru_cache(maxsize=BUILT)
def page_sizes(max_page_size: int = MAX_PAGE_SIZE) -> st.SearchStrategy[int]:
    """Token slots per page; 1 (every token its own page) is the shrink target.

    Above the small default range, small sizes stay as likely as large ones, so the corners
    (page size 1) are still reached when the range grows.
    """
    return _small_or_any(1, MAX_PAGE_SIZE, max_page_size)


@lru_cache(maxsize=BUILT)
def batch_limits(max_batch_limit: int = MAX_BATCH_LIMIT) -> st.SearchStrategy[int]:
    """Decode slots; 1 (one request at a time) is the shrink target."""
    return _small_or_any(1, MAX_BATCH_LIMIT, max_batch_limit)


@lru_cache(maxsize=BUILT)
def _small_or_any(low: int, small: int, high: int) -> st.SearchStrategy[int]:
    if high <= small:
        return st.integers(low, high)
    return st.one_of(st.integers(low, small), st.integers(low, high))


@lru_cache(maxsize=BUILT)
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


@lru_cache(maxsize=BUILT)
def output_tokens(max_output: int = AXES["output_tokens"].small) -> st.SearchStrategy[int]:
    """Output lengths: one token (done in its admission iteration), or up to ``max_output``."""
    return st.one_of(st.just(1), st.integers(1, max_output))


@lru_cache(maxsize=BUILT)
def arrival_gaps(max_gap: int = AXES["arrival"].small) -> st.SearchStrategy[int]:
    """Time between consecutive arrivals: 0 (a burst), short, or long enough to drain the engine."""
    short = min(3, max_gap)
    return st.one_of(st.just(0), st.integers(0, short), st.integers(short, max_gap))


def limits(max_pool_pages: int = AXES["pool_pages"].small) -> st.SearchStrategy[Limits]:
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


def far_workloads(profile: Profile) -> st.SearchStrategy[Workload]:
    """The workloads at the far end of the context axes under ``profile``: block tables of
    hundreds to thousands of pages (:data:`AXES` ``pool_pages``), prompts up to the whole pool,
    in swarm-tested shapes otherwise, which shrink as :func:`workloads` does."""
    far = AXES["pool_pages"].far_end(profile)
    return workloads(**SEARCH_SIZES[profile], swarm=True, far_pool_pages=far)


@st.composite
def workloads(
    draw: st.DrawFn,
    max_requests: int = AXES["id"].small,
    max_output: int = AXES["output_tokens"].small,
    max_gap: int = AXES["arrival"].small,
    max_page_size: int = MAX_PAGE_SIZE,
    max_batch_limit: int = MAX_BATCH_LIMIT,
    swarm: bool = False,
    max_iterations: int | None = None,
    far_gap: int = 0,
    far_pool_pages: int = 0,
    max_priority: int = AXES["priority"].small,
) -> Workload:
    """Valid workloads that reach the corners listed in the module docstring.

    With ``swarm``, each example first draws which :data:`FEATURES` it turns on. Shrinks towards
    every feature off and one request arriving at 0 with an empty prompt and one output token, in
    pages of one token, one decode slot, and a pool exactly as large as the largest request. With
    ``far_pool_pages``, a far workload: a few requests whose block tables run from
    :data:`LONG_CONTEXT_PAGES` pages to that many, prompts up to the whole pool; it shrinks the
    same way but for its one request's table, of :data:`LONG_CONTEXT_PAGES` pages.
    ``max_iterations`` keeps the last arrivals only while a run stays about that short: a
    crowd in one decode slot would otherwise cost thousands of iterations per example.
    ``far_gap``: a far workload draws idle gaps up to it.
    ``max_priority``: priorities run from -max_priority to max_priority besides the small ones.
    """
    if max_requests < 1:
        raise ValueError(f"max_requests must be at least 1, got {max_requests}")
    # A far workload's span comes first: Hypothesis's first examples draw their first choice at
    # random and simplify the rest, and a search gives its far workloads only a few examples.
    span = draw(context_pages(far_pool_pages)) if far_pool_pages else 0
    on = {f for f in FEATURES if draw(st.booleans())} if swarm else set()
    page_size = draw(page_sizes(max_page_size))
    batch_limit = draw(batch_limits(max_batch_limit))
    gaps = BURST_GAPS if "bursts" in on else arrival_gaps(max_gap)
    prompt_pages = LONG_PROMPT_PAGES if "long_prompts" in on else AXES["prompt_tokens"].small
    prompts = (
        _boundary_prompts(page_size, prompt_pages)
        if "page_boundaries" in on
        else prompt_tokens(page_size, prompt_pages * page_size)
    )
    small_outputs = output_tokens(min(max_output, AXES["output_tokens"].small))
    outputs = output_tokens(max_output) if "long_outputs" in on else small_outputs
    most, fewest = max_requests, 1
    if span:  # long by its contexts: a few requests of a few outputs each
        prompts, outputs = long_prompts(page_size, span), small_outputs
        most = min(most, LONG_CONTEXT_REQUESTS)
        if far_gap > max_gap:  # few enough for idle gaps, arrivals late in the budget
            gaps = _either(gaps, st.integers(max_gap, far_gap))
    elif "many_requests" in on:
        fewest = max(1, max_requests // 2)
    elif "long_runs" in on:  # long by its outputs: a few requests keep its iterations cheap
        most = min(most, LONG_RUN_REQUESTS)
        outputs = st.integers(max(1, max_output // 2), max_output)
    shapes = draw(_shapes(gaps, prompts, outputs, fewest, most))
    if span:  # a prompt of the whole pool leaves room for its outputs: its peak is the pool
        shapes = [(gap, min(p, span * page_size - out), out) for gap, p, out in shapes]
    if max_iterations is not None:
        shapes = _within(shapes, batch_limit, max_iterations)
    arrivals: list[int] = []
    clock = 0
    for gap, _, _ in shapes:
        clock += gap
        arrivals.append(clock)
    # Shapes come in arrival order; the declared order is a permutation of it, so the tie rule of
    # 3.1 ("by arrival, ties in declared order") is exercised, not implied by construction.
    declared = draw(_orders(len(shapes)))
    requests = tuple(
        Request(request_id(position), arrivals[index], shapes[index][1], shapes[index][2])
        for position, index in enumerate(declared)
    )
    if "shared_prefixes" in on:
        requests = draw(shared_prefixes(requests, page_size))
    if "full_hits" in on:
        hits = context_pages(span) if span else st.integers(1, prompt_pages)
        requests = draw(full_hits(requests, page_size, hits))
    if "priorities" in on:
        requests = draw(priorities(requests, AXES["priority"].small, max_priority))
    peaks = [peak_pages(r, page_size) for r in requests]
    largest, total = max(peaks), sum(peaks)
    # What the first k arrivals commit if admitted together (3.2); shapes are in arrival order,
    # and requests[p] is shape declared[p].
    by_shape = sorted(range(len(requests)), key=declared.__getitem__)
    first_k = list(accumulate(peak_pages(requests[p], page_size) for p in by_shape))
    if span:  # long contexts together would make pools of thousands of pages more
        first_k, total = [min(pages, span) for pages in first_k], max(largest, min(total, span))
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


_boundary_prompts = lru_cache(maxsize=BUILT)(boundary_prompts)

BURST_GAPS = st.one_of(st.just(0), st.integers(0, 1))
"""Gaps between arrivals under the ``bursts`` feature: together, or one iteration apart."""


@lru_cache(maxsize=BUILT)
def _either(
    first: st.SearchStrategy[int], second: st.SearchStrategy[int]
) -> st.SearchStrategy[int]:
    return st.one_of(first, second)


@lru_cache(maxsize=BUILT)
def _shapes(
    gaps: st.SearchStrategy[int],
    prompts: st.SearchStrategy[int],
    outputs: st.SearchStrategy[int],
    fewest: int,
    most: int,
) -> st.SearchStrategy[list[tuple[int, int, int]]]:
    """The requests' shapes in arrival order: (gap, prompt tokens, output tokens) each."""
    return st.lists(st.tuples(gaps, prompts, outputs), min_size=fewest, max_size=most)


@lru_cache(maxsize=BUILT)
def _orders(count: int) -> st.SearchStrategy[list[int]]:
    """The declared order of ``count`` requests, as a permutation of their arrival order."""
    return st.permutations(range(count))


LONG_PROMPT_PAGES = 16
"""The most pages of a prompt under the ``long_prompts`` feature: past the small range, short
of the far end, where a handful of requests still crowd a pool."""


def _powers_of_two(low: int, high: int) -> list[int]:
    """The powers of two from ``low`` to ``high``: where a fixed-size table or a bit field of
    pages ends."""
    return [
        1 << bits
        for bits in range(low.bit_length() - 1, high.bit_length())
        if low <= 1 << bits <= high
    ]


@lru_cache(maxsize=BUILT)
def context_pages(far: int) -> st.SearchStrategy[int]:
    """The pages a far workload's block tables may reach: from :data:`LONG_CONTEXT_PAGES` to
    ``far``, anything, at or one past a power of two, or ``far`` itself, a third of the draws
    each: Hypothesis draws a wide range mostly near its low end, which alone would leave the far
    end to chance. Shrinks to the fewest."""
    edges = [n for p in _powers_of_two(LONG_CONTEXT_PAGES, far) for n in (p, p + 1) if n <= far]
    return st.one_of(st.integers(LONG_CONTEXT_PAGES, far), st.sampled_from(edges), st.just(far))


@lru_cache(maxsize=BUILT)
def long_prompts(page_size: int, span: int) -> st.SearchStrategy[int]:
    """Prompts of a far workload, each a block table of at least
    :data:`LONG_CONTEXT_PAGES` pages: the whole of ``span`` pages (trimmed to leave room for the
    outputs), a token beside a power of two of pages, or any length between."""
    shortest = (LONG_CONTEXT_PAGES - 1) * page_size + 1
    edges = [
        pages * page_size + offset
        for pages in _powers_of_two(LONG_CONTEXT_PAGES, span)
        for offset in (0, 1)
        if pages * page_size + offset <= span * page_size
    ]
    return st.one_of(
        st.just(span * page_size), st.sampled_from(edges), st.integers(shortest, span * page_size)
    )
