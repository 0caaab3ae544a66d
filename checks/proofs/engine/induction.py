"""The safety layer of the engine model by induction: every iteration, every workload of ``n``
requests (spec/proofs.md, section 8.2).

:func:`state_facts` is an invariant of the engine's state between iterations. It holds
initially, and from *any* state satisfying it (not only a reachable one) one iteration leads to
a state satisfying it and obeying every safety claim of :mod:`.claims`. So the claims hold in
every iteration of every run, with arrivals, lengths, batch limit, pool, token budget,
watermark and ``admit_after_preemption`` symbolic (unbounded); the number of requests and the
page size are fixed per query.
Unrolling instead (:mod:`.unroll`) grows exponentially with the depth, so it is kept for LIVE-3,
which is about paths.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.engine.claims import safety_claims
from kvsched.checks.proofs.engine.index_lists import EMPTY, Slots
from kvsched.checks.proofs.engine.step import Binder, EngineIteration, transition
from kvsched.checks.proofs.engine.system import (
    ABSENT,
    FINISHED,
    RUNNING,
    WAITING,
    EngineState,
    EngineSystem,
    fresh_state,
    initial_state,
    symbolic_system,
)
from kvsched.checks.proofs.query import (
    NOT_PROVED,
    PROVED,
    REFUTED,
    Checked,
    check,
    exhibit,
    new_solver,
)
from kvsched.spec.vocabulary import Batching


def _well_formed(slots: Slots, size: int) -> list[Any]:
    facts = [slots.length >= 0, slots.length <= size]
    for j, x in enumerate(slots.items):
        facts.append(z3.If(j < slots.length, z3.And(x >= 0, x < size), x == EMPTY))
        facts += [z3.Implies(j < slots.length, x != y) for y in slots.items[j + 1 :]]
    return facts


def state_facts(s: EngineSystem, st: EngineState) -> list[Any]:
    """What holds between iterations: lists, phases, pages, tokens."""
    return [f for group in named_state_facts(s, st).values() for f in group]


def named_state_facts(s: EngineSystem, st: EngineState) -> dict[str, list[Any]]:
    """:func:`state_facts` by name, so a test can drop one and see the proof fail."""
    facts: dict[str, list[Any]] = {
        "lists": _well_formed(st.running, s.size) + _well_formed(st.waiting, s.size),
        "pool": [st.free >= 0, st.free + z3.Sum(list(st.held)) == s.pool_pages],
        "batch": [st.time >= 0, st.running.length <= s.batch_limit],
    }
    for name in ("phases", "not-arrived-is-empty", "waiting-has-no-kv", "pages", "tokens"):
        facts[name] = []
    for i in range(s.size):
        phase, gen, kv, held = st.phase[i], st.generated[i], st.computed[i], st.held[i]
        running = phase == RUNNING
        facts["phases"] += [
            phase >= ABSENT,
            phase <= FINISHED,
            st.running.contains(i) == running,
            st.waiting.contains(i) == (phase == WAITING),
            (phase == ABSENT) == (s.arrival[i] >= st.time),
            (phase == FINISHED) == (gen == s.output[i]),
        ]
        facts["not-arrived-is-empty"].append(z3.Implies(phase == ABSENT, z3.And(gen == 0, kv == 0)))
        facts["waiting-has-no-kv"].append(z3.Implies(phase == WAITING, kv == 0))
        facts["pages"].append(z3.If(running, held == s.pages(kv), held == 0))
        facts["tokens"] += [gen >= 0, gen <= s.output[i]]
        facts["tokens"].append(z3.Implies(running, z3.And(kv >= 0, kv < s.tokens(i, gen))))
    return facts


@dataclass(frozen=True)
class InductionAnswer:
    verdict: str
    seconds: float
    """Wall time, building the model included: reported, never a budget."""
    failed: tuple[str, ...] = ()
    """Claims (or ``state-invariant``) the step did not prove, when not proved."""
    reason: str = ""
    units: int = 0
    """Z3 resource units the checks consumed."""


Facts = Callable[[EngineSystem, EngineState], list[Any]]
StepClaims = Callable[[EngineSystem, EngineState, EngineIteration, EngineState], dict[str, Any]]


def prove_safety(
    batching: Batching,
    requests: int,
    page_size: int,
    rlimit: int,
    admit_after_preemption: bool | None = None,
) -> InductionAnswer:
    """The safety layer: :func:`state_facts` is inductive and implies every safety claim."""

    def claims(s: EngineSystem, b: EngineState, it: EngineIteration, a: EngineState) -> Any:
        return {c.name: c.term for c in safety_claims(s, b, it, a)}

    return prove_inductive(
        batching, requests, page_size, rlimit, state_facts, claims, admit_after_preemption
    )


def prove_inductive(
    batching: Batching,
    requests: int,
    page_size: int,
    rlimit: int,
    facts: Facts,
    step_claims: StepClaims,
    admit_after_preemption: bool | None = None,
) -> InductionAnswer:
    """Initiation, consecution and a vacuity check for one batching and page size; the design's
    ``admit_after_preemption`` pinned, or either (``None``); ``rlimit`` Z3 resource units per
    check."""
    state_facts = facts
    started = time.perf_counter()
    s = symbolic_system(requests, page_size, batching)
    solver = new_solver(rlimit)
    solver.add(*s.valid())
    if admit_after_preemption is not None:
        solver.add(s.admit_after_preemption == z3.BoolVal(admit_after_preemption))
    solver.push()
    solver.add(z3.Not(z3.And(*state_facts(s, initial_state(s)))))
    initiation = check(solver)
    solver.pop()
    if initiation.result != z3.unsat:
        return _open(started, [initiation], ("state-invariant initially",), solver)
    before = fresh_state(requests, "pre")
    bind = Binder("step_")
    it, after = transition(s, before, bind)
    solver.add(*state_facts(s, before), *bind.facts)
    claims = step_claims(s, before, it, after)
    claims["state-invariant"] = z3.And(*state_facts(s, after))
    step = check(solver, z3.Not(z3.And(*claims.values())))
    if step.result != z3.unsat:
        model = solver.model() if step.result == z3.sat else None
        failed = tuple(
            name for name, term in claims.items() if model is None or z3.is_false(model.eval(term))
        )
        return _open(started, [initiation, step], failed, solver)
    # The hypotheses are not contradictory: a state mid-run, one request running, one waiting.
    alive = exhibit(solver, z3.And(before.running.length >= 1, before.waiting.length >= 1))
    seconds = time.perf_counter() - started
    units = initiation.units + step.units + alive.units
    if alive.verdict != PROVED:
        return InductionAnswer(REFUTED, seconds, ("vacuity",), units=units)
    return InductionAnswer(PROVED, seconds, units=units)


def _open(
    started: float, checks: list[Checked], failed: tuple[str, ...], solver: Any
) -> InductionAnswer:
    seconds, units = time.perf_counter() - started, sum(c.units for c in checks)
    last = checks[-1]
    # sat: a state satisfying the invariant that may be unreachable
    why = "counterexample to induction" if last.result == z3.sat else last.reason(solver)
    return InductionAnswer(NOT_PROVED, seconds, failed, why, units)
