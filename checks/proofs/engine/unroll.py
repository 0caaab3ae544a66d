"""Bounded model checking of the engine model over every workload within the bounds.

:func:`search` unrolls the transition from the initial state, one iteration at a time on one
incremental solver, and asks at each depth whether some workload within :class:`EngineBounds`
breaks a claim there: the shallowest violation comes first, and each depth's query stays small.
``unsat`` at every depth up to the horizon proves the claims for every workload within the
bounds, for the first ``horizon`` iterations; ``sat`` gives a workload and a design, which
:mod:`.replay` confirms on the reference scheduler and the monitor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.engine.claims import Claim
from kvsched.checks.proofs.engine.step import Binder, EngineIteration, transition
from kvsched.checks.proofs.engine.system import (
    EngineState,
    EngineSystem,
    fresh_state,
    initial_state,
    same,
    symbolic_system,
)
from kvsched.checks.proofs.query import EXHAUSTED, NOT_PROVED, PROVED, REFUTED, check, limit
from kvsched.reference.engine_scheduler import EngineConfig
from kvsched.spec.vocabulary import Batching
from kvsched.spec.workload import Limits, Request, Workload


@dataclass(frozen=True)
class EngineBounds:
    """The workloads a search ranges over. Batch limit, pool, token budget and watermark range
    over every value the loader and ``EngineConfig`` accept, unless pinned here."""

    requests: int = 2
    max_arrival: int = 2
    max_prompt: int = 6
    max_output: int = 3
    page_sizes: tuple[int, ...] = (1, 2, 3)
    horizon: int = 10
    watermark: int | None = None
    """Pin the watermark to this many pages; ``None``: any watermark >= 0."""
    admit_after_preemption: bool | None = False
    """Pin the design's ``admit_after_preemption``; ``None``: either."""

    def constrain(self, s: EngineSystem) -> list[Any]:
        facts = [s.watermark == self.watermark] if self.watermark is not None else []
        if self.admit_after_preemption is not None:
            facts.append(s.admit_after_preemption == z3.BoolVal(self.admit_after_preemption))
        for i in range(s.size):
            facts += [s.arrival[i] <= self.max_arrival, s.output[i] <= self.max_output]
            facts.append(s.prompt[i] <= self.max_prompt)
        return facts

    def words(self) -> str:
        return (
            f"{self.requests} requests, arrivals <= {self.max_arrival}, prompts <= "
            f"{self.max_prompt}, outputs <= {self.max_output}, page sizes "
            f"{'/'.join(map(str, self.page_sizes))}, "
            f"{design_words(self.watermark, self.admit_after_preemption)}, any batch limit, pool "
            f"and token budget; {self.horizon} iterations"
        )


def design_words(watermark: int | None, admit_after_preemption: bool | None) -> str:
    """The design choices a claim pins, in words (``None``: any)."""
    admits = {
        None: "admitting after a preemption or not",
        True: "admitting after a preemption",
        False: "admitting nobody after a preemption",
    }[admit_after_preemption]
    return ("any watermark" if watermark is None else f"watermark {watermark}") + ", " + admits


ClaimsAt = Callable[[EngineSystem, EngineState, EngineIteration, EngineState], list[Claim]]


@dataclass(frozen=True)
class Found:
    """A workload and design on which a claim fails, as Z3 chose them."""

    iteration: int
    claims: tuple[str, ...]
    """The claims that fail there."""
    workload: Workload
    config: EngineConfig


@dataclass(frozen=True)
class SearchAnswer:
    verdict: str
    """PROVED (no violation within the bounds), REFUTED (``found``), or NOT_PROVED."""
    seconds: float
    found: Found | None = None
    reason: str = ""
    units: int = 0
    """Z3 resource units the search's checks consumed."""


def search(
    batching: Batching, bounds: EngineBounds, claims_at: ClaimsAt, rlimit: int
) -> SearchAnswer:
    """Every page size of the bounds in turn; the first violation found ends the search.
    ``rlimit``, in Z3 resource units, is the budget of the whole search."""
    spent, used = 0.0, 0
    for page_size in bounds.page_sizes:
        answer = _search_one(batching, page_size, bounds, claims_at, rlimit - used)
        spent, used = spent + answer.seconds, used + answer.units
        if answer.verdict != PROVED:
            return SearchAnswer(answer.verdict, spent, answer.found, answer.reason, used)
    return SearchAnswer(PROVED, spent, units=used)


def _search_one(
    batching: Batching,
    page_size: int,
    bounds: EngineBounds,
    claims_at: ClaimsAt,
    rlimit: int,
) -> SearchAnswer:
    started, used = time.perf_counter(), 0
    s = symbolic_system(bounds.requests, page_size, batching)
    solver = z3.Solver()
    solver.add(*s.valid(), *bounds.constrain(s))
    state = initial_state(s)
    for k in range(1, bounds.horizon + 1):
        bind = Binder(f"k{k}_")
        it, after = transition(s, state, bind)
        fresh = fresh_state(s.size, f"k{k}")
        solver.add(*bind.facts, *same(fresh, after))
        claims = claims_at(s, state, it, fresh)
        if used >= rlimit:
            return SearchAnswer(NOT_PROVED, time.perf_counter() - started, None, EXHAUSTED, used)
        limit(solver, rlimit - used)
        solver.push()
        solver.add(z3.Or(*[z3.Not(c.term) for c in claims]))
        done = check(solver)
        used += done.units
        if done.result == z3.sat:
            model = solver.model()
            broken = tuple(c.name for c in claims if z3.is_false(model.eval(c.term, True)))
            found = Found(k, broken, *_chosen(model, s))
            return SearchAnswer(REFUTED, time.perf_counter() - started, found, units=used)
        if done.result != z3.unsat:
            why = done.reason(solver)
            return SearchAnswer(NOT_PROVED, time.perf_counter() - started, None, why, used)
        solver.pop()
        state = fresh
    return SearchAnswer(PROVED, time.perf_counter() - started, units=used)


def _chosen(model: Any, s: EngineSystem) -> tuple[Workload, EngineConfig]:
    def value(term: Any) -> int:
        return int(model.eval(term, model_completion=True).as_long())

    requests = tuple(
        Request(f"r{i}", value(s.arrival[i]), value(s.prompt[i]), value(s.output[i]))
        for i in range(s.size)
    )
    limits = Limits(value(s.batch_limit), s.page_size, value(s.pool_pages))
    workload = Workload(name=f"engine-{s.batching}-witness", limits=limits, requests=requests)
    admits = z3.is_true(model.eval(s.admit_after_preemption, model_completion=True))
    return workload, engine_config(s.batching, value(s.token_budget), value(s.watermark), admits)


def engine_config(
    batching: Batching, token_budget: int, watermark: int, admit_after_preemption: bool = False
) -> EngineConfig:
    """The reference design the model describes, with these choices (:mod:`.scope`)."""
    return EngineConfig(
        token_budget=token_budget,
        chunking="all",
        batching=batching,
        order="fcfs",
        victim="last",
        prefix_caching=False,
        watermark_pages=watermark,
        null_page=False,
        admit_after_preemption=admit_after_preemption,
        name=f"model-{batching}" + ("-admitting" if admit_after_preemption else ""),
    )
