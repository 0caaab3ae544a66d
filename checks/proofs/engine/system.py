"""The engine model's workload, design and state as Z3 terms (spec/proofs.md, section 8).

A :class:`EngineSystem` is a workload with an engine design: arrivals, lengths, batch limit,
pool, token budget, watermark and whether admission follows a preemption are Z3 terms (fresh
constants when a proof ranges over every workload within the bounds, values when the model
replays one); the page size and the batching are Python values, one query each, so page
arithmetic stays linear. Requests are numbered in
admission order (by arrival, ties in declared order), as the existing model numbers them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.engine.index_lists import EMPTY, Slots
from kvsched.checks.proofs.page_lemmas import ceil_pages
from kvsched.spec.vocabulary import Batching, RequestStatus

ABSENT, WAITING, RUNNING, FINISHED = (int(status) for status in RequestStatus)
"""A request's phase, as z3 ints: not arrived yet, in the waiting queue, in the batch, done."""
NEVER = -1
"""The progress stamp of a request never preempted."""


@dataclass(frozen=True)
class EngineSystem:
    arrival: tuple[Any, ...]
    prompt: tuple[Any, ...]
    output: tuple[Any, ...]
    batch_limit: Any
    pool_pages: Any
    token_budget: Any
    watermark: Any
    admit_after_preemption: Any
    """A Z3 Boolean: ``EngineConfig.admit_after_preemption``."""
    page_size: int
    batching: Batching
    ids: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return len(self.arrival)

    def pages(self, tokens: Any) -> Any:
        return ceil_pages(tokens, z3.IntVal(self.page_size))

    def tokens(self, i: int, generated: Any) -> Any:
        """Positions to compute before request ``i`` samples its next token; an empty prompt
        starts from one position of its own, as the reference's ``Seq.tokens`` does."""
        prompt = self.prompt[i]
        return prompt + generated + z3.If(prompt == 0, 1, 0)

    def valid(self) -> list[Any]:
        """What the workload loader and ``EngineConfig`` accept (section 1, section 10)."""
        facts = [self.batch_limit >= 1, self.pool_pages >= 1, self.token_budget >= 1]
        facts.append(self.watermark >= 0)
        facts += [self.arrival[i] <= self.arrival[i + 1] for i in range(self.size - 1)]
        for i in range(self.size):
            facts += [self.arrival[i] >= 0, self.prompt[i] >= 0, self.output[i] >= 1]
            facts.append(self.pages(self.prompt[i] + self.output[i]) <= self.pool_pages)
        return facts


def symbolic_system(size: int, page_size: int, batching: Batching) -> EngineSystem:
    def ints(name: str) -> tuple[Any, ...]:
        return tuple(z3.Int(f"e_{name}_{i}") for i in range(size))

    return EngineSystem(
        arrival=ints("arrival"),
        prompt=ints("prompt"),
        output=ints("output"),
        batch_limit=z3.Int("e_batch_limit"),
        pool_pages=z3.Int("e_pool_pages"),
        token_budget=z3.Int("e_token_budget"),
        watermark=z3.Int("e_watermark"),
        admit_after_preemption=z3.Bool("e_admit_after_preemption"),
        page_size=page_size,
        batching=batching,
    )


@dataclass(frozen=True)
class EngineState:
    """Between iterations: what the reference's scheduler and the monitor's LIVE-3 keep."""

    time: Any
    free: Any
    phase: tuple[Any, ...]
    generated: tuple[Any, ...]
    computed: tuple[Any, ...]
    held: tuple[Any, ...]
    """Pages in each request's table (a count: the model has no page ids)."""
    running: Slots
    waiting: Slots
    most: tuple[Any, ...]
    """The most KV each request ever held (the monitor's high-water mark, LIVE-3)."""
    stamp: tuple[Any, ...]
    """Progress at each request's latest preemption, :data:`NEVER` if none."""
    progress: Any
    """Tokens produced plus KV computed beyond any request's earlier most (LIVE-3)."""

    def terms(self) -> list[Any]:
        return [
            self.time,
            self.free,
            *self.phase,
            *self.generated,
            *self.computed,
            *self.held,
            *self.running.items,
            self.running.length,
            *self.waiting.items,
            self.waiting.length,
            *self.most,
            *self.stamp,
            self.progress,
        ]


def fresh_state(size: int, tag: str) -> EngineState:
    def ints(name: str) -> tuple[Any, ...]:
        return tuple(z3.Int(f"{tag}_{name}_{i}") for i in range(size))

    return EngineState(
        time=z3.Int(f"{tag}_time"),
        free=z3.Int(f"{tag}_free"),
        phase=ints("phase"),
        generated=ints("generated"),
        computed=ints("computed"),
        held=ints("held"),
        running=Slots(ints("running"), z3.Int(f"{tag}_running_len")),
        waiting=Slots(ints("waiting"), z3.Int(f"{tag}_waiting_len")),
        most=ints("most"),
        stamp=ints("stamp"),
        progress=z3.Int(f"{tag}_progress"),
    )


def initial_state(system: EngineSystem) -> EngineState:
    """Nothing arrived, every page free, no progress yet."""
    zeros = tuple(z3.IntVal(0) for _ in range(system.size))
    return EngineState(
        time=z3.IntVal(0),
        free=system.pool_pages,
        phase=tuple(z3.IntVal(ABSENT) for _ in range(system.size)),
        generated=zeros,
        computed=zeros,
        held=zeros,
        running=Slots.empty(system.size),
        waiting=Slots.empty(system.size),
        most=zeros,
        stamp=tuple(z3.IntVal(NEVER) for _ in range(system.size)),
        progress=z3.IntVal(0),
    )


def same(a: EngineState, b: EngineState) -> list[Any]:
    """Equalities binding state ``a`` (fresh constants) to ``b`` (terms)."""
    return [x == y for x, y in zip(a.terms(), b.terms(), strict=True)]


__all__ = ["EMPTY", "EngineState", "EngineSystem", "fresh_state", "initial_state", "same"]
