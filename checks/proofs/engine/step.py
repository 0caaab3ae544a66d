"""One iteration of the reference engine scheduler as Z3 terms (spec/semantics.md, 10).

It follows ``EngineScheduler.schedule()`` and ``update_from_output()`` statement by statement,
for the design :mod:`.scope` admits: running requests in admission order, each taking the pages
for its chunk and, when they are not free, preempting the last admitted (possibly itself, which
ends the loop); admission from the queue's head while a slot, the budget and the pages with the
watermark to spare allow, unless the iteration preempted and the design admits nobody then;
``mixed`` batching runs the batch then admits, ``prefill-first`` runs continuing chunks, admits,
and decodes only if nothing was computed. The loops are unrolled ``n`` times (each preemption or
admission moves one of ``n`` requests), and every statement is guarded, so one term covers every
path. The monitor's LIVE-3 bookkeeping (progress, high-water marks, stamps at preemption) rides
along so the model can state it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.engine.index_lists import Slots
from kvsched.checks.proofs.engine.system import (
    FINISHED,
    NEVER,
    RUNNING,
    WAITING,
    EngineState,
    EngineSystem,
)


@dataclass(frozen=True)
class EngineIteration:
    """What one iteration did, in the vocabulary of the engine's events."""

    number: Any
    admitted: Slots
    preempted: Slots
    computed: tuple[Any, ...]
    """Tokens each request computed in this iteration (0: none)."""
    decoded: tuple[Any, ...]
    finished: tuple[Any, ...]
    held: tuple[Any, ...]
    """Pages each request holds once ``schedule()`` returns (the page tables' sizes)."""
    kv: tuple[Any, ...]
    """Each request's computed tokens once ``schedule()`` returns."""
    running: Slots
    waiting: Slots
    """The batch and the queue once ``schedule()`` returns."""
    free: Any
    """Free pages once ``schedule()`` returns."""
    overdrawn: Any
    """Some chunk took pages that were not free."""
    thrash: Any
    """A request was preempted again with no progress since its last preemption (LIVE-3)."""


class Binder:
    """Names intermediate terms so that a loop body does not nest the previous one.

    On a concrete workload it evaluates them (``z3.simplify`` turns the model into a
    simulator); in a proof it binds each to a fresh constant and keeps the equality in
    :attr:`facts`, which the solver must be given with the iteration.
    """

    def __init__(self, tag: str = "") -> None:
        self.tag = tag
        self.facts: list[Any] = []
        self._count = 0

    def __call__(self, term: Any) -> Any:
        if not self.tag:
            return z3.simplify(term)
        self._count += 1
        name = f"{self.tag}_{self._count}"
        fresh = z3.Bool(name) if z3.is_bool(term) else z3.Int(name)
        self.facts.append(fresh == term)
        return fresh


class _Work:
    """The scheduler's variables while one iteration is built, as terms."""

    def __init__(self, s: EngineSystem, state: EngineState, bind: Binder) -> None:
        self.s = s
        self.bind = bind
        self.free = state.free
        self.phase = list(state.phase)
        self.computed = list(state.computed)
        self.held = list(state.held)
        self.running = state.running
        self.waiting = state.waiting
        self.budget = s.token_budget
        self.chunk: list[Any] = [z3.IntVal(0)] * s.size
        self.admitted = Slots.empty(s.size)
        self.preempted = Slots.empty(s.size)
        self.overdrawn: Any = z3.BoolVal(False)

    def checkpoint(self) -> None:
        """Name every variable of the scheduler (see :class:`Binder`)."""
        b = self.bind
        self.free, self.budget, self.overdrawn = b(self.free), b(self.budget), b(self.overdrawn)
        for values in (self.phase, self.computed, self.held, self.chunk):
            values[:] = [b(v) for v in values]
        for name in ("running", "waiting", "admitted", "preempted"):
            slots: Slots = getattr(self, name)
            setattr(self, name, Slots(tuple(b(x) for x in slots.items), b(slots.length)))

    def pick(self, values: list[Any] | tuple[Any, ...], who: Any) -> Any:
        """``values[who]`` for a request index that is a term."""
        out: Any = z3.IntVal(0)
        for i in range(self.s.size):
            out = z3.If(who == i, values[i], out)
        return out

    def preempt(self, victim: Any, when: Any) -> None:
        """``_preempt``: every page released, KV forgotten, back to the queue's head."""
        for i in range(self.s.size):
            hit = z3.And(when, victim == i)
            self.budget += z3.If(hit, self.chunk[i], 0)
            self.free += z3.If(hit, self.held[i], 0)
            self.held[i] = z3.If(hit, 0, self.held[i])
            self.computed[i] = z3.If(hit, 0, self.computed[i])
            self.chunk[i] = z3.If(hit, 0, self.chunk[i])
            self.phase[i] = z3.If(hit, WAITING, self.phase[i])
        self.running = self.running.remove(victim, when)
        self.waiting = self.waiting.push_front(victim, when)
        self.preempted = self.preempted.append(victim, when)
        self.checkpoint()

    def run(self, tokens: list[Any], only_chunks: bool, enabled: Any) -> None:
        """``_run`` over a snapshot of the batch; ``only_chunks``: prefill-first's first pass."""
        snapshot, going = self.running, enabled
        for k in range(self.s.size):
            seq = snapshot.items[k]
            rest = self.pick(tokens, seq) - self.pick(self.computed, seq)
            go = z3.And(going, k < snapshot.length, self.pick(self.phase, seq) == RUNNING)
            go = z3.And(go, self.budget > 0, rest > 1 if only_chunks else rest > 0)
            count = z3.If(rest < self.budget, rest, self.budget)
            needed = self.s.pages(self.pick(self.computed, seq) + count) - self.pick(self.held, seq)
            for _ in range(self.s.size):  # each round preempts one of n requests
                short = z3.And(go, self.free < needed)
                victim = self.running.last()
                self.preempt(victim, short)
                ended = z3.And(short, victim == seq)
                going = z3.And(going, z3.Not(ended))
                go = z3.And(go, z3.Not(ended))
            self.overdrawn = z3.Or(self.overdrawn, z3.And(go, self.free < needed))
            take = z3.If(needed > 0, needed, 0)
            self.free -= z3.If(go, take, 0)
            for i in range(self.s.size):
                mine = z3.And(go, seq == i)
                self.held[i] += z3.If(mine, take, 0)
                self.chunk[i] = z3.If(mine, count, self.chunk[i])
            self.budget -= z3.If(go, count, 0)
            going = self.bind(going)
            self.checkpoint()

    def admit(self, tokens: list[Any], enabled: Any) -> None:
        """``_admit`` under fcfs with every prompt chunkable, no prefix cache."""
        going = enabled
        for _ in range(self.s.size):
            head = self.waiting.head()
            going = z3.And(going, self.waiting.length > 0, self.budget > 0)
            going = z3.And(going, self.running.length < self.s.batch_limit)
            want = self.pick(tokens, head)
            count = z3.If(want < self.budget, want, self.budget)
            fresh = self.s.pages(count)
            keep = z3.If(self.running.length > 0, self.s.watermark, 0)
            going = z3.And(going, self.free >= fresh + keep)
            self.free -= z3.If(going, fresh, 0)
            for i in range(self.s.size):
                mine = z3.And(going, head == i)
                self.held[i] = z3.If(mine, fresh, self.held[i])
                self.computed[i] = z3.If(mine, 0, self.computed[i])
                self.chunk[i] = z3.If(mine, count, self.chunk[i])
                self.phase[i] = z3.If(mine, RUNNING, self.phase[i])
            self.waiting = self.waiting.remove(head, going)
            self.running = self.running.append(head, going)
            self.admitted = self.admitted.append(head, going)
            self.budget -= z3.If(going, count, 0)
            going = self.bind(going)
            self.checkpoint()


def transition(
    s: EngineSystem, state: EngineState, bind: Binder | None = None
) -> tuple[EngineIteration, EngineState]:
    """Iteration ``state.time + 1``: arrivals, ``schedule()``, the model, ``update``.

    ``bind`` names intermediate terms; its facts must join the iteration's (see :class:`Binder`).
    """
    n = state.time + 1
    work = _Work(s, state, bind or Binder())
    for i in range(s.size):  # 3.1: arrival order is index order
        arrives = z3.And(work.phase[i] == 0, s.arrival[i] < n)
        work.waiting = work.waiting.append(z3.IntVal(i), arrives)
        work.phase[i] = z3.If(arrives, WAITING, work.phase[i])
    tokens = [s.tokens(i, state.generated[i]) for i in range(s.size)]
    yes = z3.BoolVal(True)
    work.run(tokens, only_chunks=s.batching == "prefill-first", enabled=yes)
    work.admit(tokens, enabled=z3.Or(s.admit_after_preemption, work.preempted.length == 0))
    if s.batching == "prefill-first":
        work.run(tokens, only_chunks=False, enabled=z3.And(*[c == 0 for c in work.chunk]))
    kv = [work.computed[i] + work.chunk[i] for i in range(s.size)]
    decoded = [z3.And(work.chunk[i] > 0, kv[i] == tokens[i]) for i in range(s.size)]
    generated = [state.generated[i] + z3.If(decoded[i], 1, 0) for i in range(s.size)]
    finished = [z3.And(decoded[i], generated[i] == s.output[i]) for i in range(s.size)]
    progress = state.progress + z3.Sum([z3.If(d, 1, 0) for d in decoded])
    most = []
    for i in range(s.size):
        beyond = z3.And(work.chunk[i] > 0, kv[i] > state.most[i])
        progress += z3.If(beyond, kv[i] - state.most[i], 0)
        most.append(z3.If(beyond, kv[i], state.most[i]))
    thrash, stamp = _stamps(s, state, work.preempted, progress)
    it = EngineIteration(
        number=n,
        admitted=work.admitted,
        preempted=work.preempted,
        computed=tuple(work.chunk),
        decoded=tuple(decoded),
        finished=tuple(finished),
        held=tuple(work.held),
        kv=tuple(kv),
        running=work.running,
        waiting=work.waiting,
        free=work.free,
        overdrawn=work.overdrawn,
        thrash=thrash,
    )
    running, free = work.running, work.free
    for i in range(s.size):  # update_from_output: a stopped request frees its table
        running = running.remove(z3.IntVal(i), finished[i])
        free += z3.If(finished[i], work.held[i], 0)
    after = EngineState(
        time=n,
        free=free,
        phase=tuple(z3.If(finished[i], FINISHED, work.phase[i]) for i in range(s.size)),
        generated=tuple(generated),
        computed=tuple(kv),
        held=tuple(z3.If(finished[i], 0, work.held[i]) for i in range(s.size)),
        running=running,
        waiting=work.waiting,
        most=tuple(most),
        stamp=stamp,
        progress=progress,
    )
    return it, after


def _stamps(
    s: EngineSystem, state: EngineState, preempted: Slots, progress: Any
) -> tuple[Any, tuple[Any, ...]]:
    """The monitor's LIVE-3: a request preempted again while ``progress``, counted to the end
    of this iteration, still equals its stamp; the stamp is where progress stood before it."""
    thrash = []
    stamp = []
    for i in range(s.size):
        now = preempted.contains(i)
        thrash.append(z3.And(now, state.stamp[i] != NEVER, state.stamp[i] == progress))
        stamp.append(z3.If(now, state.progress, state.stamp[i]))
    return z3.Or(*thrash), tuple(stamp)
