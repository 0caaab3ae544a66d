"""Seeded families of randomized workloads, for benchmarks and scale tests (spec/semantics.md, 1).

A family fixes the shape of a workload: how requests arrive, how long their prompts and outputs
are, and how large the page pool is next to them. :func:`generate` draws ``size`` requests of a
family from a seed. It is a pure function of ``(family, size, seed)``: the same arguments give the
same workload on every run, machine and Python version, because it draws only
``random.Random.random()`` (whose sequence Python guarantees not to change) and turns the draws
into numbers with IEEE arithmetic, ``sqrt`` and ``floor`` (exactly rounded everywhere). The one
``exp`` per workload, for the Poisson threshold, could differ between C libraries in its last bit;
a draw would have to land within that bit to change anything.

The families, named ``ARRIVALS-LENGTHS-POOL``:

- arrivals ``poisson``: a Poisson process, counts per iteration drawn with Knuth's product method;
  ``bursty``: bursts of simultaneous arrivals (geometric sizes, mean 16) at a Poisson rate. Either
  way the offered load is ``load`` times what ``batch_limit`` slots decode at the family's mean
  output length.
- lengths ``short`` (prompts 1-64, outputs 1-32 tokens), ``long`` (prompts 128-1024, outputs
  100-300, mean about 200) and ``heavy`` (Pareto tails with index 2, capped at 4096 tokens);
  outside the grid of :data:`FAMILIES`, ``brief`` (prompts 1-32, outputs 1-4) is the long run's
  (:data:`LONG_RUN`), where many requests pass through the pool in few iterations.
- pool ``roomy``: every batch fits at its peak, the pool never binds; ``tight``: the pool holds
  the batch's mean peak pages for only half its slots (or the largest request, if more), so the
  peak-page commitment rule of section 3.2 decides admission.

Every request's peak pages fit the pool, so each workload is one the loader accepts (section 1).
Requests are declared in arrival order and named ``r0``, ``r1``, ...
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from kvsched.spec.workload import (
    Limits,
    Request,
    Workload,
    WorkloadError,
    load_workload,
    pages_for,
)

from .columns import Columns, NumberedIds, columns_of

_Made = TypeVar("_Made", Workload, Columns)

ARRIVALS = ("poisson", "bursty")
LENGTHS = ("short", "long", "heavy")
LENGTH_CLASSES = (*LENGTHS, "brief")
"""Every length class a family may have; the grid of :data:`FAMILIES` crosses the first three."""
POOLS = ("tight", "roomy")

MEAN_BURST = 16
"""Mean number of requests in one burst of the ``bursty`` arrivals."""
HEAVY_CAP = 4096
"""Longest heavy-tailed prompt or output, in tokens: a tail, but one that fits a pool."""
BRIEF_PROMPT, BRIEF_OUTPUT = (1, 32), (1, 4)
"""The ``brief`` class's prompt and output tokens, each drawn uniformly from its range."""
_MEAN_OUTPUT = {"short": 16.5, "long": 200.0, "heavy": 16.0, "brief": sum(BRIEF_OUTPUT) / 2}
"""Mean output tokens of each length class (heavy: about 2 x 8), for the arrival rate."""


@dataclass(frozen=True)
class Family:
    """The shape of a workload; :func:`generate` draws its requests."""

    name: str
    arrivals: str
    lengths: str
    pool: str
    batch_limit: int = 64
    page_size: int = 16
    load: float = 0.95
    """Offered load: arrivals per iteration over the rate the batch slots can decode."""
    prefix_groups: int = 0
    """With ``k > 0``, each request joins one of ``k`` prefix groups (section 1.1), drawn from
    its own stream so the arrivals and lengths stay those of the family without groups."""


def _family(arrivals: str, lengths: str, pool: str, **limits: int) -> Family:
    return Family(f"{arrivals}-{lengths}-{pool}", arrivals, lengths, pool, **limits)


FAMILIES: dict[str, Family] = {
    f.name: f for f in (_family(a, n, p) for a in ARRIVALS for n in LENGTHS for p in POOLS)
}
"""All twelve combinations, batch limit 64, pages of 16 tokens."""

SCALE = Family("scale", "poisson", "long", "roomy", batch_limit=256)
"""The large-replay shape: batch limit 256, mean output about 200 tokens."""

SHARED_PREFIX = Family("shared-prefix", "bursty", "long", "tight", batch_limit=16, prefix_groups=4)
"""Prefix caching's shape: long prompts in four groups that share a system prompt."""

NAMED = {f.name: f for f in (SCALE, SHARED_PREFIX)}


CHECK_FAMILIES = (
    Family("check-bursty-short-tight", "bursty", "short", "tight", batch_limit=64),
    Family("check-poisson-heavy-tight", "poisson", "heavy", "tight", batch_limit=256),
)
"""Realistic sizes every ``kvsched check`` of a scheduler class replays through the monitor,
whatever the Hypothesis profile: 1,000 requests each (:data:`CHECK_SIZE`), batches of 64 and
256, pools that bind."""
CHECK_SIZE = 1000


def check_source(size: int = CHECK_SIZE) -> str:
    """The families at ``size`` requests in words, as a check's evidence names them."""
    limits = " and ".join(str(f.batch_limit) for f in CHECK_FAMILIES)
    return f"{len(CHECK_FAMILIES)} seeded families of {size:,} requests (batch limits {limits})"


def check_workloads(size: int = CHECK_SIZE) -> tuple[Workload, ...]:
    """The workloads of :data:`CHECK_FAMILIES` at ``size`` requests, seed 0."""
    return tuple(generate(family, size, 0) for family in CHECK_FAMILIES)


LONG_RUN = Family("check-long-run", "poisson", "brief", "tight", batch_limit=64)
"""The long run every ``kvsched check`` of a scheduler class replays: requests of a few pages and
a few tokens arriving at 95% of what 64 slots serve, through a pool that holds half of them. Ten
thousand finish in about 800 iterations, each page passing through hundreds of tables: a leak,
a counter or a free list that goes wrong only after thousands of requests shows in it."""


def long_run_source(size: int) -> str:
    """:func:`long_run` in words, as a check's evidence names it."""
    return f"a long run of {size:,} requests"


_BRIEF_TOKENS = sum(BRIEF_PROMPT) / 2 + _MEAN_OUTPUT["brief"]
"""Mean tokens a ``brief`` request computes: its prompt and its output."""


def long_run(size: int, token_budget: int | None = None) -> Workload:
    """``size`` requests of :data:`LONG_RUN`, seed 0. A design that declares a token budget too
    small to serve the slots' rate gets arrivals at 95% of what its budget serves instead: at
    the slots' rate its queue would grow by thousands, and each iteration cost with it (a
    budget of 8 tokens took 48 s of CPU over 22,000 iterations)."""
    family = LONG_RUN
    if token_budget is not None:
        slots = LONG_RUN.batch_limit / _MEAN_OUTPUT[LONG_RUN.lengths]  # requests per iteration
        served = token_budget / _BRIEF_TOKENS
        if served < slots:
            family = replace(LONG_RUN, load=LONG_RUN.load * served / slots)
    return generate(family, size, 0)


LONG_CONTEXTS = "the long-context workload"
"""How a check's evidence names :func:`long_contexts`."""
LONG_CONTEXT_PAGES = 1024
"""The usable pool of :func:`long_contexts` a check replays: 16,384 tokens in pages of 16."""


def long_contexts(
    page_size: int = 16, usable_pages: int = LONG_CONTEXT_PAGES, reserved: int = 0
) -> Workload:
    """Contexts at the far end of what the pool allows, which the families (hundreds of tokens)
    never reach: a request whose peak fills the whole usable pool, block tables of hundreds of
    pages, one that crosses 256 pages while it decodes, and a short one beside them. Their peaks
    together exceed the pool, so the long ones wait for each other. ``reserved``: page ids the
    target keeps for itself, added to the pool."""
    pool_pages = usable_pages + reserved
    whole = usable_pages * page_size
    made = (
        Request("whole-pool", 0, whole - 1, 1),
        Request("long-a", 1, 300 * page_size + 7, 20),
        Request("past-256", 1, 256 * page_size - 2, 24),
        Request("short", 2, 10, 5),
        Request("long-b", 3, 500 * page_size - 3, 8),
    )
    return Workload(
        "long-contexts",
        Limits(batch_limit=4, page_size=page_size, pool_pages=pool_pages),
        made,
        description="contexts up to the whole pool: block tables of hundreds of pages",
    )


def family_named(name: str) -> Family:
    """The family called ``name`` (one of :data:`FAMILIES`, ``scale`` or ``shared-prefix``)."""
    if name in NAMED:
        return NAMED[name]
    try:
        return FAMILIES[name]
    except KeyError:
        known = ", ".join([*FAMILIES, *NAMED])
        raise ValueError(f"unknown workload family {name!r} (known: {known})") from None


def workload_from_spec(spec: str | Path) -> Workload:
    """A workload file, or ``family:NAME:SIZE[:SEED]`` (seed 0 by default) generated here."""
    text = str(spec)
    if not text.startswith("family:"):
        return load_workload(spec)
    return _from_family(text, generate)


def columns_from_spec(spec: str | Path) -> Columns:
    """What :func:`workload_from_spec` reads, as columns: a family's without a Request each."""
    text = str(spec)
    if not text.startswith("family:"):
        return columns_of(load_workload(spec))
    return _from_family(text, generate_columns)


def _from_family(text: str, make: Callable[[str, int, int], _Made]) -> _Made:
    parts = text.split(":")[1:]
    if len(parts) not in (2, 3):
        raise WorkloadError(f"{text}: write family:NAME:SIZE or family:NAME:SIZE:SEED")
    name, *numbers = parts
    bad = [n for n in numbers if not n.isdigit()]
    if bad:
        raise WorkloadError(f"{text}: '{bad[0]}' is not a non-negative integer (SIZE and SEED are)")
    size, seed = int(numbers[0]), int(numbers[1]) if len(numbers) == 2 else 0
    try:
        return make(name, size, seed)
    except ValueError as error:
        raise WorkloadError(f"{text}: {error}") from None


def generate(family: Family | str, size: int, seed: int) -> Workload:
    """``size`` requests of ``family`` drawn from ``seed``, with limits that fit them."""
    family = family_named(family) if isinstance(family, str) else family
    drawn = generate_columns(family, size, seed)
    requests = tuple(
        Request(*fields)
        for fields in zip(drawn.ids, drawn.arrival, drawn.prompt, drawn.output, strict=True)
    )
    if family.prefix_groups:
        requests = _with_prefixes(random.Random(f"{family.name}/{seed}/prefixes"), family, requests)
    return Workload(
        name=drawn.name,
        limits=drawn.limits,
        requests=requests,
        description=f"kvsched.reference.families.generate({family.name!r}, {size}, {seed})",
    )


def generate_columns(family: Family | str, size: int, seed: int) -> Columns:
    """The requests :func:`generate` draws, as columns, without a Request object each (its
    prefix groups left out: the reference policies do not read them)."""
    family = family_named(family) if isinstance(family, str) else family
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive int, got {size!r}")
    for kind, value, known in (
        ("arrivals", family.arrivals, ARRIVALS),
        ("lengths", family.lengths, LENGTH_CLASSES),
        ("pool", family.pool, POOLS),
    ):
        if value not in known:
            raise ValueError(
                f"family {family.name!r}: {kind} must be one of {known}, got {value!r}"
            )
    # Separate streams, so that changing how lengths are drawn leaves arrival times alone.
    arrival_rng = random.Random(f"{family.name}/{seed}/arrivals")
    length_rng = random.Random(f"{family.name}/{seed}/lengths")
    rate = family.load * family.batch_limit / _MEAN_OUTPUT[family.lengths]
    if family.arrivals == "poisson":
        arrivals = _poisson_arrivals(arrival_rng, rate, size)
    else:
        arrivals = _bursty_arrivals(arrival_rng, rate, size)
    prompts, outputs = array("q"), array("q")
    for _ in range(size):
        prompt, output = _lengths(length_rng, family.lengths)
        prompts.append(prompt)
        outputs.append(output)
    peaks = [pages_for(p + o, family.page_size) for p, o in zip(prompts, outputs, strict=True)]
    limits = Limits(
        batch_limit=family.batch_limit,
        page_size=family.page_size,
        pool_pages=_pool_pages(family, peaks),
    )
    name = f"{family.name}-n{size}-s{seed}"
    return Columns(name, limits, NumberedIds(size), arrivals, prompts, outputs, "linear")


def _with_prefixes(
    rng: random.Random, family: Family, requests: tuple[Request, ...]
) -> tuple[Request, ...]:
    """Each request joins a group and shares up to the group's prefix length of its prompt."""
    lengths = [_uniform(rng, 1, 8) * family.page_size for _ in range(family.prefix_groups)]
    grouped = []
    for request in requests:
        group = _uniform(rng, 0, family.prefix_groups - 1)
        shared = min(lengths[group], request.prompt_tokens)
        grouped.append(replace(request, prefix_group=f"g{group}", prefix_tokens=shared))
    return tuple(grouped)


def _uniform(rng: random.Random, low: int, high: int) -> int:
    """An integer in ``low..high``, each equally likely."""
    return min(high, low + math.floor(rng.random() * (high - low + 1)))


def _pareto(rng: random.Random, scale: int) -> int:
    """A Pareto draw with tail index 2 (finite mean, infinite variance), capped at HEAVY_CAP."""
    # Inverse CDF of P(X > x) = (scale / x)^2; 1 - random() lies in (0, 1], so no division by 0.
    return min(HEAVY_CAP, math.floor(scale / math.sqrt(1.0 - rng.random())))


def _lengths(rng: random.Random, lengths: str) -> tuple[int, int]:
    """(prompt_tokens, output_tokens) of one request."""
    if lengths == "short":
        return _uniform(rng, 1, 64), _uniform(rng, 1, 32)
    if lengths == "long":
        return _uniform(rng, 128, 1024), _uniform(rng, 100, 300)
    if lengths == "brief":
        return _uniform(rng, *BRIEF_PROMPT), _uniform(rng, *BRIEF_OUTPUT)
    return _pareto(rng, 16), _pareto(rng, 8)


def _poisson_count(rng: random.Random, threshold: float) -> int:
    """Knuth's method: multiply uniforms until the product drops to ``exp(-rate)``."""
    count, product = 0, rng.random()
    while product > threshold:
        count += 1
        product *= rng.random()
    return count


def _poisson_arrivals(rng: random.Random, rate: float, size: int) -> array[int]:
    """Arrival times of ``size`` requests from a Poisson process of ``rate`` per iteration."""
    threshold = math.exp(-rate)
    arrivals = array("q")
    time = 0
    while len(arrivals) < size:
        arrivals.extend([time] * _poisson_count(rng, threshold))
        time += 1
    return arrivals[:size]


def _bursty_arrivals(rng: random.Random, rate: float, size: int) -> array[int]:
    """Bursts at ``rate / MEAN_BURST`` per iteration, each of geometric size (mean MEAN_BURST)."""
    threshold = math.exp(-rate / MEAN_BURST)
    carry_on = 1 - 1 / MEAN_BURST
    arrivals = array("q")
    time = 0
    while len(arrivals) < size:
        for _ in range(_poisson_count(rng, threshold)):
            burst = 1
            while rng.random() < carry_on:
                burst += 1
            arrivals.extend([time] * burst)
        time += 1
    return arrivals[:size]


def _pool_pages(family: Family, peaks: list[int]) -> int:
    """Roomy: a full batch of the largest requests fits. Tight: half a batch of average ones."""
    largest = max(peaks)
    if family.pool == "roomy":
        return family.batch_limit * largest
    # Never below the largest request's peak: that workload would be invalid (section 1).
    return max(largest, sum(peaks) * family.batch_limit // (2 * len(peaks)))
