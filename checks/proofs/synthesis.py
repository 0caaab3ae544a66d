"""Workload synthesis: answer a question about the two policies with a workload, or a proof.

Each question is a claim about runs of the reference schedulers. The tool that answers it fastest
does the search (spec/proofs.md, section 5 has the measurements):

- ``p95-inversion``, "a workload where continuous batching has a higher P95 wait than static":
  none exists in this model, and Z3 proves it (:mod:`.compare`: continuous batching admits
  every request no later), so no search is run;
- ``iteration-gap``, "the N-request workload that maximizes static minus continuous iterations":
  Hypothesis with ``target()``, which climbs to a large gap in seconds; it is the best found, not
  a proved maximum;
- ``continuous-loses``, "where continuous batching loses": it holds more KV pages at its peak,
  since it keeps every slot busy; Hypothesis with ``target()`` maximizes the difference;
- ``reuse``, "a workload whose pages fit only if freed pages are reused the next iteration": an
  exact constraint over the unrolled model, solved by Z3 (or by Hypothesis, for comparison).

Every workload found is replayed with :mod:`kvsched.reference` and its claim checked on those
events before it is returned: the searches can err, the reference decides.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from hypothesis import HealthCheck, Phase, assume, given, seed, settings, target
from hypothesis import strategies as st

from kvsched.checks.proofs.bmc import Bounds
from kvsched.checks.proofs.budgets import DEFAULT
from kvsched.checks.proofs.query import PROVED
from kvsched.checks.proofs.searches import find_reuse, no_p95_inversion
from kvsched.reference import POLICIES, RunMetrics, compute_metrics, run
from kvsched.spec.events import IterationEvent
from kvsched.spec.workload import (
    Limits,
    Request,
    Workload,
    parse_workload,
    peak_pages,
    workload_to_json,
)


@dataclass(frozen=True)
class SearchSpace:
    """The workloads a question ranges over; ``pool_pages`` None lets the search pick it."""

    requests: int = 9
    batch_limit: int = 3
    page_size: int = 16
    pool_pages: int | None = None
    max_prompt: int = 64
    max_output: int = 40
    max_arrival: int = 40


@dataclass(frozen=True)
class Answer:
    """A question's answer: a verified workload, or a proof that none exists, or nothing."""

    question: str
    claim: str
    method: str
    seconds: float
    workload: Workload | None
    metrics: tuple[tuple[str, RunMetrics], ...] = ()
    """(policy, metrics) for both policies, from the reference replay of ``workload``."""
    verdict: str = ""
    """What was established, in words, for the report."""


def reference_metrics(workload: Workload) -> dict[str, RunMetrics]:
    return {p: compute_metrics(workload, run(workload, s, p).events) for p, s in POLICIES.items()}


def iteration_gap(workload: Workload) -> int:
    m = reference_metrics(workload)
    return m["static"].iterations - m["continuous"].iterations


def extra_peak_pages(workload: Workload) -> int:
    m = reference_metrics(workload)
    return m["continuous"].peak_pages - m["static"].peak_pages


@dataclass(frozen=True)
class Reuse:
    """Iteration ``iteration`` takes ``taken`` new pages; before the previous iteration freed
    ``freed`` pages only ``free_before`` were free, so without reusing freed pages at once
    (PAGE-3) the allocation would not fit."""

    iteration: int
    taken: int
    freed: int
    free_before: int

    @property
    def shortfall(self) -> int:
        return self.taken - self.free_before


def reuses(events: Sequence[IterationEvent]) -> list[Reuse]:
    """Every iteration that follows frees, tightest first (largest shortfall)."""
    found = []
    for before, now in itertools.pairwise(events):
        freed = sum(len(pages) for pages in before.freed.values())
        if freed:
            taken = sum(len(pages) for pages in now.allocated.values())
            found.append(Reuse(now.iteration, taken, freed, before.free_pages - freed))
    return sorted(found, key=lambda r: (-r.shortfall, r.iteration))


def reuse_shortfall(workload: Workload) -> int:
    """The largest shortfall of :func:`reuses` under continuous batching (> 0: reuse needed)."""
    found = reuses(run(workload, POLICIES["continuous"], "continuous").events)
    return found[0].shortfall if found else -workload.limits.pool_pages


@st.composite
def candidates(draw: st.DrawFn, space: SearchSpace) -> Workload:
    ids = _ids(space.requests)
    requests = tuple(
        Request(
            ids[i],
            draw(st.integers(0, space.max_arrival)),
            draw(st.integers(0, space.max_prompt)),
            draw(st.integers(1, space.max_output)),
        )
        for i in range(space.requests)
    )
    peaks = [peak_pages(r, space.page_size) for r in requests]
    pool = space.pool_pages or draw(st.integers(max(peaks), sum(peaks)))
    assume(max(peaks) <= pool)  # section 1: every request must fit the pool at its peak
    return Workload("synth", Limits(space.batch_limit, space.page_size, pool), requests)


def maximize(
    space: SearchSpace,
    objective: Callable[[Workload], int],
    examples: int,
    seed_value: int = 0,
    enough: int | None = None,
) -> tuple[int, Workload | None]:
    """Hypothesis with ``target()``: the highest objective met within ``examples`` workloads,
    or the first to reach ``enough``."""
    best: list[tuple[int, Workload]] = []

    @seed(seed_value)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=(Phase.generate, Phase.target),
        suppress_health_check=list(HealthCheck),
    )
    @given(candidates(space))
    def search(workload: Workload) -> None:
        score = objective(workload)
        target(score)
        if not best or score > best[0][0]:
            best[:] = [(score, workload)]
        if enough is not None and score >= enough:
            raise _Enough  # Hypothesis stops at a failing example; shrinking is off

    with contextlib.suppress(_Enough):
        search()
    return (best[0][0], best[0][1]) if best else (0, None)


class _Enough(Exception):
    """Stops a search early: the objective reached what the question asks for."""


def answer_iteration_gap(space: SearchSpace, examples: int, seed_value: int = 0) -> Answer:
    started = time.perf_counter()
    gap, workload = maximize(space, iteration_gap, examples, seed_value)
    return _verified(
        "iteration-gap",
        f"the {space.requests}-request workload with the largest static - continuous iterations",
        f"Hypothesis target(), best of {examples} examples (not a proved maximum)",
        time.perf_counter() - started,
        _named(workload, "iteration-gap"),
        lambda m, w: m["static"].iterations - m["continuous"].iterations == gap and gap > 0,
        f"static batching takes {gap} more iterations",
    )


def answer_continuous_loses(space: SearchSpace, examples: int, seed_value: int = 0) -> Answer:
    started = time.perf_counter()
    extra, workload = maximize(space, extra_peak_pages, examples, seed_value)
    return _verified(
        "continuous-loses",
        "a workload where continuous batching needs more KV pages at its peak than static",
        f"Hypothesis target(), best of {examples} examples (not a proved maximum)",
        time.perf_counter() - started,
        _named(workload, "continuous-loses"),
        lambda m, w: m["continuous"].peak_pages - m["static"].peak_pages == extra and extra > 0,
        f"continuous batching holds {extra} more KV pages at its peak; its waits are still no "
        "longer (proved: p95-inversion)",
    )


def answer_reuse_by_hypothesis(space: SearchSpace, examples: int, seed_value: int = 0) -> Answer:
    started = time.perf_counter()
    shortfall, workload = maximize(space, reuse_shortfall, examples, seed_value, enough=1)
    return _reuse_answer(
        f"Hypothesis target(), first hit within {examples} examples",
        time.perf_counter() - started,
        workload if shortfall > 0 else None,
    )


def answer_reuse_by_z3(space: SearchSpace, rlimit: int = DEFAULT.bmc) -> Answer:
    """``rlimit``: Z3 resource units for the whole search."""
    bounds = Bounds(space.requests, space.max_arrival, space.max_output, space.max_prompt)
    found, workload = find_reuse(
        space.requests, space.batch_limit, space.page_size, space.pool_pages, bounds, rlimit
    )
    method = "Z3, exact constraint over the model unrolled iteration by iteration"
    if workload is not None:
        return _reuse_answer(method, found.seconds, workload)
    if found.verdict == PROVED:
        verdict = f"none exists within {bounds.steps} iterations of these bounds (proved by Z3)"
    else:
        verdict = f"none found: Z3 did not decide ({found.reason})"
    return Answer("reuse", REUSE_CLAIM, method, found.seconds, None, verdict=verdict)


def answer_p95_inversion(requests: int, rlimit: int = DEFAULT.induction) -> Answer:
    """``rlimit``: Z3 resource units per query of the dominance proof."""
    proof = no_p95_inversion(requests, rlimit)
    if proof.verdict == PROVED:
        verdict = (
            f"none exists: for every workload of {requests} requests (any arrivals, lengths, "
            "limits and page size) continuous batching admits every request no later than static "
            "batching, so no request waits longer and no percentile of wait is higher"
        )
    else:
        verdict = f"not proved ({proof.reason}); raise --rlimit-scale or lower the requests"
    method = f"Z3 induction over both schedulers side by side ({requests} requests)"
    claim = "a workload where continuous batching has a higher P95 wait than static batching"
    return Answer("p95-inversion", claim, method, proof.seconds, None, verdict=verdict)


REUSE_CLAIM = "a workload whose pages fit only if freed pages are reused the next iteration"


def _reuse_answer(method: str, seconds: float, workload: Workload | None) -> Answer:
    verdict = "none found"
    if workload is not None and reuse_shortfall(workload) > 0:
        r = reuses(run(workload, POLICIES["continuous"], "continuous").events)[0]
        verdict = (
            f"under continuous batching iteration {r.iteration} takes {r.taken} new pages; only "
            f"{r.free_before} were free before iteration {r.iteration - 1} freed {r.freed}"
        )
    return _verified(
        "reuse",
        REUSE_CLAIM,
        method,
        seconds,
        _named(workload, "reuse"),
        lambda m, w: reuse_shortfall(w) > 0,
        verdict,
    )


def _verified(
    question: str,
    claim: str,
    method: str,
    seconds: float,
    workload: Workload | None,
    holds: Callable[[dict[str, RunMetrics], Workload], bool],
    verdict: str,
) -> Answer:
    if workload is None:
        return Answer(question, claim, method, seconds, None, verdict="none found")
    parse_workload(workload_to_json(workload))  # the file written must load: section 1 holds
    metrics = reference_metrics(workload)
    if not holds(metrics, workload):
        # A search answer the reference does not confirm is a bug of ours, never an answer.
        raise RuntimeError(f"{question}: the synthesized workload fails its claim: {workload}")
    figures = tuple(sorted(metrics.items()))
    return Answer(question, claim, method, seconds, workload, figures, verdict)


def _named(workload: Workload | None, name: str) -> Workload | None:
    if workload is None:
        return None
    return replace(workload, name=name, description=f"synthesized by kvsched synth {name}")


def _ids(count: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return list(letters[:count]) if count <= len(letters) else [f"r{i}" for i in range(count)]
