"""The corners where real engines' schedulers broke, drawn and recognised.

Drawn, as swarm features of :func:`.strategies.workloads` (each shrinks to off):

- ``shared_prefixes``: a few prefix groups (section 1.1), sharing whole pages, whole prompts or
  any length;
- ``priorities``: request priorities (section 1.1), half the time inverted, every later arrival
  more urgent than each earlier one, so a low-priority request runs ahead of a high one and
  becomes the victim of a priority preemption after it was scheduled (vLLM's priority
  preemption bugs);
- ``page_boundaries``: prompts at, one below and one above a page multiple, where a table
  grows a page or does not;
- ``full_hits``: members of one prefix group whose whole prompt, an exact page multiple, is the
  prefix, so a later member finds every page in the cache (vLLM recomputes the last token);
- ``near_pool``: a pool within a page of the largest request's peak.

A prefix that ends inside a page (what a group's members share, drawn by ``shared_prefixes``)
is counted too: an engine that matches it to the token may hand out the page it ends in.

Recognised in a run (:func:`run_corners`), for Hypothesis's statistics (``event``) and its
targeting (``target``, :mod:`.explore`): preemptions, full prefix hits, hits on freed pages
(which an engine that provisions after deciding may evict first), admissions that leave no page
free, long runs; and the drawn shapes themselves (:func:`drawn_corners`), block tables of
:data:`LONG_CONTEXT_PAGES` pages and more and whole-pool prompts among them, so a test reads
from the statistics of a real search that the ci profile reaches each one.

:data:`BOUNDARY_SHAPES` are the known shapes as explicit examples, run first by every search.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise

from hypothesis import event, target
from hypothesis import strategies as st

from kvsched.reference.engine import Run
from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import (
    Limits,
    Request,
    Workload,
    arrival_indices,
    pages_for,
    peak_pages,
)

HIT_GROUP = "hit"
"""The prefix group of the ``full_hits`` feature's members."""

LONG_RUN = 100
"""Iterations from which a run counts as long (the ci budget is about 300)."""

LONG_CONTEXT_PAGES = 256
"""Pages from which a block table counts as long, and the fewest of each table of a far
workload (``strategies.far_workloads``): 256 pages (4,096 tokens of 16) is where a fixed-size
table or an 8-bit page count stops."""

WHOLE_POOL = 0.9
"""The share of a long pool from which a prompt counts as the whole pool."""


PREFIX_GROUPS = ("sys", "doc", "chat")
"""Names of the prefix groups a swarm example may draw: a few, so that groups have members."""


@st.composite
def shared_prefixes(
    draw: st.DrawFn, requests: tuple[Request, ...], page_size: int
) -> tuple[Request, ...]:
    """``requests`` with some placed in prefix groups (section 1.1 of spec/semantics.md).

    A member's prefix is whole pages of its prompt (what a prefix cache over full pages shares),
    its whole prompt, or any length up to it; a group's members share the shortest of their
    prefixes. Shrinks towards no request in a group.
    """
    # Strategies made once, not per request: building one costs more than drawing from it.
    groups = st.sampled_from(PREFIX_GROUPS[: draw(st.integers(1, len(PREFIX_GROUPS)))])
    placed = []
    for request in requests:
        if not draw(st.booleans()):
            placed.append(request)
            continue
        group, prompt = draw(groups), request.prompt_tokens
        kind = draw(_PREFIX_KINDS)
        if kind == "pages":
            length = draw(st.integers(0, prompt // page_size)) * page_size
        else:
            length = prompt if kind == "whole" else draw(st.integers(0, prompt))
        placed.append(replace(request, prefix_group=group, prefix_tokens=length))
    return tuple(placed)


_PREFIX_KINDS = st.sampled_from(("pages", "whole", "any"))


def boundary_prompts(page_size: int, max_pages: int) -> st.SearchStrategy[int]:
    """Prompt lengths at, one below or one above a multiple of the page size."""
    return st.builds(
        lambda pages, offset: max(0, pages * page_size + offset),
        st.integers(1, max_pages),
        st.sampled_from((0, -1, 1)),
    )


@st.composite
def priorities(
    draw: st.DrawFn, requests: tuple[Request, ...], small: int, far: int
) -> tuple[Request, ...]:
    """``requests`` with priorities: inverted (later arrivals more urgent), or any of 0..small,
    or of -far..far (the far ends, where a priority stored in fewer bits, or taken for a rank
    or an index, breaks). Shrinks towards 0."""
    if draw(st.booleans()):
        count = len(requests)
        rank = {index: count - order for order, index in enumerate(arrival_indices(requests))}
        return tuple(replace(r, priority=rank[i]) for i, r in enumerate(requests))
    values = st.one_of(st.integers(0, small), st.integers(-far, far))
    return tuple(replace(r, priority=draw(values)) for r in requests)


@st.composite
def full_hits(
    draw: st.DrawFn, requests: tuple[Request, ...], page_size: int, pages: st.SearchStrategy[int]
) -> tuple[Request, ...]:
    """``requests`` with some made members of :data:`HIT_GROUP`: one prompt of whole pages,
    ``pages`` of them, all of it the shared prefix. Shrinks towards the first two requests and
    the fewest pages."""
    prompt = draw(pages) * page_size
    members = draw(st.sets(st.integers(0, len(requests) - 1), min_size=min(2, len(requests))))
    return tuple(
        replace(r, prompt_tokens=prompt, prefix_group=HIT_GROUP, prefix_tokens=prompt)
        if i in members
        else r
        for i, r in enumerate(requests)
    )


def drawn_corners(workload: Workload) -> list[str]:
    """The corners of a workload's shape, by name, as the search's statistics count them."""
    requests, size = workload.requests, workload.limits.page_size
    corners = []
    ordered = [requests[i] for i in arrival_indices(requests)]
    if any(
        earlier.arrival < later.arrival and earlier.priority > later.priority
        for n, earlier in enumerate(ordered)
        for later in ordered[n + 1 :]
    ):
        corners.append("priority inversion")
    remainders = {r.prompt_tokens % size for r in requests if r.prompt_tokens}
    if size >= 2:
        corners += [name for rest, name in _REMAINDERS if rest % size in remainders]
    whole = Counter(
        r.prefix_group
        for r in requests
        if r.prefix_group
        and r.prompt_tokens
        and r.prefix_tokens == r.prompt_tokens
        and r.prompt_tokens % size == 0
    )
    if any(count >= 2 for count in whole.values()):
        corners.append("whole-prompt prefix hit shape")
    inside = Counter(r.prefix_group for r in requests if r.prefix_group and r.prefix_tokens % size)
    if any(count >= 2 for count in inside.values()):
        corners.append("a prefix ending inside a page")
    peaks = [peak_pages(r, size) for r in requests]
    pool = workload.limits.pool_pages
    if len(requests) >= 2 and max(peaks) >= pool - 1:
        corners.append("a request within a page of the pool")
    if max(peaks) >= LONG_CONTEXT_PAGES:
        corners.append(f"a block table of {LONG_CONTEXT_PAGES}+ pages")
        if any(pages_for(r.prompt_tokens, size) >= WHOLE_POOL * pool for r in requests):
            corners.append("a prompt of the whole of a long pool")
    if max(Counter(r.arrival for r in requests).values()) > workload.limits.batch_limit:
        corners.append("a burst larger than the batch")
    return corners


_REMAINDERS = ((0, "prompt at a page multiple"), (-1, "prompt one below"), (1, "prompt one above"))


def run_corners(workload: Workload, events: Sequence[IterationEvent], usable: int) -> Counter[str]:
    """How often a run reached each corner; ``usable`` is the pool less its reserved pages."""
    counts: Counter[str] = Counter()
    size = workload.limits.page_size
    before: tuple[str, ...] = ()
    last: IterationEvent | None = None
    priority = {r.id: r.priority for r in workload.requests if r.priority}
    for step in events:
        if priority:  # out of order somewhere exactly when out of order between neighbours
            ranks = [priority.get(rid, 0) for rid in step.active]
            if any(a > b for a, b in pairwise(ranks)):
                counts["a low-priority request running ahead of a high one"] += 1
        counts["preemption"] += len(step.preempted)
        # A victim admitted before a request that stays: under priority order, a low-priority
        # request that ran ahead of a more urgent one, as vLLM's victim-bookkeeping bugs need.
        stays = set(step.active)
        for victim in step.preempted:
            if victim in before and stays & set(before[before.index(victim) + 1 :]):
                counts["preemption of a request running ahead"] += 1
        before = step.active
        for rid, tokens in step.cached.items():
            prompt = workload.request(rid).prompt_tokens
            # A prompt of whole pages found in the cache but for the page a capped engine
            # recomputes, or wholly.
            if tokens and prompt % size == 0 and tokens >= prompt - size:
                counts["full prefix hit"] += 1
        if step.shared:  # pages taken back from the free queue, which a fresh page may evict
            held: set[int] = set()
            if last is not None:  # the tables that outlived the last iteration
                for rid, table in last.page_tables.items():
                    if rid not in last.freed:
                        held.update(table)
            if any(page not in held for pages in step.shared.values() for page in pages):
                counts["a hit on freed pages"] += 1
        last = step
        if step.admitted and step.pages_in_use >= usable:
            counts["admission leaving no page free"] += 1
    if len(events) >= LONG_RUN:
        counts["long run"] += 1
    return counts


def aim(result: Run, usable: int, corners: tuple[str, ...] | None) -> None:
    """Count the run's corners in Hypothesis's statistics and steer the search towards them:
    crowded runs, where size-dependent bugs live, and ``corners`` of :func:`run_corners`
    (:func:`targeted`); ``None`` steers nowhere (a search that does not climb). ``usable`` is
    the pool less the target's reserved pages."""
    workload, events = result.workload, result.events
    for corner in drawn_corners(workload):
        event(corner)
    if not events:
        return
    reached = run_corners(workload, events, usable)
    for corner, count in reached.items():
        if count:
            event(corner)
    if corners is None:
        return
    target(max(len(e.active) for e in events), label="active requests")
    for corner in corners:
        target(reached[corner], label=corner)


TARGETED = (
    "preemption",
    "preemption of a request running ahead",
    "full prefix hit",
    "admission leaving no page free",
)
"""The run corners the search climbs towards, each a count per run."""


def targeted(properties: TargetProperties | None) -> tuple[str, ...]:
    """The corners of :data:`TARGETED` the declared design may reach. A run of a design that
    declares no preemption or no prefix sharing reaches a preemption or a prefix hit only by
    breaking an invariant, which the monitor reports in that very run: climbing towards it
    finds nothing more, and each target costs the search its own hill climb (a learner's check
    spent most of its search there)."""
    declared = properties if properties is not None else TargetProperties()
    needs = {
        "preemption": declared.preemption,
        "preemption of a request running ahead": declared.preemption,
        "full prefix hit": declared.prefix_sharing,
    }
    return tuple(corner for corner in TARGETED if needs.get(corner, True))


def _shape(name: str, limits: Limits, *requests: Request) -> Workload:
    return Workload(name, limits, requests, description=f"boundary shape: {name}")


BOUNDARY_SHAPES: tuple[Workload, ...] = (
    # b's prompt, two whole pages, is a's and wholly cached by the time b arrives.
    _shape(
        "full hit on a page multiple",
        Limits(2, 4, 8),
        Request("a", 0, 8, 2, HIT_GROUP, 8),
        Request("b", 3, 8, 2, HIT_GROUP, 8),
    ),
    # c, the least urgent, arrives first and runs ahead of a and b; when their prompts fill the
    # pool, the victim is c, already scheduled in that schedule(), its tokens back in the budget.
    _shape(
        "priority victim scheduled ahead",
        Limits(3, 3, 7),
        Request("a", 2, 6, 3, priority=1),
        Request("b", 2, 9, 2, priority=1),
        Request("c", 1, 9, 2, priority=2),
    ),
    # Two requests that outgrow the pool together: b is preempted and comes back to its own
    # freed, cached pages, which must count against the pages free.
    _shape(
        "revived pages at zero free",
        Limits(2, 2, 4),
        Request("a", 0, 2, 3),
        Request("b", 0, 4, 3),
    ),
    # a's prefix ends inside its second page, which a still holds when b, of the same group,
    # comes: b may take a's first page from the cache, never the one its prefix ends in.
    _shape(
        "prefix ending inside a page",
        Limits(2, 4, 8),
        Request("a", 0, 8, 4, "g", 6),
        Request("b", 1, 12, 2, "g", 6),
    ),
    # d's prefix pages are freed and cached between the pool's untouched pages and e's. a,
    # admitted first in the next step, takes fresh pages up to the second of them: b's hit on
    # both, weighed when the batch is decided, must still hold when b gets its pages, or b
    # computes what a budget of 8 (which a and b fill) counted as cached.
    _shape(
        "hit at the front of the free queue",
        Limits(2, 2, 7),
        Request("d", 0, 4, 1, "g", 4),
        Request("e", 0, 4, 1),
        Request("a", 1, 7, 1),
        Request("b", 1, 5, 1, "g", 4),
    ),
)
"""Known boundary shapes, each a workload on which a reported engine bug shows."""
